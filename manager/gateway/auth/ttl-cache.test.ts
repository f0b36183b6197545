import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TtlCache } from './ttl-cache.ts';

function clock(start = 1_000) {
  const state = { now: start };
  return { state, now: () => state.now };
}

test('entries expire after their own TTL', () => {
  const { state, now } = clock();
  const cache = new TtlCache<string, string>({ maxEntries: 10, now });
  cache.set('short', 'a', 100);
  cache.set('long', 'b', 1_000);
  state.now += 99;
  assert.equal(cache.get('short'), 'a');
  state.now += 1;
  assert.equal(cache.get('short'), undefined);
  assert.equal(cache.get('long'), 'b');
  state.now += 900;
  assert.equal(cache.get('long'), undefined);
  assert.equal(cache.size, 0);
});

test('a zero or negative TTL stores nothing and drops an older value', () => {
  const cache = new TtlCache<string, number>({ maxEntries: 10 });
  cache.set('k', 1, 1_000);
  cache.set('k', 2, 0);
  assert.equal(cache.get('k'), undefined);
});

test('the least recently used entry is evicted first', () => {
  const cache = new TtlCache<string, number>({ maxEntries: 3 });
  cache.set('a', 1, 1_000);
  cache.set('b', 2, 1_000);
  cache.set('c', 3, 1_000);
  assert.equal(cache.get('a'), 1); // a is now the most recent
  cache.set('d', 4, 1_000);
  assert.equal(cache.get('b'), undefined);
  assert.deepEqual(
    ['a', 'c', 'd'].map((key) => cache.get(key)),
    [1, 3, 4],
  );
  assert.equal(cache.size, 3);
});

test('concurrent loads of one key run once and share the result', async () => {
  const { state, now } = clock();
  const cache = new TtlCache<string, string>({ maxEntries: 10, now });
  let loads = 0;
  let release!: (value: string) => void;
  const load = () => {
    loads++;
    return new Promise<string>((resolve) => {
      release = resolve;
    });
  };
  const pending = [cache.getOrLoad('k', load, () => 500), cache.getOrLoad('k', load, () => 500)];
  await new Promise(setImmediate);
  release('value');
  assert.deepEqual(await Promise.all(pending), ['value', 'value']);
  assert.equal(loads, 1);
  // Served from the cache until the TTL the loader's value chose runs out.
  assert.equal(await cache.getOrLoad('k', load, () => 500), 'value');
  assert.equal(loads, 1);
  state.now += 500;
  const again = cache.getOrLoad(
    'k',
    async () => 'fresh',
    () => 500,
  );
  assert.equal(await again, 'fresh');
});

test('a failed load reaches every waiter and is not cached', async () => {
  const cache = new TtlCache<string, string>({ maxEntries: 10 });
  let loads = 0;
  const failing = async () => {
    loads++;
    await new Promise((resolve) => setTimeout(resolve, 5));
    throw new Error('boom');
  };
  const results = await Promise.allSettled([
    cache.getOrLoad('k', failing, () => 1_000),
    cache.getOrLoad('k', failing, () => 1_000),
  ]);
  assert.deepEqual(
    results.map((result) => result.status),
    ['rejected', 'rejected'],
  );
  assert.equal(loads, 1);
  assert.equal(
    await cache.getOrLoad(
      'k',
      async () => 'ok',
      () => 1_000,
    ),
    'ok',
  );
});

test('a loader that throws synchronously still rejects and frees the key', async () => {
  const cache = new TtlCache<string, string>({ maxEntries: 10 });
  await assert.rejects(
    cache.getOrLoad(
      'k',
      () => {
        throw new Error('sync');
      },
      () => 1_000,
    ),
    /sync/,
  );
  assert.equal(
    await cache.getOrLoad(
      'k',
      async () => 'ok',
      () => 1_000,
    ),
    'ok',
  );
});

test('clear() discards values and keeps in-flight loads from repopulating', async () => {
  const cache = new TtlCache<string, string>({ maxEntries: 10 });
  let release!: (value: string) => void;
  const stale = cache.getOrLoad(
    'k',
    () =>
      new Promise<string>((resolve) => {
        release = resolve;
      }),
    () => 1_000,
  );
  await new Promise(setImmediate);
  cache.clear();
  release('stale');
  assert.equal(await stale, 'stale');
  assert.equal(cache.get('k'), undefined);
});

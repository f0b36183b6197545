import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeObject } from '../../../shared/kube/client.ts';
import { createFreshRead, type WatchedSource } from './fresh-read.ts';

/** A hub of objects by path, and an informer cache that lags behind it until told. */
function setup() {
  const hub = new Map<string, KubeObject>();
  const cache = new Map<string, string>();
  let failing = false;
  const source: WatchedSource = {
    path: (name) => `/secrets/${name}`,
    cached: (name) => cache.get(name),
    selects: (object) => object.metadata?.labels?.selected === 'yes',
  };
  const fresh = createFreshRead({
    hub: {
      getOptional: async <T extends KubeObject>(path: string) => {
        if (failing) throw new Error('hub down');
        return hub.get(path) as T | undefined;
      },
    },
    sources: [source],
    pollMs: 1,
  });
  const object = (rv: string, selected = 'yes'): KubeObject => ({
    metadata: { name: 'c1', resourceVersion: rv, labels: { selected } },
  });
  return { hub, cache, fresh, object, fail: () => (failing = true) };
}

test('a GET waits until the cache holds the version the hub holds', async () => {
  const { hub, cache, fresh, object } = setup();
  hub.set('/secrets/c1', object('12'));
  cache.set('c1', '11');
  let done = false;
  const reading = fresh('c1').then(() => (done = true));
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(done, false, 'the write another replica answered is not in this cache yet');
  cache.set('c1', '12');
  await reading;
  assert.equal(done, true);
});

test('a deleted object waits for the cache to drop it; an object the informer does not select counts as absent', async () => {
  const { hub, cache, fresh, object } = setup();
  cache.set('c1', '7');
  const reading = fresh('c1');
  setTimeout(() => cache.delete('c1'), 10);
  await reading;
  hub.set('/secrets/c1', object('9', 'no'));
  await fresh('c1'); // not selected, not cached: nothing to wait for
});

test('a cache that never catches up is a 504 after three seconds; a hub that cannot be asked is not waited for', async () => {
  const { hub, cache, fresh, object, fail } = setup();
  hub.set('/secrets/c1', object('20'));
  cache.set('c1', '19');
  await assert.rejects(fresh('c1'), (err: { code?: number; message?: string }) => {
    assert.equal(err.code, 504);
    assert.match(err.message ?? '', /Too large resource version: 20/);
    return true;
  });
  fail();
  await fresh('c1');
});

test('concurrent reads of a cluster share the hub: those arriving during a check share the next one', async () => {
  const { hub, cache, object } = setup();
  hub.set('/secrets/c1', object('12'));
  cache.set('c1', '12');
  let gets = 0;
  let release: (() => void) | undefined;
  const fresh = createFreshRead({
    hub: {
      getOptional: async <T extends KubeObject>(path: string) => {
        gets++;
        await new Promise<void>((resolve) => (release = resolve));
        return hub.get(path) as T | undefined;
      },
    },
    sources: [{ path: (n) => `/secrets/${n}`, cached: (n) => cache.get(n), selects: () => true }],
    pollMs: 1,
  });
  const first = fresh('c1');
  const during = [fresh('c1'), fresh('c1'), fresh('c1')];
  assert.equal(gets, 1, 'one check under way');
  release?.();
  await first;
  await new Promise((r) => setImmediate(r));
  assert.equal(gets, 2, 'the three that came during it share one more');
  release?.();
  await Promise.all(during);
  assert.equal(gets, 2);
});

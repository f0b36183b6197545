import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Backoff, sleep } from './backoff.ts';

test('grows exponentially up to the cap, each wait within [step/2, step]', () => {
  const low = new Backoff({ initialMs: 1000, maxMs: 8000, random: () => 0 });
  assert.deepEqual(
    Array.from({ length: 6 }, () => low.next()),
    [500, 1000, 2000, 4000, 4000, 4000],
  );
  const high = new Backoff({ initialMs: 1000, maxMs: 8000, random: () => 1 });
  assert.deepEqual(
    Array.from({ length: 5 }, () => high.next()),
    [1000, 2000, 4000, 8000, 8000],
  );
  high.reset();
  assert.equal(high.next(), 1000);
});

test('jitter spreads agents that failed together', () => {
  const waits = new Set(
    Array.from({ length: 50 }, () => new Backoff({ initialMs: 1000, maxMs: 30_000 }).next()),
  );
  assert.ok(waits.size > 30, `distinct first waits: ${waits.size}`);
});

test('sleep ends early when stopped', async () => {
  const stop = new AbortController();
  const started = performance.now();
  setTimeout(() => stop.abort(), 20);
  await sleep(10_000, stop.signal);
  assert.ok(performance.now() - started < 1000);
});

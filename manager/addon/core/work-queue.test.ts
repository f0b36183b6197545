import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { retryDelay, WorkQueue } from './work-queue.ts';

describe('WorkQueue', () => {
  test('a reconcile that asks to be looked at again runs again after that delay', async () => {
    const runs: number[] = [];
    const queue = new WorkQueue({
      process: async () => {
        runs.push(Date.now());
        return runs.length < 2 ? { requeueAfterMs: 50 } : undefined;
      },
    });
    const stop = new AbortController();
    queue.add('a');
    queue.start(stop.signal);
    await delay(200);
    stop.abort();
    assert.equal(runs.length, 2, 'once, then once more after the delay, then no more');
    assert.ok((runs[1] ?? 0) - (runs[0] ?? 0) >= 45);
  });

  test('a key queued many times runs once', async () => {
    const runs: string[] = [];
    const queue = new WorkQueue({ process: async (key) => void runs.push(key) });
    for (let i = 0; i < 5; i++) queue.add('a');
    queue.add('b');
    const stop = new AbortController();
    queue.start(stop.signal);
    await queue.idle();
    assert.deepEqual(runs, ['a', 'b']);
    stop.abort();
  });

  test('one worker per key: a key added while it runs runs again once, right after, never in parallel', async () => {
    let running = 0;
    let maxParallel = 0;
    let runs = 0;
    const queue = new WorkQueue({
      workers: 4,
      process: async () => {
        running++;
        maxParallel = Math.max(maxParallel, running);
        runs++;
        await delay(20);
        running--;
      },
    });
    const stop = new AbortController();
    queue.start(stop.signal);
    queue.add('a');
    await delay(5);
    queue.add('a');
    queue.add('a');
    await delay(5);
    await queue.idle();
    await delay(30);
    await queue.idle();
    assert.equal(maxParallel, 1);
    assert.equal(runs, 2, 'the first run, then one more for the adds during it');
    stop.abort();
  });

  test('different keys run in parallel up to the worker count', async () => {
    let running = 0;
    let maxParallel = 0;
    const queue = new WorkQueue({
      workers: 2,
      process: async () => {
        running++;
        maxParallel = Math.max(maxParallel, running);
        await delay(15);
        running--;
      },
    });
    for (const k of ['a', 'b', 'c', 'd']) queue.add(k);
    const stop = new AbortController();
    queue.start(stop.signal);
    await queue.idle();
    assert.equal(maxParallel, 2);
    stop.abort();
  });

  test('a failure retries with growing backoff; a success resets it', async () => {
    const at: number[] = [];
    let fail = 3;
    const errors: number[] = [];
    const queue = new WorkQueue({
      backoff: { initialMs: 10, maxMs: 1000, factor: 2 },
      process: async () => {
        at.push(Date.now());
        if (fail-- > 0) throw new Error('boom');
      },
      onError: (_key, _err, retryInMs) => errors.push(retryInMs),
    });
    const stop = new AbortController();
    queue.start(stop.signal);
    queue.add('a');
    await delay(200);
    assert.equal(at.length, 4, 'three failures, then a success');
    assert.deepEqual(errors, [10, 20, 40]);
    assert.equal(queue.failures('a'), 0);
    for (let i = 1; i < at.length; i++) {
      assert.ok((at[i] ?? 0) - (at[i - 1] ?? 0) >= (errors[i - 1] ?? 0) - 2, 'waited its backoff');
    }
    stop.abort();
  });

  test('retryDelay is capped', () => {
    assert.equal(retryDelay(1, { initialMs: 100, maxMs: 1000, factor: 2 }), 100);
    assert.equal(retryDelay(4, { initialMs: 100, maxMs: 1000, factor: 2 }), 800);
    assert.equal(retryDelay(40, { initialMs: 100, maxMs: 1000, factor: 2 }), 1000);
  });

  test('addAfter: the earliest pending delay wins; abort cancels', async () => {
    const runs: number[] = [];
    const queue = new WorkQueue({ process: async () => void runs.push(Date.now()) });
    const stop = new AbortController();
    queue.start(stop.signal);
    const t0 = Date.now();
    queue.addAfter('a', 200);
    queue.addAfter('a', 20);
    await delay(80);
    assert.equal(runs.length, 1);
    assert.ok((runs[0] ?? 0) - t0 < 150);
    queue.addAfter('b', 30);
    stop.abort();
    await delay(60);
    assert.equal(runs.length, 1, 'nothing runs after abort');
  });
});

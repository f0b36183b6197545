import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backoffDelay, defaultBackoff } from './backoff.ts';

const policy = { initialMs: 100, maxMs: 1000, factor: 2 };

test('each step doubles, jittered between half and all of it', () => {
  assert.equal(
    backoffDelay(1, policy, () => 0),
    50,
  );
  assert.equal(
    backoffDelay(1, policy, () => 1),
    100,
  );
  assert.equal(
    backoffDelay(2, policy, () => 0),
    100,
  );
  assert.equal(
    backoffDelay(3, policy, () => 0.5),
    300,
  );
});

test('capped: never more than maxMs, and still jittered at the cap', () => {
  assert.equal(
    backoffDelay(50, policy, () => 1),
    1000,
  );
  assert.equal(
    backoffDelay(50, policy, () => 0),
    500,
  );
  for (let attempt = 1; attempt < 40; attempt++) {
    const ms = backoffDelay(attempt);
    assert.ok(ms > 0 && ms <= defaultBackoff.maxMs, `attempt ${attempt}: ${ms} ms`);
  }
});

test('jitter spreads clients that fail at the same instant', () => {
  const delays = new Set(Array.from({ length: 50 }, () => backoffDelay(4)));
  assert.ok(delays.size > 10, `${delays.size} distinct delays of 50`);
});

test('an attempt below 1 is a programming error', () => {
  assert.throws(() => backoffDelay(0), RangeError);
  assert.throws(() => backoffDelay(1.5), RangeError);
});

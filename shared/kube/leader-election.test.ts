import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import {
  LeaderElector,
  type LeaderRecord,
  type LeaseLock,
  type LockState,
  microTime,
} from './leader-election.ts';
import { failureStatus, StatusError } from './status.ts';

/** An in-memory Lease with the API server's optimistic concurrency. */
class FakeLock implements LeaseLock {
  state: LockState | undefined;
  #version = 0;
  failUpdates = false;
  describe() {
    return 'test/lease';
  }
  async get() {
    return this.state ? structuredClone(this.state) : undefined;
  }
  async create(record: LeaderRecord) {
    if (this.state) throw new StatusError(failureStatus(409, 'exists'));
    this.state = { record: structuredClone(record), resourceVersion: String(++this.#version) };
  }
  async update(record: LeaderRecord, resourceVersion: string) {
    if (this.failUpdates) throw new StatusError(failureStatus(503, 'unavailable'));
    if (this.state?.resourceVersion !== resourceVersion)
      throw new StatusError(failureStatus(409, 'conflict'));
    this.state = { record: structuredClone(record), resourceVersion: String(++this.#version) };
  }
}

// The Lease records whole seconds, so the shortest real lease is 1 s.
const timing = { leaseDurationMs: 1000, renewDeadlineMs: 300, retryPeriodMs: 50 };

function elector(lock: LeaseLock, identity: string, events: string[]) {
  return new LeaderElector({
    lock,
    identity,
    ...timing,
    onStartedLeading: () => events.push(`${identity} started`),
    onStoppedLeading: () => events.push(`${identity} stopped`),
  });
}

describe('LeaderElector', () => {
  test('of two replicas exactly one leads, and the Lease names it', async () => {
    const lock = new FakeLock();
    const events: string[] = [];
    const a = elector(lock, 'a', events);
    const b = elector(lock, 'b', events);
    const stop = new AbortController();
    void a.run(stop.signal);
    void b.run(stop.signal);
    await delay(300);
    assert.equal([a, b].filter((e) => e.isLeader).length, 1);
    const leader = a.isLeader ? 'a' : 'b';
    assert.equal(lock.state?.record.holderIdentity, leader);
    assert.deepEqual(events, [`${leader} started`]);
    stop.abort();
  });

  test('a crashed leader (no release) is replaced after the lease duration, not before', async () => {
    const lock = new FakeLock();
    const events: string[] = [];
    const a = elector(lock, 'a', events);
    const crash = new AbortController();
    void a.run(crash.signal);
    await delay(100);
    assert.ok(a.isLeader);
    const b = elector(lock, 'b', events);
    const stop = new AbortController();
    void b.run(stop.signal);
    await delay(150);
    try {
      crash.abort(); // a stops renewing and never releases
      const crashedAt = Date.now();
      await delay(timing.leaseDurationMs - 200);
      assert.equal(b.isLeader, false, 'the standby waits a full lease duration');
      while (!b.isLeader && Date.now() - crashedAt < 5000) await delay(10);
      const tookMs = Date.now() - crashedAt;
      assert.ok(tookMs >= timing.leaseDurationMs - 60, `took over after ${tookMs} ms`);
      assert.ok(
        tookMs <= timing.leaseDurationMs + 3 * timing.retryPeriodMs + 100,
        `took over after ${tookMs} ms`,
      );
      assert.equal(lock.state?.record.holderIdentity, 'b');
      assert.equal(lock.state?.record.leaseTransitions, 1);
    } finally {
      stop.abort();
    }
  });

  test('release hands over at once', async () => {
    const lock = new FakeLock();
    const events: string[] = [];
    const a = elector(lock, 'a', events);
    const stopA = new AbortController();
    void a.run(stopA.signal);
    await delay(100);
    const b = elector(lock, 'b', events);
    const stopB = new AbortController();
    void b.run(stopB.signal);
    await delay(100);
    stopA.abort();
    await a.release();
    assert.equal(lock.state?.record.holderIdentity, '');
    const releasedAt = Date.now();
    while (!b.isLeader) await delay(5);
    assert.ok(Date.now() - releasedAt < 2 * timing.retryPeriodMs + 50);
    assert.deepEqual(events, ['a started', 'a stopped', 'b started']);
    stopB.abort();
  });

  test('a leader that cannot renew gives up within the renew deadline, before anyone may take over', async () => {
    const lock = new FakeLock();
    const events: string[] = [];
    const a = elector(lock, 'a', events);
    const stop = new AbortController();
    const done = a.run(stop.signal);
    await delay(100);
    const lastRenew = lock.state?.record.renewTime;
    lock.failUpdates = true;
    const failingSince = Date.now();
    await done;
    const gaveUpAfter = Date.now() - failingSince;
    assert.deepEqual(events, ['a started', 'a stopped']);
    assert.ok(
      gaveUpAfter <= timing.renewDeadlineMs + 2 * timing.retryPeriodMs,
      `gave up after ${gaveUpAfter} ms`,
    );
    assert.ok(gaveUpAfter < timing.leaseDurationMs, 'before the Lease could expire for a standby');
    assert.equal(lock.state?.record.renewTime, lastRenew);
  });

  test('a leader that sees another holder stops at once', async () => {
    const lock = new FakeLock();
    const events: string[] = [];
    const a = elector(lock, 'a', events);
    const stop = new AbortController();
    const done = a.run(stop.signal);
    await delay(100);
    const state = lock.state as LockState;
    await lock.update({ ...state.record, holderIdentity: 'intruder' }, state.resourceVersion);
    await done;
    assert.deepEqual(events, ['a started', 'a stopped']);
  });

  test('renewDeadline must be shorter than the lease duration', () => {
    assert.throws(
      () =>
        new LeaderElector({
          lock: new FakeLock(),
          identity: 'x',
          leaseDurationMs: 1000,
          renewDeadlineMs: 1000,
          retryPeriodMs: 100,
          onStartedLeading: () => {},
        }),
    );
  });

  test('microTime has the six fractional digits a Kubernetes MicroTime needs', () => {
    assert.equal(microTime(Date.UTC(2025, 0, 2, 3, 4, 5, 678)), '2025-01-02T03:04:05.678000Z');
  });
});

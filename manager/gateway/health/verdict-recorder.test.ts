import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ClusterHealth } from '../clusters/cluster.ts';
import { createVerdictRecorder } from './verdict-recorder.ts';

test('a verdict is recorded on the hub object; kept in memory only with nowhere to record it or a failed write', async () => {
  const memory = new Map<string, ClusterHealth | undefined>();
  let outcome: 'written' | 'unchanged' | 'nowhere' | 'gone' | Error = 'nowhere';
  const warnings: string[] = [];
  const record = createVerdictRecorder({
    store: {
      recordProbe: async () => {
        if (outcome instanceof Error) throw outcome;
        return outcome;
      },
    },
    registry: { setHealth: (name, health) => memory.set(name, health) },
    log: { warn: (o) => warnings.push(JSON.stringify(o)) },
  });
  const refused = { healthy: false, reason: 'the agent refused the stream' };
  await record('c1', refused); // known by its tunnel alone
  assert.deepEqual(memory.get('c1'), refused);
  outcome = 'written'; // its Secret appeared: the recorded verdict counts, the one in memory goes
  await record('c1', { healthy: true });
  assert.equal(memory.get('c1'), undefined);
  outcome = new Error('secrets "c1" is forbidden');
  await record('c1', { healthy: true });
  assert.deepEqual(memory.get('c1'), { healthy: true });
  assert.match(warnings[0] ?? '', /forbidden/);
  outcome = 'unchanged';
  await record('c1', { healthy: true });
  assert.equal(memory.get('c1'), undefined);
  // Its Secret was deleted while the probe ran: nothing is numbered in memory (the deletion decides).
  memory.clear();
  outcome = 'gone';
  await record('c1', { healthy: false, reason: 'connection refused' });
  assert.equal(memory.has('c1'), false, 'no in-memory verdict for an object that is gone');
});

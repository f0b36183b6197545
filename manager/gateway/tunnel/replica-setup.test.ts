import assert from 'node:assert/strict';
import { test } from 'node:test';
import { firstCertificateGate } from './replica-setup.ts';

const state = (p: Promise<void>) =>
  Promise.race([p.then(() => 'resolved'), new Promise((r) => setImmediate(() => r('pending')))]);

test("a proof asked before this replica's first peer certificate waits for it, and at once after it", async () => {
  const gate = firstCertificateGate(60_000);
  const early = gate.wait();
  assert.equal(await state(early), 'pending');
  gate.issued();
  assert.equal(await state(early), 'resolved');
  assert.equal(await state(gate.wait()), 'resolved');
});

test('a certificate that never comes holds a proof back for the bound only', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const gate = firstCertificateGate(10_000);
  const waiting = gate.wait();
  t.mock.timers.tick(9_999);
  assert.equal(await state(waiting), 'pending');
  t.mock.timers.tick(1);
  assert.equal(await state(waiting), 'resolved');
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EventRecorder } from './events.ts';

test('one Event per change of state, on the involved object; a failure is logged, not thrown', async () => {
  const created: { path: string; body: Record<string, unknown> }[] = [];
  let fail = false;
  const warnings: string[] = [];
  const recorder = new EventRecorder(
    {
      create: async (path: string, body: Record<string, unknown>) => {
        if (fail) throw new Error('forbidden');
        created.push({ path, body });
        return body;
      },
    } as never,
    { warn: (_o: unknown, m: string) => void warnings.push(m) } as never,
    'manager',
  );
  const involved = { apiVersion: 'apps/v1', kind: 'Deployment', name: 'gw', namespace: 'ns' };
  const waiting = { type: 'Warning' as const, reason: 'APIServiceNotRegistered', message: '0/2' };
  await recorder.record(involved, waiting);
  await recorder.record(involved, waiting);
  await recorder.record(involved, { type: 'Normal', reason: 'APIServiceRegistered', message: '1/2' });
  assert.deepEqual(
    created.map((c) => `${c.path} ${c.body.reason}`),
    [
      '/api/v1/namespaces/ns/events APIServiceNotRegistered',
      '/api/v1/namespaces/ns/events APIServiceRegistered',
    ],
  );
  assert.deepEqual(created[0]?.body.involvedObject, involved);
  fail = true;
  await recorder.record(involved, waiting);
  assert.deepEqual(warnings, ['cannot record an Event']);
});

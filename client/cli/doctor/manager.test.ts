import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Pod } from './apiservice.ts';
import { cmaExists, holderPod, type Lease, managerLeader, webhookRegistered } from './manager.ts';
import { defaultLayout as l } from './model.ts';
import type { Read } from './reads.ts';

const now = Date.parse('2026-12-05T12:00:00Z');
const lease = (holder: string, renewedSecondsAgo: number): Read<Lease> => ({
  state: 'found',
  hubTime: now,
  value: {
    metadata: { name: l.managerLeaseName },
    spec: {
      holderIdentity: holder,
      leaseDurationSeconds: 15,
      renewTime: new Date(now - renewedSecondsAgo * 1000).toISOString(),
    },
  },
});
const pods = (...names: string[]): Read<{ items: Pod[] }> => ({
  state: 'found',
  hubTime: now,
  value: {
    items: names.map((name) => ({
      metadata: { name },
      status: { conditions: [{ type: 'Ready', status: 'True' }] },
    })),
  },
});

test('the holder pod is the identity before its last underscore', () => {
  assert.equal(holderPod('manager-5d9f-v8bm7_2f4b7aed-ab75'), 'manager-5d9f-v8bm7');
  assert.equal(holderPod('plain'), 'plain');
});

test('a fresh Lease held by a running manager pod passes', () => {
  const v = managerLeader(lease('m-1_uuid', 3), pods('m-1'), l);
  assert.equal(v.result, 'pass');
  assert.match(v.message, /m-1 leads/);
});

test('a stale Lease, a holder that is gone, no pod at all each fail with the manager as the fix', () => {
  const stale = managerLeader(lease('m-1_uuid', 40), pods('m-1'), l);
  assert.equal(stale.result, 'fail');
  assert.match(stale.message, /last renewed its Lease 40s ago/);
  const gone = managerLeader(lease('m-1_uuid', 3), pods('m-2'), l);
  assert.match(gone.message, /held by m-1, which is not a manager pod/);
  const none = managerLeader(lease('m-1_uuid', 3), pods(), l);
  assert.equal(none.result, 'fail');
  assert.match(none.fix ?? '', /scale deployment -l app.kubernetes.io\/component=addon-manager --replicas=1/);
  const noLease = managerLeader({ state: 'missing', hubTime: now }, pods(), l);
  assert.match(noLease.message, /no addon manager pod runs/);
  // Leader election off: no Lease, one ready manager.
  assert.equal(managerLeader({ state: 'missing', hubTime: now }, pods('m-1'), l).result, 'pass');
});

test('the webhook must be registered in health mode Customized, and need not in Lease mode', () => {
  const missing: Read<never> = { state: 'missing', hubTime: now };
  assert.equal(webhookRegistered(missing, ['Customized'], l).result, 'fail');
  assert.equal(webhookRegistered(missing, ['Lease'], l).result, 'pass');
  const registered = webhookRegistered(
    {
      state: 'found',
      hubTime: now,
      value: {
        metadata: { name: l.webhookName },
        webhooks: [{ clientConfig: { caBundle: 'x', service: { namespace: 'ns', name: 'svc' } } }],
      },
    },
    ['Customized'],
    l,
  );
  assert.deepEqual([registered.result, registered.message], ['pass', 'registered, calling Service ns/svc']);
});

test('a missing ClusterManagementAddOn fails with the chart as the fix', () => {
  const v = cmaExists({ state: 'missing', hubTime: now }, l);
  assert.equal(v.result, 'fail');
  assert.match(v.fix ?? '', /helm upgrade --install cluster-gateway/);
});

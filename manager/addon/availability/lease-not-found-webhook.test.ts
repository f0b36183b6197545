import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ManagedClusterAddOn } from '../core/resources.ts';
import { type AdmissionRequest, admissionResponse, statusPatch } from './lease-not-found-webhook.ts';

const leaseNotFound = {
  type: 'Available',
  status: 'Unknown' as const,
  reason: 'ManagedClusterAddOnLeaseNotFound',
  message: 'The status of cluster-gateway add-on is unknown.',
  lastTransitionTime: '2026-01-01T00:00:00Z',
};
const ours = {
  type: 'Available',
  status: 'True' as const,
  reason: 'AgentAvailable',
  message: 'fine',
  lastTransitionTime: '2025-12-31T00:00:00Z',
};

function addon(
  conditions: ManagedClusterAddOn['status'] extends infer S
    ? S extends { conditions?: infer C }
      ? C
      : never
    : never,
  mode?: string,
  name = 'cluster-gateway',
): ManagedClusterAddOn {
  return {
    metadata: { name, namespace: 'cluster1' },
    status: { ...(mode ? { healthCheck: { mode } } : {}), conditions },
  };
}
function request(object: ManagedClusterAddOn, oldObject?: ManagedClusterAddOn): AdmissionRequest {
  return {
    uid: 'u1',
    operation: 'UPDATE',
    subResource: 'status',
    resource: {
      group: 'addon.open-cluster-management.io',
      version: 'v1beta1',
      resource: 'managedclusteraddons',
    },
    namespace: 'cluster1',
    object,
    ...(oldObject ? { oldObject } : {}),
  };
}
const context = (verdict?: { status: 'True' | 'False' | 'Unknown'; reason: string; message: string }) => ({
  addonName: 'cluster-gateway',
  verdictFor: () => verdict,
  now: () => Date.parse('2026-02-02T00:00:00Z'),
});

test('LeaseNotFound from OCM becomes the manager verdict, and the mode Customized', () => {
  const ops = statusPatch(
    request(addon([leaseNotFound], 'Lease')),
    context({ status: 'False', reason: 'HeartbeatStale', message: 'm' }),
  );
  assert.deepEqual(ops, [
    { op: 'add', path: '/status/healthCheck', value: { mode: 'Customized' } },
    {
      op: 'replace',
      path: '/status/conditions/0',
      value: {
        type: 'Available',
        status: 'False',
        reason: 'HeartbeatStale',
        message: 'm',
        lastTransitionTime: '2026-02-02T00:00:00Z',
      },
    },
  ]);
});

test('without a manager verdict: the previous non-Lease condition is kept (same transition time)', () => {
  const ops = statusPatch(
    request(addon([leaseNotFound], 'Customized'), addon([ours], 'Customized')),
    context(),
  );
  assert.deepEqual(ops, [{ op: 'replace', path: '/status/conditions/0', value: ours }]);
});

test('nothing known at all: WaitingForAddonManager, never LeaseNotFound', () => {
  const ops = statusPatch(request(addon([leaseNotFound])), context());
  const value = ops.find((o) => o.path === '/status/conditions/0')?.value as {
    reason: string;
    message: string;
  };
  assert.equal(value.reason, 'WaitingForAddonManager');
  assert.match(value.message, /has not evaluated this addon yet/);
});

test('other writes pass untouched: our own verdict, the hub copying an Unknown cluster, other addons', () => {
  assert.deepEqual(statusPatch(request(addon([ours], 'Customized')), context()), []);
  const clusterUnknown = {
    ...leaseNotFound,
    reason: 'ManagedClusterLeaseUpdateStopped',
    message: 'Registration agent stopped updating its lease.',
  };
  assert.deepEqual(statusPatch(request(addon([clusterUnknown], 'Customized')), context()), []);
  assert.deepEqual(statusPatch(request(addon([leaseNotFound], 'Lease', 'other-addon')), context()), []);
  assert.deepEqual(statusPatch({ ...request(addon([leaseNotFound])), subResource: '' }, context()), []);
});

test('the response carries a base64 JSONPatch only when there is something to change', () => {
  const none = admissionResponse(request(addon([ours], 'Customized')), context());
  assert.deepEqual(none, { uid: 'u1', allowed: true });
  const some = admissionResponse(request(addon([leaseNotFound], 'Customized')), context());
  assert.equal(some.patchType, 'JSONPatch');
  assert.ok(Array.isArray(JSON.parse(Buffer.from(some.patch!, 'base64').toString())));
});

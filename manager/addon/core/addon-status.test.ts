/**
 * Each writer of the addon's status applies the same fields under the same field manager, always: OCM
 * co-owns the status by server-side apply, and a field manager that leaves out what it applied before
 * removes it. These are the exact requests the e2e tests and OCM's controllers rely on.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeClient } from '../../../shared/kube/client.ts';
import {
  applyAvailable,
  applyDeployConditions,
  applyLeaseMode,
  applyRegistrationStatus,
  patchConfigReferences,
} from './addon-status.ts';
import type { ManagedClusterAddOn } from './resources.ts';

const now = Date.parse('2026-01-02T03:04:05.678Z');
const mca: ManagedClusterAddOn = {
  metadata: { name: 'cluster-gateway', namespace: 'cluster1', resourceVersion: '42' },
  status: {
    conditions: [
      {
        type: 'Available',
        status: 'True',
        reason: 'Old',
        message: 'old',
        lastTransitionTime: '2025-01-01T00:00:00Z',
      },
    ],
  },
};

function recordingHub() {
  const calls: { path: string; body: unknown; fieldManager?: string }[] = [];
  const hub = {
    apply: async (path: string, body: unknown, fieldManager: string) => {
      calls.push({ path, body, fieldManager });
      return body;
    },
    mergePatch: async (path: string, body: unknown) => {
      calls.push({ path, body });
      return body;
    },
  } as unknown as Pick<KubeClient, 'apply' | 'mergePatch'>;
  return { hub, calls };
}

const path =
  '/apis/addon.open-cluster-management.io/v1alpha1/namespaces/cluster1/managedclusteraddons/cluster-gateway/status';
const identity = {
  apiVersion: 'addon.open-cluster-management.io/v1alpha1',
  kind: 'ManagedClusterAddOn',
  metadata: { name: 'cluster-gateway', namespace: 'cluster1' },
};

test('every writer: its own field manager, its own fields, lastTransitionTime kept while the status holds', async () => {
  const { hub, calls } = recordingHub();
  await applyDeployConditions(
    hub,
    mca,
    [{ type: 'ManifestApplied', status: 'True', reason: 'R', message: 'm' }],
    now,
  );
  await applyDeployConditions(hub, mca, [], now);
  await applyRegistrationStatus(
    hub,
    mca,
    { registrations: [{ signerName: 's' }], namespace: 'ns' },
    { status: 'True', reason: 'SetPermissionApplied', message: 'm' },
    now,
  );
  await applyAvailable(hub, mca, { status: 'True', reason: 'AgentAvailable', message: 'm' }, now);
  await applyLeaseMode(hub, mca);
  await patchConfigReferences(hub, mca, []);
  const at = '2026-01-02T03:04:05Z';
  assert.deepEqual(calls, [
    {
      path,
      fieldManager: 'cluster-gateway-addon-manager-deploy',
      body: {
        ...identity,
        status: {
          conditions: [
            { type: 'ManifestApplied', status: 'True', reason: 'R', message: 'm', lastTransitionTime: at },
          ],
        },
      },
    },
    {
      path,
      fieldManager: 'cluster-gateway-addon-manager-deploy',
      body: { ...identity, status: { conditions: [] } },
    },
    {
      path,
      fieldManager: 'cluster-gateway-addon-manager-registration',
      body: {
        ...identity,
        status: {
          registrations: [{ signerName: 's' }],
          namespace: 'ns',
          conditions: [
            {
              type: 'RegistrationApplied',
              status: 'True',
              reason: 'SetPermissionApplied',
              message: 'm',
              lastTransitionTime: at,
            },
          ],
        },
      },
    },
    {
      path,
      fieldManager: 'cluster-gateway-addon-manager-health',
      body: {
        ...identity,
        status: {
          healthCheck: { mode: 'Customized' },
          conditions: [
            {
              type: 'Available',
              status: 'True',
              reason: 'AgentAvailable',
              message: 'm',
              lastTransitionTime: '2025-01-01T00:00:00Z',
            },
          ],
        },
      },
    },
    {
      path,
      fieldManager: 'cluster-gateway-addon-manager-lease-mode',
      body: { ...identity, status: { healthCheck: { mode: 'Lease' } } },
    },
    { path, body: { metadata: { resourceVersion: '42' }, status: { configReferences: [] } } },
  ]);
});

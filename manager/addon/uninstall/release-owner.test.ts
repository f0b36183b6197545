import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import type { KubeObject } from '../../../shared/kube/client.ts';
import type { Informer } from '../../../shared/kube/informer.ts';
import { ReleaseOwner, releaseOwnerFieldManager } from './release-owner.ts';

function setup(owner: KubeObject | undefined, existing: Record<string, KubeObject>) {
  const applied: { path: string; body: KubeObject; manager: string }[] = [];
  const informer = (items: KubeObject[]) =>
    ({
      get: (k: string) => items.find((i) => i.metadata?.name === k),
      on: () => () => {},
      synced: Promise.resolve(),
    }) as unknown as Informer<KubeObject>;
  const controller = new ReleaseOwner({
    hub: {
      getOptional: async (path: string) => existing[path] as never,
      apply: async (path: string, body: KubeObject, manager: string) => {
        applied.push({ path, body, manager });
        return body as never;
      },
    },
    addonName: 'cluster-gateway',
    ownerClusterRole: 'release-manager',
    informers: { owner: informer(owner ? [owner] : []), clusterManagementAddOns: informer([]) },
    log: pino({ level: 'silent' }),
  });
  return { controller, applied };
}

const cmaPath = '/apis/addon.open-cluster-management.io/v1alpha1/clustermanagementaddons/cluster-gateway';
const webhookPath =
  '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/cluster-gateway-addon-available';
const owner = { metadata: { name: 'release-manager', uid: 'u-owner' } };

test('the ClusterManagementAddOn and the webhook registration get the owner reference, nothing else', async () => {
  const { controller, applied } = setup(owner, {
    [cmaPath]: { metadata: { name: 'cluster-gateway' } },
    [webhookPath]: { metadata: { name: 'cluster-gateway-addon-available' } },
  });
  await controller.reconcile();
  assert.deepEqual(
    applied.map((a) => a.path),
    [cmaPath, webhookPath],
  );
  for (const a of applied) {
    assert.equal(a.manager, releaseOwnerFieldManager);
    assert.deepEqual(Object.keys(a.body).sort(), ['apiVersion', 'kind', 'metadata']);
    assert.deepEqual(a.body.metadata?.ownerReferences, [
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        name: 'release-manager',
        uid: 'u-owner',
      },
    ]);
  }
});

test('already owned, absent, or the owner gone (an uninstall): nothing is written', async () => {
  const owned = { metadata: { name: 'cluster-gateway', ownerReferences: [{ uid: 'u-owner' }] } };
  const first = setup(owner, { [cmaPath]: owned });
  await first.controller.reconcile();
  const gone = setup(undefined, { [cmaPath]: { metadata: { name: 'cluster-gateway' } } });
  await gone.controller.reconcile();
  const deleting = setup(
    { metadata: { ...owner.metadata, deletionTimestamp: '2026-01-01T00:00:00Z' } },
    { [cmaPath]: { metadata: { name: 'cluster-gateway' } } },
  );
  await deleting.controller.reconcile();
  assert.deepEqual([...first.applied, ...gone.applied, ...deleting.applied], []);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import type { KubeClient, KubeObject } from '../../../shared/kube/client.ts';
import type { Informer } from '../../../shared/kube/informer.ts';
import type { ClusterManagementAddOn, ManagedClusterAddOn } from '../core/resources.ts';
import { RegistrationController } from './registration-controller.ts';
import { addonAgentSubject } from './subject.ts';

/** Records the hub calls; objects applied are kept by path. */
function fakeHub() {
  const applied = new Map<string, KubeObject>();
  const deleted: string[] = [];
  const patched: [string, unknown][] = [];
  const hub = {
    apply: async (path: string, obj: KubeObject) => {
      applied.set(path, obj);
      return obj;
    },
    getOptional: async () => ({}),
    create: async (_path: string, obj: KubeObject) => obj,
    mergePatch: async (path: string, patch: unknown) => {
      patched.push([path, patch]);
      return {};
    },
    delete: async (path: string) => {
      deleted.push(path);
      applied.delete(path);
    },
  };
  return { hub: hub as unknown as KubeClient, applied, deleted, patched };
}

function informer<T extends KubeObject>(items: Record<string, T>): Informer<T> {
  return {
    get: (key: string) => items[key],
    list: () => Object.values(items),
    on: () => () => {},
  } as unknown as Informer<T>;
}

const log = pino({ level: 'silent' });
const addon = {
  name: 'cluster-gateway',
  defaultInstallNamespace: 'open-cluster-management-agent-addon',
  registrationSubject: (cluster: string) => addonAgentSubject(cluster, 'cluster-gateway'),
};
const attach = 'open-cluster-management:cluster-gateway:agent:cluster1:attach';

test("grants the agent's tunnel (owned by the ClusterManagementAddOn) and removes it with the ManagedClusterAddOn", async () => {
  const { hub, applied, deleted } = fakeHub();
  const addons: Record<string, ManagedClusterAddOn> = {
    'cluster1/cluster-gateway': {
      apiVersion: 'addon.open-cluster-management.io/v1alpha1',
      kind: 'ManagedClusterAddOn',
      metadata: { name: 'cluster-gateway', namespace: 'cluster1', uid: 'mca-uid' },
    } as ManagedClusterAddOn,
  };
  const controller = new RegistrationController({
    hub,
    addon,
    log,
    informers: {
      managedClusterAddOns: informer(addons),
      clusterManagementAddOns: informer<ClusterManagementAddOn>({
        'cluster-gateway': {
          metadata: { name: 'cluster-gateway', uid: 'cma-uid' },
        } as ClusterManagementAddOn,
      }),
    },
  });
  await controller.reconcile('cluster1/cluster-gateway');
  const role = applied.get(`/apis/rbac.authorization.k8s.io/v1/clusterroles/${attach}`) as {
    rules: { resourceNames: string[] }[];
    metadata: { ownerReferences: { kind: string; uid: string }[] };
  };
  assert.deepEqual(role.rules[0]?.resourceNames, ['cluster1']);
  assert.deepEqual(
    role.metadata.ownerReferences.map((o) => `${o.kind}/${o.uid}`),
    ['ClusterManagementAddOn/cma-uid'],
  );
  assert.ok(applied.has(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${attach}`));

  delete addons['cluster1/cluster-gateway'];
  await controller.reconcile('cluster1/cluster-gateway');
  assert.deepEqual(deleted, [
    `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${attach}`,
    `/apis/rbac.authorization.k8s.io/v1/clusterroles/${attach}`,
  ]);
  // Another addon's key is never ours to clean up.
  await controller.reconcile('cluster1/other-addon');
  assert.equal(deleted.length, 2);
});

test('a trust model grants the agent its credential Secret; disabling removes the grant and the Secret it wrote, never an admin’s', async () => {
  const { hub, applied, deleted } = fakeHub();
  const secrets: Record<string, KubeObject> = {
    '/api/v1/namespaces/creds/secrets/cluster1': {
      metadata: { name: 'cluster1', labels: { 'app.kubernetes.io/managed-by': 'cluster-gateway-agent' } },
    },
    '/api/v1/namespaces/creds/secrets/cluster2': { metadata: { name: 'cluster2', labels: {} } },
  };
  (hub as unknown as { getOptional: (p: string) => Promise<unknown> }).getOptional = async (p) =>
    p.includes('/secrets/') ? secrets[p] : {};
  const mca = (cluster: string) =>
    ({
      apiVersion: 'addon.open-cluster-management.io/v1alpha1',
      kind: 'ManagedClusterAddOn',
      metadata: { name: 'cluster-gateway', namespace: cluster, uid: `uid-${cluster}` },
    }) as ManagedClusterAddOn;
  const addons: Record<string, ManagedClusterAddOn> = {
    'cluster1/cluster-gateway': mca('cluster1'),
    'cluster2/cluster-gateway': mca('cluster2'),
  };
  let model: string | undefined = 'hub-credential';
  const controller = new RegistrationController({
    hub,
    addon: { ...addon, credentialNamespace: 'creds' },
    log,
    informers: { managedClusterAddOns: informer(addons) },
    trustModel: () => model,
  });
  const rbac = '/apis/rbac.authorization.k8s.io/v1/namespaces/creds';
  const name = (c: string) => `open-cluster-management:cluster-gateway:agent:${c}:credential`;
  await controller.reconcile('cluster1/cluster-gateway');
  await controller.reconcile('cluster2/cluster-gateway');
  assert.ok(applied.has(`${rbac}/roles/${name('cluster1')}`));
  assert.ok(applied.has(`${rbac}/rolebindings/${name('cluster1')}`));

  // The model is dropped from the config: the grant goes (once), the Secret stays.
  model = undefined;
  await controller.reconcile('cluster1/cluster-gateway');
  await controller.reconcile('cluster1/cluster-gateway');
  assert.deepEqual(deleted, [
    `${rbac}/rolebindings/${name('cluster1')}`,
    `${rbac}/roles/${name('cluster1')}`,
  ]);
  deleted.length = 0;

  delete addons['cluster1/cluster-gateway'];
  delete addons['cluster2/cluster-gateway'];
  await controller.reconcile('cluster1/cluster-gateway');
  await controller.reconcile('cluster2/cluster-gateway');
  assert.ok(deleted.includes('/api/v1/namespaces/creds/secrets/cluster1'), 'the Secret its agent wrote');
  assert.ok(!deleted.includes('/api/v1/namespaces/creds/secrets/cluster2'), "an admin's Secret stays");
  assert.ok(deleted.includes(`${rbac}/roles/${name('cluster2')}`));
});

test('a heartbeat Lease naming a deleted ManagedClusterAddOn is handed to the current one, before the garbage collector deletes it', async () => {
  const { hub, patched } = fakeHub();
  const leasePath = '/apis/coordination.k8s.io/v1/namespaces/cluster1/leases/cluster-gateway';
  let lease: KubeObject = {
    metadata: { name: 'cluster-gateway', namespace: 'cluster1', ownerReferences: [{ uid: 'old-uid' }] },
  };
  (hub as unknown as { getOptional: (p: string) => Promise<unknown> }).getOptional = async (p) =>
    p === leasePath ? lease : {};
  const controller = new RegistrationController({
    hub,
    addon,
    log,
    informers: {
      managedClusterAddOns: informer<ManagedClusterAddOn>({
        'cluster1/cluster-gateway': {
          apiVersion: 'addon.open-cluster-management.io/v1alpha1',
          kind: 'ManagedClusterAddOn',
          metadata: { name: 'cluster-gateway', namespace: 'cluster1', uid: 'new-uid' },
        } as ManagedClusterAddOn,
      }),
    },
  });
  await controller.reconcile('cluster1/cluster-gateway');
  assert.deepEqual(patched, [
    [
      leasePath,
      {
        metadata: {
          ownerReferences: [
            {
              apiVersion: 'addon.open-cluster-management.io/v1alpha1',
              kind: 'ManagedClusterAddOn',
              name: 'cluster-gateway',
              uid: 'new-uid',
            },
          ],
        },
      },
    ],
  ]);
  // Owned by the current addon: the agent's Lease is left alone.
  lease = { metadata: { ...lease.metadata, ownerReferences: [{ uid: 'new-uid' }] } };
  await controller.reconcile('cluster1/cluster-gateway');
  assert.equal(patched.length, 1);
});

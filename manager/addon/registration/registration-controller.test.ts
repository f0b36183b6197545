import assert from 'node:assert/strict';
import { test } from 'node:test';
import type pino from 'pino';
import type { KubeClient, KubeObject } from '../../../shared/kube/client.ts';
import type { Informer } from '../../../shared/kube/informer.ts';
import type { ClusterManagementAddOn } from '../resources.ts';
import type { ManagedClusterAddOn } from './managed-cluster-addon.ts';
import { RegistrationController } from './registration-controller.ts';
import { addonAgentSubject } from './subject.ts';

/** Records the hub calls; objects applied are kept by path. */
function fakeHub() {
  const applied = new Map<string, KubeObject>();
  const deleted: string[] = [];
  const hub = {
    apply: async (path: string, obj: KubeObject) => {
      applied.set(path, obj);
      return obj;
    },
    getOptional: async () => ({}),
    create: async (_path: string, obj: KubeObject) => obj,
    delete: async (path: string) => {
      deleted.push(path);
      applied.delete(path);
    },
  };
  return { hub: hub as unknown as KubeClient, applied, deleted };
}

function informer<T extends KubeObject>(items: Record<string, T>): Informer<T> {
  return {
    get: (key: string) => items[key],
    list: () => Object.values(items),
    on: () => () => {},
  } as unknown as Informer<T>;
}

const log = { info() {}, warn() {}, debug() {}, error() {} } as unknown as pino.Logger;
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

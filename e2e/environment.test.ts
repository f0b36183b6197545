/**
 * The local environment is real: managed clusters joined the hub through the
 * real OCM registration agents, and the real work agents deliver
 * ManifestWorks.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { waitFor, waitForConditions } from '../hack/localenv/wait.ts';
import { environmentState, hubClient, managedClient } from './support/environment.ts';
import { kubectl } from './support/kubectl.ts';

test('kubectl get managedclusters shows every cluster joined and available', async () => {
  const env = environmentState();
  const out = await kubectl(env.hub.kubeconfig, 'get', 'managedclusters', '--no-headers');
  const rows = out
    .trim()
    .split('\n')
    .map((line) => line.split(/\s+/));
  // NAME HUB-ACCEPTED MANAGED-CLUSTER-URLS JOINED AVAILABLE AGE
  assert.deepEqual(rows.map((r) => r[0]).sort(), env.managed.map((c) => c.name).sort());
  for (const row of rows) {
    assert.equal(row[1], 'true', `hub accepted ${row[0]}`);
    assert.equal(row[3], 'True', `${row[0]} joined`);
    assert.equal(row[4], 'True', `${row[0]} available`);
  }
});

test('each managed cluster authenticates to the hub with a certificate from its own CSR', async () => {
  const hub = await hubClient();
  for (const cluster of environmentState().managed) {
    const csrs = await hub.list<{ status?: { certificate?: string; conditions?: { type: string }[] } }>(
      `/apis/certificates.k8s.io/v1/certificatesigningrequests?labelSelector=open-cluster-management.io/cluster-name=${cluster.name}`,
    );
    assert.ok(
      csrs.items.some(
        (c) => c.status?.certificate && c.status.conditions?.some((x) => x.type === 'Approved'),
      ),
      `${cluster.name} has an approved, signed CSR`,
    );
    const mc = await hub.get<{ spec: { managedClusterClientConfigs?: { url: string }[] } }>(
      `/apis/cluster.open-cluster-management.io/v1/managedclusters/${cluster.name}`,
    );
    // The address its node's pods (and so the addon's agents) reach it at: the pods' bridge.
    assert.equal(mc.spec.managedClusterClientConfigs?.[0]?.url, cluster.reachableServer);
  }
  hub.close();
});

test('a ManifestWork on the hub is applied to its managed cluster by the work agent', async () => {
  const hub = await hubClient();
  const cluster = environmentState().managed[0]!;
  const spoke = await managedClient(cluster.name);
  const name = `smoke-${Date.now()}`;
  await hub.create(`/apis/work.open-cluster-management.io/v1/namespaces/${cluster.name}/manifestworks`, {
    apiVersion: 'work.open-cluster-management.io/v1',
    kind: 'ManifestWork',
    metadata: { name, namespace: cluster.name },
    spec: {
      workload: {
        manifests: [
          {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name, namespace: 'default' },
            data: { from: 'hub' },
          },
        ],
      },
    },
  });
  const cm = await waitFor('the ConfigMap on the managed cluster', () =>
    spoke.getOptional<{ data: Record<string, string> }>(`/api/v1/namespaces/default/configmaps/${name}`),
  );
  assert.equal(cm.data.from, 'hub');
  await waitForConditions(
    hub,
    `/apis/work.open-cluster-management.io/v1/namespaces/${cluster.name}/manifestworks/${name}`,
    ['Applied'],
  );
  await hub.delete(
    `/apis/work.open-cluster-management.io/v1/namespaces/${cluster.name}/manifestworks/${name}`,
  );
  await waitFor('the ConfigMap to be removed with its ManifestWork', async () => {
    return (await spoke.getOptional(`/api/v1/namespaces/default/configmaps/${name}`)) === undefined;
  });
  hub.close();
  spoke.close();
});

/**
 * Addon registration against the real hub: the real klusterlet registration
 * agent requests the agent's certificate from our status.registrations, our
 * approver approves it, the hub's kube-controller-manager signs it, and the
 * identity it yields can renew its heartbeat Lease and nothing more. Forged
 * CSRs are denied and removed.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { waitFor } from '../hack/localenv/wait.ts';
import { KubeClient } from '../shared/kube/client.ts';
import { StatusError } from '../shared/kube/status.ts';
import { type AddonManagerProcess, startAddonManager } from './support/addon-manager.ts';
import { certificateRequest } from './support/csr.ts';
import { environmentState, hubClient, managedClient } from './support/environment.ts';

const addon = 'cluster-gateway';
const installNs = 'open-cluster-management-agent-addon';
const mcaPath = (c: string) =>
  `/apis/addon.open-cluster-management.io/v1alpha1/namespaces/${c}/managedclusteraddons/${addon}`;
const leasePath = (c: string) => `/apis/coordination.k8s.io/v1/namespaces/${c}/leases/${addon}`;
const rbacName = `open-cluster-management:${addon}:agent`;
const subject = (c: string) => ({
  user: `system:open-cluster-management:cluster:${c}:addon:${addon}:agent:addon-agent`,
  groups: [
    `system:open-cluster-management:cluster:${c}:addon:${addon}`,
    `system:open-cluster-management:addon:${addon}`,
  ],
});

let hub: KubeClient;
let manager: AddonManagerProcess;

async function enable(cluster: string) {
  await hub.create(
    `/apis/addon.open-cluster-management.io/v1alpha1/namespaces/${cluster}/managedclusteraddons`,
    {
      apiVersion: 'addon.open-cluster-management.io/v1alpha1',
      kind: 'ManagedClusterAddOn',
      metadata: { name: addon, namespace: cluster },
      spec: { installNamespace: installNs },
    },
  );
}

/** A client with the registration agent's own hub identity (`system:open-cluster-management:<c>:<c>-agent`). */
function registrationAgentClient(cluster: string) {
  return KubeClient.fromKubeconfig(
    path.join(environmentState().stateDir, 'klusterlet', cluster, 'hub-kubeconfig', 'kubeconfig'),
  );
}

before(async () => {
  hub = await hubClient();
  for (const c of ['cluster1', 'cluster2']) await hub.delete(mcaPath(c));
  manager = await startAddonManager('addon-manager-registration');
  for (const c of ['cluster1', 'cluster2']) await enable(c);
});

after(async () => {
  for (const c of ['cluster1', 'cluster2']) await hub.delete(mcaPath(c)).catch(() => {});
  await manager?.stop();
  hub?.close();
});

test('status.registrations, status.namespace and RegistrationApplied with OCM defaults', async () => {
  type Mca = {
    metadata: { uid: string };
    status?: {
      registrations?: unknown[];
      namespace?: string;
      conditions?: { type: string; status: string; reason: string; message: string }[];
    };
  };
  const mca = await waitFor(
    'registration status on cluster1',
    async () => {
      const obj = await hub.get<Mca>(mcaPath('cluster1'));
      return obj.status?.conditions?.some((c) => c.type === 'RegistrationApplied') ? obj : undefined;
    },
    { timeoutMs: 30_000 },
  );
  assert.deepEqual(mca.status?.registrations, [
    { signerName: 'kubernetes.io/kube-apiserver-client', subject: subject('cluster1') },
  ]);
  assert.equal(mca.status?.namespace, installNs);
  const cond = mca.status?.conditions?.find((c) => c.type === 'RegistrationApplied');
  assert.deepEqual(
    [cond?.status, cond?.reason, cond?.message],
    ['True', 'SetPermissionApplied', 'Registration of the addon agent is configured'],
  );
  // v1beta1 readers (OCM v1.3 components) see the same registration as kubeClient.
  const beta = await hub.get<{
    status: { registrations: { type: string; kubeClient?: { subject: unknown } }[] };
  }>(mcaPath('cluster1').replace('/v1alpha1/', '/v1beta1/'));
  assert.equal(beta.status.registrations[0]?.type, 'kubeClient');

  for (const kind of ['roles', 'rolebindings']) {
    const obj = await hub.get<{ metadata: { ownerReferences?: { uid: string; kind: string }[] } }>(
      `/apis/rbac.authorization.k8s.io/v1/namespaces/cluster1/${kind}/${encodeURIComponent(rbacName)}`,
    );
    assert.equal(
      obj.metadata.ownerReferences?.[0]?.uid,
      mca.metadata.uid,
      `${kind} owned by the ManagedClusterAddOn`,
    );
  }
  const lease = await hub.get<{ metadata: { ownerReferences?: { uid: string }[] } }>(leasePath('cluster1'));
  assert.equal(lease.metadata.ownerReferences?.[0]?.uid, mca.metadata.uid);
});

test('the real registration agent gets a certificate; it renews its heartbeat Lease and nothing else', async () => {
  const spoke = await managedClient('cluster1');
  const secret = await waitFor(
    `Secret ${installNs}/${addon}-hub-kubeconfig on cluster1 (CSR approved by us, signed by the hub)`,
    async () => {
      const s = await spoke.getOptional<{ data?: Record<string, string> }>(
        `/api/v1/namespaces/${installNs}/secrets/${addon}-hub-kubeconfig`,
      );
      return s?.data?.['tls.crt'] ? s : undefined;
    },
    { timeoutMs: 60_000 },
  );
  spoke.close();
  const dir = mkdtempSync(path.join(tmpdir(), 'addon-agent-'));
  for (const [key, value] of Object.entries(secret.data ?? {}))
    writeFileSync(path.join(dir, key), Buffer.from(value, 'base64'));
  const agent = await KubeClient.fromKubeconfig(path.join(dir, 'kubeconfig'));
  try {
    const lease = await agent.get<{ spec: Record<string, unknown> }>(leasePath('cluster1'));
    const renewTime = new Date().toISOString().replace('Z', '000Z');
    await agent.request('PUT', leasePath('cluster1'), {
      body: { ...lease, spec: { ...lease.spec, renewTime } },
    });
    const after = await hub.get<{ spec: { renewTime?: string } }>(leasePath('cluster1'));
    assert.equal(after.spec.renewTime, renewTime);

    const forbidden = async (what: string, call: () => Promise<unknown>) => {
      await assert.rejects(call, (err: unknown) => err instanceof StatusError && err.code === 403, what);
    };
    await forbidden("cluster2's heartbeat Lease", () => agent.get(leasePath('cluster2')));
    await forbidden('create a Lease', () =>
      agent.create('/apis/coordination.k8s.io/v1/namespaces/cluster1/leases', {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name: 'x' },
      }),
    );
    await forbidden('delete its Lease', () => agent.request('DELETE', leasePath('cluster1')));
    await forbidden('Secrets of its cluster namespace', () =>
      agent.list('/api/v1/namespaces/cluster1/secrets'),
    );
  } finally {
    agent.close();
  }
});

test('forged CSRs are denied and removed while a genuine one is approved', async () => {
  const registrationAgent = await registrationAgentClient('cluster1');
  const create = async (cluster: string, user: string, groups: string[]) => {
    const { csr } = await certificateRequest(user, groups);
    const created = await registrationAgent.create<{ metadata: { name: string } }>(
      '/apis/certificates.k8s.io/v1/certificatesigningrequests',
      {
        apiVersion: 'certificates.k8s.io/v1',
        kind: 'CertificateSigningRequest',
        metadata: {
          generateName: `addon-${cluster}-${addon}-`,
          labels: {
            'open-cluster-management.io/cluster-name': cluster,
            'open-cluster-management.io/addon-name': addon,
          },
        },
        spec: {
          request: Buffer.from(csr).toString('base64'),
          signerName: 'kubernetes.io/kube-apiserver-client',
          usages: ['digital signature', 'key encipherment', 'client auth'],
        },
      },
    );
    return created.metadata.name;
  };
  const isApproved = async (name: string) => {
    const csr = await hub.getOptional<{ status?: { conditions?: { type: string }[] } }>(
      `/apis/certificates.k8s.io/v1/certificatesigningrequests/${name}`,
    );
    return csr?.status?.conditions?.some((c) => c.type === 'Approved') ?? false;
  };
  const forged = [
    // cluster1's registration agent asks for cluster2's addon identity, labelled as cluster2
    await create('cluster2', subject('cluster2').user, subject('cluster2').groups),
    // ... labelled as cluster1 but with cluster2's subject
    await create('cluster1', subject('cluster2').user, subject('cluster2').groups),
    // its own cluster's agent name with an extra group
    await create('cluster1', subject('cluster1').user, [
      ...subject('cluster1').groups,
      'system:open-cluster-management:addon:other',
    ]),
  ];
  const genuine = await create('cluster1', subject('cluster1').user, subject('cluster1').groups);
  await waitFor('the genuine CSR to be approved', () => isApproved(genuine), { timeoutMs: 15_000 });
  // Denied, then deleted so that they do not count against the cluster's CSR quota (e2e/csr-quota.test.ts
  // watches each one's Denied condition); never approved on the way.
  await waitFor(
    'every forged CSR to be removed',
    async () => {
      for (const name of forged) {
        assert.equal(await isApproved(name), false, `${name} must not be approved`);
        const left = await hub.getOptional(`/apis/certificates.k8s.io/v1/certificatesigningrequests/${name}`);
        if (left) return false;
      }
      return true;
    },
    { timeoutMs: 15_000 },
  );
  for (const name of [...forged, genuine])
    await hub.delete(`/apis/certificates.k8s.io/v1/certificatesigningrequests/${name}`);
  registrationAgent.close();
});

test('disabling removes the Role, RoleBinding and heartbeat Lease (owned by the ManagedClusterAddOn)', async () => {
  await hub.delete(mcaPath('cluster2'));
  await waitFor(
    'Role, RoleBinding and Lease of cluster2 to be garbage-collected',
    async () => {
      const left = await Promise.all([
        hub.getOptional(
          `/apis/rbac.authorization.k8s.io/v1/namespaces/cluster2/roles/${encodeURIComponent(rbacName)}`,
        ),
        hub.getOptional(
          `/apis/rbac.authorization.k8s.io/v1/namespaces/cluster2/rolebindings/${encodeURIComponent(rbacName)}`,
        ),
        hub.getOptional(leasePath('cluster2')),
      ]);
      return left.every((o) => o === undefined);
    },
    { timeoutMs: 60_000 },
  );
});

test('a heartbeat Lease left naming an earlier ManagedClusterAddOn, or deleted, is owned by the live one again at once', async () => {
  type Lease = { metadata: { uid: string; ownerReferences?: { uid: string }[] } };
  const mca = await hub.get<{ metadata: { uid: string } }>(mcaPath('cluster1'));
  const lease = await hub.get<Lease>(leasePath('cluster1'));
  const ownedByLiveAddon = (l: Lease | undefined) =>
    l?.metadata.ownerReferences?.length === 1 && l.metadata.ownerReferences[0]?.uid === mca.metadata.uid;
  assert.ok(ownedByLiveAddon(lease));

  // What a disable and re-enable faster than the garbage collector leaves: the Lease names the deleted addon.
  const staleAt = Date.now();
  await hub.mergePatch(leasePath('cluster1'), {
    metadata: {
      ownerReferences: [
        {
          apiVersion: 'addon.open-cluster-management.io/v1alpha1',
          kind: 'ManagedClusterAddOn',
          name: addon,
          uid: '00000000-0000-4000-8000-000000000000',
        },
      ],
    },
  });
  const handed = await waitFor(
    'the Lease owned by the live ManagedClusterAddOn again',
    async () => {
      const l = await hub.getOptional<Lease>(leasePath('cluster1'));
      return ownedByLiveAddon(l) ? l : undefined;
    },
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  // The manager hands the Lease over on the update event; here the collector (idle, fast) may delete it first,
  // and then the delete event recreates it. Either way the agent has its Lease again at once.
  const tookStale = Date.now() - staleAt;
  const how =
    handed?.metadata.uid === lease.metadata.uid ? 'handed over' : 'deleted by the collector, recreated';
  console.log(`[addon-registration e2e] stale owner -> ${how} in ${tookStale} ms`);
  assert.ok(tookStale < 5_000, `${how} in ${tookStale} ms`);
  await new Promise((r) => setTimeout(r, 2_000));
  assert.ok(ownedByLiveAddon(await hub.getOptional<Lease>(leasePath('cluster1'))), 'and it stays');

  const deletedAt = Date.now();
  await hub.delete(leasePath('cluster1'));
  await waitFor(
    'the deleted Lease recreated',
    async () => ownedByLiveAddon(await hub.getOptional<Lease>(leasePath('cluster1'))),
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  const took = Date.now() - deletedAt;
  console.log(`[addon-registration e2e] deleted -> recreated in ${took} ms`);
  assert.ok(took < 5_000, `recreated on the Lease's delete event, not the 60 s resync: ${took} ms`);
});

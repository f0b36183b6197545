/**
 * One managed cluster cannot fill another's addon CSR quota (issue 30, item 3).
 *
 * OCM's registration agent stops asking for an addon's certificate while ten
 * CSRs on the hub carry that cluster/addon label pair, and any klusterlet may
 * create CSRs with any labels. Here cluster1's real klusterlet hub credential
 * creates twelve CSRs labelled for cluster2's cluster-gateway addon; the
 * manager must deny each (with its reason) and delete it, and cluster2's real
 * registration agent must still obtain a new certificate afterwards (its
 * hub-kubeconfig Secret deleted on the spoke: the agent asks for a new one at
 * once, the cheapest real rotation).
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { waitFor } from '../hack/localenv/wait.ts';
import { KubeClient } from '../shared/kube/client.ts';
import { type AddonManagerProcess, startAddonManager } from './support/addon-manager.ts';
import { certificateRequest } from './support/csr.ts';
import { environmentState, hubClient, managedClient } from './support/environment.ts';
import { recordWatch, type WatchRecorder } from './support/watch-recorder.ts';

const addon = 'cluster-gateway';
const installNs = 'open-cluster-management-agent-addon';
const csrs = '/apis/certificates.k8s.io/v1/certificatesigningrequests';
const mcaPath = (c: string) =>
  `/apis/addon.open-cluster-management.io/v1alpha1/namespaces/${c}/managedclusteraddons/${addon}`;
const secretPath = `/api/v1/namespaces/${installNs}/secrets/${addon}-hub-kubeconfig`;
const labels = {
  'open-cluster-management.io/cluster-name': 'cluster2',
  'open-cluster-management.io/addon-name': addon,
};
const subject = (c: string) => ({
  user: `system:open-cluster-management:cluster:${c}:addon:${addon}:agent:addon-agent`,
  groups: [
    `system:open-cluster-management:cluster:${c}:addon:${addon}`,
    `system:open-cluster-management:addon:${addon}`,
  ],
});

type Csr = {
  metadata: { name: string; uid: string };
  spec: { username?: string };
  status?: {
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
    certificate?: string;
  };
};
type Secret = { data?: Record<string, string> };

let hub: KubeClient;
let spoke2: KubeClient;
let cluster1Klusterlet: KubeClient;
let manager: AddonManagerProcess;
let recorder: WatchRecorder<Csr>;
const forged: string[] = [];

before(async () => {
  hub = await hubClient();
  spoke2 = await managedClient('cluster2');
  // The klusterlet registration agent's own hub identity of cluster1 (system:open-cluster-management:cluster1:...).
  cluster1Klusterlet = await KubeClient.fromKubeconfig(
    path.join(environmentState().stateDir, 'klusterlet', 'cluster1', 'hub-kubeconfig', 'kubeconfig'),
  );
  await hub.delete(mcaPath('cluster2'));
  manager = await startAddonManager('addon-manager-csr-quota');
  await hub.create(
    `/apis/addon.open-cluster-management.io/v1alpha1/namespaces/cluster2/managedclusteraddons`,
    {
      apiVersion: 'addon.open-cluster-management.io/v1alpha1',
      kind: 'ManagedClusterAddOn',
      metadata: { name: addon, namespace: 'cluster2' },
      spec: { installNamespace: installNs },
    },
  );
  recorder = recordWatch<Csr>(
    hub,
    `${csrs}?labelSelector=${encodeURIComponent(
      Object.entries(labels)
        .map(([k, v]) => `${k}=${v}`)
        .join(','),
    )}`,
  );
  await recorder.ready;
});

after(async () => {
  await recorder?.stop();
  for (const name of forged) await hub.delete(`${csrs}/${name}`).catch(() => {});
  await hub.delete(mcaPath('cluster2')).catch(() => {});
  await manager?.stop();
  for (const client of [hub, spoke2, cluster1Klusterlet]) client?.close();
});

async function certificateOnCluster2(other?: string): Promise<string> {
  const secret = await waitFor(
    `Secret ${installNs}/${addon}-hub-kubeconfig on cluster2 with a${other ? ' new' : ''} certificate`,
    async () => {
      const s = await spoke2.getOptional<Secret>(secretPath);
      const crt = s?.data?.['tls.crt'];
      return crt && crt !== other ? crt : undefined;
    },
    { timeoutMs: 60_000 },
  );
  return secret;
}

test("cluster1's klusterlet fills cluster2's quota with 12 CSRs: each is denied, with its reason, and deleted", async () => {
  await certificateOnCluster2();
  const create = async (
    user: string,
    groups: string[],
    signerName = 'kubernetes.io/kube-apiserver-client',
  ) => {
    const { csr } = await certificateRequest(user, groups);
    const created = await cluster1Klusterlet.create<Csr>(csrs, {
      apiVersion: 'certificates.k8s.io/v1',
      kind: 'CertificateSigningRequest',
      metadata: { generateName: `addon-cluster2-${addon}-`, labels },
      spec: {
        request: Buffer.from(csr).toString('base64'),
        signerName,
        usages: ['digital signature', 'key encipherment', 'client auth'],
      },
    });
    forged.push(created.metadata.name);
  };
  // What cluster2's agent would ask for, nine times; cluster1's own subject; an extra group; another signer.
  for (let i = 0; i < 9; i++) await create(subject('cluster2').user, subject('cluster2').groups);
  await create(subject('cluster1').user, subject('cluster1').groups);
  await create(subject('cluster2').user, [
    ...subject('cluster2').groups,
    'system:open-cluster-management:addon:other',
  ]);
  await create(subject('cluster2').user, subject('cluster2').groups, 'example.com/quota-filler');
  assert.equal(forged.length, 12);

  const deniedAndDeleted = (name: string) => {
    const events = recorder.events.filter((e) => e.object.metadata.name === name);
    const denied = events.find((e) =>
      e.object.status?.conditions?.some((c) => c.type === 'Denied' && c.status === 'True'),
    );
    const deleted = events.find((e) => e.type === 'DELETED');
    return denied && deleted ? { denied: denied.object, approved: events.some(isApproved) } : undefined;
  };
  const isApproved = (e: { object: Csr }) => e.object.status?.conditions?.some((c) => c.type === 'Approved');
  const outcomes = await waitFor(
    'every forged CSR denied, then deleted',
    () => {
      const all = forged.map(deniedAndDeleted);
      return all.every((o) => o !== undefined) ? all : undefined;
    },
    { timeoutMs: 20_000 },
  );
  for (const [i, outcome] of outcomes.entries()) {
    assert.equal(outcome?.approved, false, `${forged[i]} never approved`);
    const denied = outcome?.denied.status?.conditions?.find((c) => c.type === 'Denied');
    assert.equal(denied?.reason, 'RequestDisagreesWithLabels', `${forged[i]}: reason`);
    assert.match(
      denied?.message ?? '',
      /only the registration agent of cluster cluster2 may request/,
      `${forged[i]}: message says who may ask`,
    );
    assert.match(
      denied?.message ?? '',
      /requester "system:open-cluster-management:cluster1:[^"]+" is not the registration agent of cluster cluster2|signer "example.com\/quota-filler"/,
      `${forged[i]}: message says what was wrong`,
    );
  }
  const requester = outcomes[0]?.denied.spec.username ?? '';
  assert.match(
    requester,
    /^system:open-cluster-management:cluster1:/,
    'created with cluster1 klusterlet credential',
  );
  const left = await hub.list<Csr>(
    `${csrs}?labelSelector=${encodeURIComponent('open-cluster-management.io/cluster-name=cluster2')}`,
  );
  assert.deepEqual(
    left.items.map((c) => c.metadata.name).filter((n) => forged.includes(n)),
    [],
    'none left on the hub',
  );
});

test("cluster2's real registration agent still gets a new certificate afterwards", async () => {
  const previous = await certificateOnCluster2();
  // The agent asks for a new certificate as soon as its Secret is gone (as on expiry, without the wait).
  await spoke2.delete(secretPath);
  const renewed = await certificateOnCluster2(previous);
  const certificate = new X509Certificate(Buffer.from(renewed, 'base64'));
  assert.match(certificate.subject, new RegExp(`CN=${subject('cluster2').user}`));
  // Issued through a CSR of cluster2's own agent, approved by the manager.
  const issuedBy = await waitFor(
    'the CSR that issued it in the watch record',
    () => recorder.events.find((e) => e.object.status?.certificate === renewed)?.object,
    { timeoutMs: 5_000 },
  );
  assert.match(issuedBy?.spec.username ?? '', /^system:open-cluster-management:cluster2:/);
  assert.ok(
    issuedBy?.status?.conditions?.some(
      (c) => c.type === 'Approved' && c.reason === 'AutoApprovedByHubCSRApprovingController',
    ),
    "the new certificate's CSR approved by the manager",
  );
});

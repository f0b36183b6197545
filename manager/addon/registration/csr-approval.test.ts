import assert from 'node:assert/strict';
import { test } from 'node:test';
import { certificateRequest } from '../../../e2e/support/csr.ts';
import { type CertificateSigningRequest, decideCsr, isDecided, isDeniedOrFailed } from './csr-approval.ts';
import { addonAgentSubject } from './subject.ts';

const addonName = 'cluster-gateway';
const context = {
  addonName,
  subjectFor: (cluster: string) => addonAgentSubject(cluster, addonName),
  addonEnabledOn: (cluster: string) => cluster === 'cluster1' || cluster === 'cluster2',
};

async function csrFor(
  cluster: string,
  options: {
    user?: string;
    groups?: string[];
    username?: string;
    requesterGroups?: string[];
    signer?: string;
    addon?: string;
  } = {},
): Promise<CertificateSigningRequest> {
  const subject = addonAgentSubject(cluster, addonName);
  const { csr } = await certificateRequest(options.user ?? subject.user, options.groups ?? subject.groups);
  return {
    metadata: {
      name: `addon-${cluster}-${addonName}-abcde`,
      labels: {
        'open-cluster-management.io/cluster-name': cluster,
        'open-cluster-management.io/addon-name': options.addon ?? addonName,
      },
    },
    spec: {
      request: Buffer.from(csr).toString('base64'),
      signerName: options.signer ?? 'kubernetes.io/kube-apiserver-client',
      username: options.username ?? `system:open-cluster-management:${cluster}:${cluster}-agent`,
      groups: options.requesterGroups ?? [
        `system:open-cluster-management:${cluster}`,
        'system:open-cluster-management:managed-clusters',
        'system:authenticated',
      ],
      usages: ['digital signature', 'key encipherment', 'client auth'],
    },
  };
}

test('approves the registration agent CSR for its own cluster and the published subject', async () => {
  assert.deepEqual(decideCsr(await csrFor('cluster1'), context), { verdict: 'approve', cluster: 'cluster1' });
  const subject = addonAgentSubject('cluster1', addonName);
  const withAuthenticated = await csrFor('cluster1', { groups: [...subject.groups, 'system:authenticated'] });
  assert.equal(
    decideCsr(withAuthenticated, context).verdict,
    'approve',
    'older OCM defaults add system:authenticated',
  );
});

const rejections: [string, () => Promise<CertificateSigningRequest>, RegExp][] = [
  [
    "another cluster's subject, requested by cluster1",
    () => csrFor('cluster1', { ...addonAgentSubject('cluster2', addonName) }),
    /subject CN/,
  ],
  [
    "cluster label of cluster2, requested by cluster1's agent",
    () =>
      csrFor('cluster2', {
        username: 'system:open-cluster-management:cluster1:cluster1-agent',
        requesterGroups: ['system:open-cluster-management:cluster1'],
      }),
    /not the registration agent of cluster cluster2/,
  ],
  [
    'requester prefix-matching another cluster (cluster10 for cluster1)',
    () => csrFor('cluster1', { username: 'system:open-cluster-management:cluster10:cluster10-agent' }),
    /not the registration agent/,
  ],
  [
    'right name, missing the cluster group',
    () => csrFor('cluster1', { requesterGroups: ['system:authenticated'] }),
    /not in group system:open-cluster-management:cluster1/,
  ],
  [
    'a user impersonating nobody in particular',
    () => csrFor('cluster1', { username: 'alice' }),
    /not the registration agent/,
  ],
  [
    'extra group in the subject',
    () =>
      csrFor('cluster1', { groups: [...addonAgentSubject('cluster1', addonName).groups, 'system:masters'] }),
    /subject groups/,
  ],
  [
    'missing group in the subject',
    () => csrFor('cluster1', { groups: [addonAgentSubject('cluster1', addonName).groups[0]!] }),
    /subject groups/,
  ],
  ['another signer', () => csrFor('cluster1', { signer: 'kubernetes.io/kubelet-serving' }), /signer/],
  [
    "cluster2's labels, requested by cluster1's agent, for a cluster without the addon",
    () =>
      csrFor('cluster3', {
        username: 'system:open-cluster-management:cluster1:cluster1-agent',
        requesterGroups: ['system:open-cluster-management:cluster1'],
      }),
    /not the registration agent of cluster cluster3/,
  ],
  [
    'asks for server auth',
    async () => {
      const csr = await csrFor('cluster1');
      csr.spec.usages = ['digital signature', 'server auth', 'client auth'];
      return csr;
    },
    /server auth/,
  ],
  [
    'no cluster label',
    async () => {
      const csr = await csrFor('cluster1');
      delete csr.metadata.labels?.['open-cluster-management.io/cluster-name'];
      return csr;
    },
    /no open-cluster-management.io\/cluster-name label/,
  ],
];
for (const [name, build, why] of rejections) {
  test(`denies: ${name}`, async () => {
    const decision = decideCsr(await build(), context);
    assert.equal(decision.verdict, 'deny');
    assert.match((decision as { why: string }).why, why);
  });
}

test('ignores a CSR without this addon label (another approver judges it)', async () => {
  const other = decideCsr(await csrFor('cluster1', { addon: 'other' }), context);
  assert.equal(other.verdict, 'ignore');
  // The gateway replicas' peer CSRs: their own label, no addon label, a ServiceAccount requester.
  const peer = await csrFor('cluster1', {
    user: 'cluster-gateway-peer:cluster-gateway:gw-0',
    groups: [],
    username: 'system:serviceaccount:cluster-gateway:cluster-gateway',
  });
  peer.metadata.labels = { 'cluster.core.oam.dev/gateway-peer': 'true' };
  assert.equal(decideCsr(peer, context).verdict, 'ignore');
});

test('waits (not denies) a right request for a cluster whose addon is not in the cache yet', async () => {
  const decision = decideCsr(await csrFor('cluster3'), context);
  assert.equal(decision.verdict, 'wait');
  assert.match((decision as { why: string }).why, /not enabled on cluster cluster3/);
});

test('garbage in spec.request is refused, not thrown', async () => {
  const csr = await csrFor('cluster1');
  csr.spec.request = Buffer.from('not a csr').toString('base64');
  const decision = decideCsr(csr, context);
  assert.equal(decision.verdict, 'deny');
  assert.match((decision as { why: string }).why, /not a PEM certificate request/);
});

test('isDecided: approved or denied CSRs are not judged again; isDeniedOrFailed: they are deleted', async () => {
  const csr = await csrFor('cluster1');
  const withCondition = (type: string, status = 'True') => ({
    ...csr,
    status: { conditions: [{ type, status }] },
  });
  assert.equal(isDecided(csr), false);
  assert.equal(isDecided(withCondition('Denied')), true);
  assert.equal(isDecided(withCondition('Approved')), true);
  assert.equal(isDeniedOrFailed(csr), false);
  assert.equal(isDeniedOrFailed(withCondition('Approved')), false);
  assert.equal(isDeniedOrFailed(withCondition('Denied')), true);
  assert.equal(isDeniedOrFailed(withCondition('Denied', 'False')), false);
  assert.equal(
    isDeniedOrFailed({
      ...csr,
      status: {
        conditions: [
          { type: 'Approved', status: 'True' },
          { type: 'Failed', status: 'True' },
        ],
      },
    }),
    true,
  );
});

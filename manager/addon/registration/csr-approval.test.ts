import assert from 'node:assert/strict';
import { test } from 'node:test';
import { certificateRequest } from '../../../e2e/support/csr.ts';
import { type CertificateSigningRequest, decideCsr, isDecided } from './csr-approval.ts';
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
  assert.deepEqual(decideCsr(await csrFor('cluster1'), context), { approve: true, cluster: 'cluster1' });
  const subject = addonAgentSubject('cluster1', addonName);
  const withAuthenticated = await csrFor('cluster1', { groups: [...subject.groups, 'system:authenticated'] });
  assert.equal(
    decideCsr(withAuthenticated, context).approve,
    true,
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
  ['another addon', () => csrFor('cluster1', { addon: 'other' }), /not for addon/],
  ['addon not enabled on the cluster', () => csrFor('cluster3'), /not enabled on cluster cluster3/],
];
for (const [name, build, why] of rejections) {
  test(`leaves unapproved: ${name}`, async () => {
    const decision = decideCsr(await build(), context);
    assert.equal(decision.approve, false);
    assert.match((decision as { why: string }).why, why);
  });
}

test('garbage in spec.request is refused, not thrown', async () => {
  const csr = await csrFor('cluster1');
  csr.spec.request = Buffer.from('not a csr').toString('base64');
  const decision = decideCsr(csr, context);
  assert.equal(decision.approve, false);
});

test('isDecided: approved or denied CSRs are left alone', async () => {
  const csr = await csrFor('cluster1');
  assert.equal(isDecided(csr), false);
  assert.equal(isDecided({ ...csr, status: { conditions: [{ type: 'Denied', status: 'True' }] } }), true);
  assert.equal(isDecided({ ...csr, status: { conditions: [{ type: 'Approved', status: 'True' }] } }), true);
});

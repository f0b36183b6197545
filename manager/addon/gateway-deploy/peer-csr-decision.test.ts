import 'reflect-metadata';
import assert from 'node:assert/strict';
import { webcrypto } from 'node:crypto';
import { test } from 'node:test';
import * as x509 from '@peculiar/x509';
import {
  type CertificateSigningRequest,
  createPeerRequest,
  peerCsrObject,
} from '../../gateway/tunnel/peer-certificate.ts';
import { decidePeerCsr, podNameExtra, podUidExtra } from './peer-csr-decision.ts';

const context = { namespace: 'gw-ns', serviceAccount: 'cluster-gateway' };
const gatewayUser = 'system:serviceaccount:gw-ns:cluster-gateway';

/** The CSR as the hub stores it after a replica (pod gw-0) created it: the requester filled in. */
async function replicaCsr(
  overrides: {
    request?: string;
    spec?: Partial<CertificateSigningRequest['spec']>;
    labels?: Record<string, string>;
  } = {},
): Promise<CertificateSigningRequest> {
  const request = overrides.request ?? (await createPeerRequest('gw-ns', 'gw-0')).request;
  const obj = peerCsrObject(request) as CertificateSigningRequest;
  return {
    ...obj,
    metadata: { name: 'cluster-gateway-peer-x', labels: overrides.labels ?? obj.metadata.labels ?? {} },
    spec: {
      ...obj.spec,
      username: gatewayUser,
      groups: ['system:serviceaccounts', 'system:serviceaccounts:gw-ns', 'system:authenticated'],
      extra: { [podNameExtra]: ['gw-0'], [podUidExtra]: ['0b1c-uid'] },
      ...overrides.spec,
    },
  };
}

/** A request with any subject and extensions (what someone other than the replica might send). */
async function customRequest(name: string, extensions: x509.Extension[] = []): Promise<string> {
  const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name,
    keys,
    signingAlgorithm: algorithm,
    extensions,
  });
  return csr.toString('pem');
}

test("approves a replica's own request: the gateway's ServiceAccount from the pod its CN names", async () => {
  assert.deepEqual(decidePeerCsr(await replicaCsr(), context), { approve: true, replica: 'gw-0' });
  assert.deepEqual(
    decidePeerCsr(
      await replicaCsr({ spec: { usages: ['client auth', 'digital signature', 'key encipherment'] } }),
      context,
    ),
    { approve: true, replica: 'gw-0' },
  );
});

test("ignores CSRs without the gateway-peer label (the addon agents' and everyone else's)", async () => {
  assert.deepEqual(decidePeerCsr(await replicaCsr({ labels: {} }), context), { ignore: true });
  assert.deepEqual(
    decidePeerCsr(
      await replicaCsr({ labels: { 'open-cluster-management.io/addon-name': 'cluster-gateway' } }),
      context,
    ),
    { ignore: true },
  );
});

test('denies, with the reason, every labelled CSR that fails a check', async () => {
  const cases: [string, CertificateSigningRequest, RegExp][] = [
    [
      'label not "true"',
      await replicaCsr({ labels: { 'cluster.core.oam.dev/gateway-peer': 'yes' } }),
      /not "true"/,
    ],
    ['another signer', await replicaCsr({ spec: { signerName: 'kubernetes.io/kubelet-serving' } }), /signer/],
    [
      'a hub admin',
      await replicaCsr({ spec: { username: 'kubernetes-admin' } }),
      /is not the gateway's ServiceAccount/,
    ],
    [
      'another ServiceAccount of the namespace',
      await replicaCsr({ spec: { username: 'system:serviceaccount:gw-ns:default' } }),
      /is not the gateway's ServiceAccount/,
    ],
    [
      'the gateway ServiceAccount of another namespace',
      await replicaCsr({ spec: { username: 'system:serviceaccount:other:cluster-gateway' } }),
      /is not the gateway's ServiceAccount/,
    ],
    // A TokenRequest token not bound to a pod (or a client certificate named like the ServiceAccount).
    ['no pod-bound token', await replicaCsr({ spec: { extra: {} } }), /not bound to one pod/],
    [
      'no pod uid',
      await replicaCsr({ spec: { extra: { [podNameExtra]: ['gw-0'] } } }),
      /not bound to one pod/,
    ],
    [
      "another pod's name",
      await replicaCsr({ spec: { extra: { [podNameExtra]: ['gw-1'], [podUidExtra]: ['u'] } } }),
      /names replica gw-0, but the request came from pod gw-1/,
    ],
    [
      'another namespace in the CN',
      await replicaCsr({ request: (await createPeerRequest('other', 'gw-0')).request }),
      /names namespace other, not the gateway's gw-ns/,
    ],
    [
      'a group (O)',
      await replicaCsr({
        request: await customRequest('CN=cluster-gateway-peer:gw-ns:gw-0, O=system:masters'),
      }),
      /is not a single CN/,
    ],
    [
      'another CN',
      await replicaCsr({ request: await customRequest('CN=system:admin') }),
      /is not cluster-gateway-peer:<namespace>:<replica>/,
    ],
    [
      'subject alternative names',
      await replicaCsr({
        request: await customRequest('CN=cluster-gateway-peer:gw-ns:gw-0', [
          new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: 'evil.example' }]),
        ]),
      }),
      /subject alternative names/,
    ],
    ['server auth', await replicaCsr({ spec: { usages: ['client auth', 'server auth'] } }), /usages/],
    ['no client auth', await replicaCsr({ spec: { usages: ['digital signature'] } }), /usages/],
    [
      'no expiration (the signer default, a year)',
      await replicaCsr({ spec: { expirationSeconds: undefined } }),
      /expirationSeconds/,
    ],
    ['a week', await replicaCsr({ spec: { expirationSeconds: 7 * 86400 } }), /is over 86400/],
    ['not a request', await replicaCsr({ request: 'not PEM' }), /not a PEM certificate request/],
  ];
  for (const [what, csr, why] of cases) {
    const decision = decidePeerCsr(csr, context);
    assert.ok('approve' in decision && !decision.approve, `${what}: denied`);
    assert.match((decision as { why: string }).why, why, what);
  }
});

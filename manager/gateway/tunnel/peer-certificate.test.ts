import 'reflect-metadata';
import assert from 'node:assert/strict';
import { createPrivateKey, createPublicKey, webcrypto, X509Certificate } from 'node:crypto';
import { test } from 'node:test';
import { createSecureContext } from 'node:tls';
import * as x509 from '@peculiar/x509';
import { StatusError } from '../../../shared/kube/status.ts';
import { createCertificateAuthority } from '../../../shared/pki.ts';
import {
  type CertificateSigningRequest,
  createPeerRequest,
  csrOutcome,
  csrPath,
  gatewayPeerCsrLabel,
  PeerCertificateSource,
  peerCsrObject,
  renewalTime,
} from './peer-certificate.ts';
import type { PeerTls } from './peers.ts';

const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

/** Signs a PEM request as the hub's signer would, valid from `from` for `ms`. */
async function sign(requestPem: string, from = Date.now() - 1000, ms = 86_400_000): Promise<string> {
  const ca = await createCertificateAuthority('hub-signer');
  const caCert = new x509.X509Certificate(ca.cert);
  const caKey = await webcrypto.subtle.importKey(
    'pkcs8',
    x509.PemConverter.decode(ca.key)[0]!,
    algorithm,
    false,
    ['sign'],
  );
  const request = new x509.Pkcs10CertificateRequest(requestPem);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: '01',
    subject: request.subject,
    issuer: caCert.subject,
    notBefore: new Date(from),
    notAfter: new Date(from + ms),
    signingAlgorithm: algorithm,
    publicKey: await request.publicKey.export(algorithm, ['verify']),
    signingKey: caKey,
    extensions: [new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth])],
  });
  return cert.toString('pem');
}

const silent = { info: () => {}, warn: () => {} };

/** A hub that answers the created CSR's GETs with `answers` in turn (the last one repeated). */
function fakeHub(
  answers: ((csr: CertificateSigningRequest) => Promise<Partial<CertificateSigningRequest>>)[],
) {
  const created: CertificateSigningRequest[] = [];
  let gets = 0;
  return {
    created,
    get gets() {
      return gets;
    },
    hub: {
      async create<T>(path: string, body: unknown): Promise<T> {
        assert.equal(path, csrPath);
        const csr = { ...(body as CertificateSigningRequest) };
        csr.metadata = { ...csr.metadata, name: `cluster-gateway-peer-${created.length}` };
        created.push(csr);
        return csr as T;
      },
      async get<T>(path: string): Promise<T> {
        const csr = created.at(-1)!;
        assert.equal(path, `${csrPath}/${csr.metadata.name}`);
        const answer = answers[Math.min(gets++, answers.length - 1)]!;
        return { ...csr, ...(await answer(csr)) } as T;
      },
    },
  };
}
const requestOf = (csr: CertificateSigningRequest) => Buffer.from(csr.spec.request, 'base64').toString();
const issued = (from?: number, ms?: number) => async (csr: CertificateSigningRequest) => ({
  status: { certificate: Buffer.from(await sign(requestOf(csr), from, ms)).toString('base64') },
});
const pending = async () => ({});

test('the request: CN cluster-gateway-peer:<namespace>:<replica>, no O, for the key made with it', async () => {
  const { request, key } = await createPeerRequest('gw-ns', 'gw-0');
  const parsed = new x509.Pkcs10CertificateRequest(request);
  assert.equal(parsed.subject, 'CN=cluster-gateway-peer:gw-ns:gw-0');
  assert.deepEqual(parsed.subjectName.getField('O'), []);
  assert.equal(await parsed.verify(), true);
  const spki = Buffer.from(parsed.publicKey.rawData).toString('base64');
  const fromKey = createPublicKey(createPrivateKey(key))
    .export({ type: 'spki', format: 'der' })
    .toString('base64');
  assert.equal(spki, fromKey);
  const other = await createPeerRequest('gw-ns', 'gw-0');
  assert.notEqual(other.key, key, 'a new key each time');
});

test('the CSR: kube-apiserver-client signer, client auth, a day, the gateway-peer label, a generated name', () => {
  const obj = peerCsrObject('PEM') as CertificateSigningRequest & { metadata: { generateName?: string } };
  assert.equal(obj.metadata.generateName, 'cluster-gateway-peer-');
  assert.deepEqual(obj.metadata.labels, { [gatewayPeerCsrLabel]: 'true' });
  assert.deepEqual(obj.spec, {
    request: Buffer.from('PEM').toString('base64'),
    signerName: 'kubernetes.io/kube-apiserver-client',
    usages: ['digital signature', 'client auth'],
    expirationSeconds: 86400,
  });
});

test('outcomes: issued, denied or failed with the reason, or not yet', () => {
  const csr = peerCsrObject('PEM') as CertificateSigningRequest;
  assert.equal(csrOutcome(csr), undefined);
  assert.deepEqual(csrOutcome({ ...csr, status: { certificate: Buffer.from('CERT').toString('base64') } }), {
    issued: 'CERT',
  });
  assert.deepEqual(
    csrOutcome({
      ...csr,
      status: {
        conditions: [
          { type: 'Denied', status: 'True', reason: 'NotAPeer', message: 'requester is not the gateway' },
        ],
      },
    }),
    { refused: 'Denied (NotAPeer): requester is not the gateway' },
  );
  assert.deepEqual(csrOutcome({ ...csr, status: { conditions: [{ type: 'Failed', status: 'True' }] } }), {
    refused: 'Failed',
  });
});

test('obtain: polls until signed, and the certificate goes with the key kept in memory', async () => {
  const fake = fakeHub([pending, pending, issued()]);
  const source = new PeerCertificateSource({
    hub: fake.hub as never,
    namespace: 'gw-ns',
    replica: 'gw-0',
    onCertificate: () => {},
    log: silent,
    pollMs: 5,
  });
  const pair = await source.obtain();
  assert.equal(fake.gets, 3);
  assert.equal(new X509Certificate(pair.cert).subject, 'CN=cluster-gateway-peer:gw-ns:gw-0');
  createSecureContext({ cert: pair.cert, key: pair.key }); // throws when they do not match
});

test('obtain: a denied, failed or deleted CSR, or none signed in time, is a clear error', async () => {
  const denied = fakeHub([
    pending,
    async () => ({
      status: {
        conditions: [{ type: 'Denied', status: 'True', reason: 'NotAGatewayReplica', message: 'why' }],
      },
    }),
  ]);
  const options = { namespace: 'gw-ns', replica: 'gw-0', onCertificate: () => {}, log: silent, pollMs: 5 };
  await assert.rejects(
    new PeerCertificateSource({ ...options, hub: denied.hub as never }).obtain(),
    /CertificateSigningRequest cluster-gateway-peer-0 Denied \(NotAGatewayReplica\): why/,
  );
  const gone = fakeHub([
    async () => {
      throw StatusError.fromResponse(
        404,
        '{"kind":"Status","code":404,"reason":"NotFound","message":"gone"}',
      );
    },
  ]);
  await assert.rejects(
    new PeerCertificateSource({ ...options, hub: gone.hub as never }).obtain(),
    /was deleted before it was signed/,
  );
  const never = fakeHub([pending]);
  await assert.rejects(
    new PeerCertificateSource({ ...options, hub: never.hub as never, issueTimeoutMs: 60 }).obtain(),
    /not signed within 0 s \(is the addon manager running\?\)/,
  );
});

test('renewal at two thirds of the life: a second certificate without a restart', async () => {
  assert.equal(
    renewalTime(await sign((await createPeerRequest('n', 'r')).request, 0, 3_000_000)).getTime(),
    2_000_000,
  );
  const got: PeerTls[] = [];
  // Valid for 1.5 s from now: renewed after about 1 s.
  const fake = fakeHub([async (csr) => issued(Date.now(), 1_500)(csr)]);
  const source = new PeerCertificateSource({
    hub: fake.hub as never,
    namespace: 'gw-ns',
    replica: 'gw-0',
    onCertificate: (pair) => got.push(pair),
    log: silent,
    pollMs: 5,
  });
  source.start();
  try {
    const deadline = Date.now() + 10_000;
    while (got.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.equal(got.length >= 2, true, 'renewed');
    assert.notEqual(got[0]?.key, got[1]?.key, 'a new key for the new certificate');
    assert.equal(source.current, got.at(-1));
    assert.equal(fake.created.length >= 2, true);
  } finally {
    source.stop();
  }
});

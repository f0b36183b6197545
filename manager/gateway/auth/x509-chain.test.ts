import 'reflect-metadata';
import assert from 'node:assert/strict';
import { webcrypto, X509Certificate } from 'node:crypto';
import { before, describe, test } from 'node:test';
import * as x509 from '@peculiar/x509';
import { createCertificateAuthority } from '../../../shared/pki.ts';
import { RequestHeaderAuthenticator } from './request-header.ts';
import { request, startAuthServer } from './testing.ts';
import { type PeerCertificates, parsePemBundle, subjectNames, verifyClientChain } from './x509-chain.ts';

// shared/pki.ts issues leaves only; these tests need intermediate CAs too.
x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

interface Issued {
  cert: x509.X509Certificate;
  keys: webcrypto.CryptoKeyPair;
  pem: string;
  keyPem: string;
}

let serial = 1;
async function issue(
  subject: string,
  issuer: Issued | undefined,
  options: { ca: boolean; eku?: string[] },
): Promise<Issued> {
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(options.ca, undefined, true),
    new x509.KeyUsagesExtension(
      options.ca
        ? x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign
        : x509.KeyUsageFlags.digitalSignature,
      true,
    ),
  ];
  if (options.eku) extensions.push(new x509.ExtendedKeyUsageExtension(options.eku, false));
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: (serial++).toString(16).padStart(2, '0'),
    subject,
    issuer: issuer ? issuer.cert.subject : subject,
    notBefore: new Date(Date.now() - 3600_000),
    notAfter: new Date(Date.now() + 24 * 3600_000),
    signingAlgorithm: algorithm,
    publicKey: keys.publicKey,
    signingKey: issuer ? issuer.keys.privateKey : keys.privateKey,
    extensions,
  });
  const der = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  return { cert, keys, pem: cert.toString('pem'), keyPem: x509.PemConverter.encode(der, 'PRIVATE KEY') };
}

function peer(leaf: Issued, intermediates: Issued[] = []): PeerCertificates {
  return {
    leaf: new X509Certificate(leaf.pem),
    intermediates: () => intermediates.map((cert) => new X509Certificate(cert.pem)),
  };
}

describe('client certificate chains', () => {
  let root: Issued;
  let intermediate: Issued;
  let leaf: Issued;
  let roots: X509Certificate[];

  before(async () => {
    root = await issue('CN=root', undefined, { ca: true });
    intermediate = await issue('CN=intermediate', root, { ca: true });
    leaf = await issue('CN=front-proxy-client, O=ops', intermediate, {
      ca: false,
      eku: [x509.ExtendedKeyUsage.clientAuth],
    });
    roots = parsePemBundle(root.pem);
  });

  test('a leaf verifies through an intermediate the client presented', () => {
    const result = verifyClientChain(peer(leaf, [intermediate]), roots);
    assert.equal(result.ok, true);
    if (result.ok)
      assert.deepEqual(
        result.chain.map((c) => subjectNames(c).commonName),
        ['front-proxy-client', 'intermediate', 'root'],
      );
  });

  test('without the intermediate the chain does not reach the root', () => {
    const result = verifyClientChain(peer(leaf), roots);
    assert.equal(result.ok, false);
  });

  test('an intermediate without the CA flag cannot issue', async () => {
    const notCA = await issue('CN=not-a-ca', root, { ca: false });
    const under = await issue('CN=victim', notCA, { ca: false });
    assert.equal(verifyClientChain(peer(under, [notCA]), roots).ok, false);
  });

  test('an intermediate restricted to serverAuth cannot vouch for a client', async () => {
    const serverOnly = await issue('CN=server-only', root, {
      ca: true,
      eku: [x509.ExtendedKeyUsage.serverAuth],
    });
    const under = await issue('CN=client', serverOnly, { ca: false });
    assert.equal(verifyClientChain(peer(under, [serverOnly]), roots).ok, false);
  });

  test('a certificate with the same names but another key is refused', async () => {
    const impostorRoot = await issue('CN=root', undefined, { ca: true });
    const forged = await issue('CN=front-proxy-client', impostorRoot, { ca: false });
    assert.equal(verifyClientChain(peer(forged, [impostorRoot]), roots).ok, false);
  });

  test('subject names: CN is the user, every O a group', async () => {
    const ca = await createCertificateAuthority('names');
    const issued = await ca.issue({ commonName: 'a, b', organizations: ['x,y', 'z'], usage: 'client' });
    assert.deepEqual(subjectNames(new X509Certificate(issued.cert)), {
      commonName: 'a, b',
      organizations: ['x,y', 'z'],
    });
  });

  test('over TLS, an intermediate listed in the CA bundle is a trust anchor', async () => {
    // Node does not expose the intermediates a client sends on a server
    // socket (getPeerCertificate(true) stops at the leaf), so a chain is
    // only accepted when its issuer is in the bundle, as Go's Roots would
    // accept it; an intermediate that only the client sends is refused.
    const configMapData = {
      'requestheader-client-ca-file': root.pem,
      'requestheader-allowed-names': '["front-proxy-client"]',
      'requestheader-username-headers': '["X-Remote-User"]',
    };
    const authenticator = new RequestHeaderAuthenticator({ configMapData });
    const server = await startAuthServer(authenticator, [root.pem]);
    const chainPem = { cert: `${leaf.pem}\n${intermediate.pem}`, key: leaf.keyPem };
    try {
      const refused = await request(server, { cert: chainPem, headers: { 'X-Remote-User': 'dave' } });
      assert.equal(refused.status, 401);

      authenticator.update({
        ...configMapData,
        'requestheader-client-ca-file': `${root.pem}\n${intermediate.pem}`,
      });
      const res = await request(server, { cert: chainPem, headers: { 'X-Remote-User': 'dave' } });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(res.body['user'], { name: 'dave', groups: [], extra: {} });
    } finally {
      await server.close();
    }
  });
});

import 'reflect-metadata';
import assert from 'node:assert/strict';
import { webcrypto, X509Certificate } from 'node:crypto';
import { before, describe, test } from 'node:test';
import * as x509 from '@peculiar/x509';
import { createCertificateAuthority } from '../../../shared/pki.ts';
import {
  isDirectlyTrustedServer,
  type PeerCertificates,
  parsePemBundle,
  subjectNames,
  verifyClientChain,
} from '../../../shared/x509-chain.ts';
import { RequestHeaderAuthenticator } from './request-header.ts';
import { request, startAuthServer } from './testing.ts';

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
  options: { ca: boolean; eku?: string[]; dns?: string[]; ips?: string[]; validHours?: [number, number] },
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
  const names = [
    ...(options.dns ?? []).map((value) => ({ type: 'dns' as const, value })),
    ...(options.ips ?? []).map((value) => ({ type: 'ip' as const, value })),
  ];
  if (names.length) extensions.push(new x509.SubjectAlternativeNameExtension(names, false));
  const [from, to] = options.validHours ?? [-1, 24];
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: (serial++).toString(16).padStart(2, '0'),
    subject,
    issuer: issuer ? issuer.cert.subject : subject,
    notBefore: new Date(Date.now() + from * 3600_000),
    notAfter: new Date(Date.now() + to * 3600_000),
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

describe('server certificates the gateway vouches for itself', () => {
  const serverAuth = [x509.ExtendedKeyUsage.serverAuth];
  let ca: Issued;
  let roots: X509Certificate[];
  const leaf = (cert: Issued) => new X509Certificate(cert.pem);

  before(async () => {
    ca = await issue('CN=cluster-ca', undefined, { ca: true });
    roots = parsePemBundle(ca.pem);
  });

  test('a leaf the CA signed directly, naming the host', async () => {
    const server = await issue('CN=kube-apiserver', ca, {
      ca: false,
      eku: serverAuth,
      dns: ['api.example.com', '*.apps.example.com'],
      ips: ['10.0.0.1'],
    });
    assert.equal(isDirectlyTrustedServer(leaf(server), roots, 'api.example.com'), true);
    assert.equal(isDirectlyTrustedServer(leaf(server), roots, '10.0.0.1'), true);
    assert.equal(isDirectlyTrustedServer(leaf(server), roots, 'x.apps.example.com'), true);
    assert.equal(isDirectlyTrustedServer(leaf(server), roots, 'other.example.com'), false);
    assert.equal(isDirectlyTrustedServer(leaf(server), roots, '10.0.0.2'), false);
    assert.equal(isDirectlyTrustedServer(leaf(server), roots, 'a.b.apps.example.com'), false);
  });

  test('the common name is not a host name (as in Go)', async () => {
    const server = await issue('CN=api.example.com', ca, { ca: false, eku: serverAuth });
    assert.equal(isDirectlyTrustedServer(leaf(server), roots, 'api.example.com'), false);
  });

  test('a self-signed server certificate that is itself the bundle', async () => {
    const pinned = await issue('CN=pinned', undefined, { ca: false, eku: serverAuth, dns: ['pinned.local'] });
    assert.equal(isDirectlyTrustedServer(leaf(pinned), parsePemBundle(pinned.pem), 'pinned.local'), true);
    assert.equal(isDirectlyTrustedServer(leaf(pinned), roots, 'pinned.local'), false);
  });

  test('expired, not yet valid, or for clients only: not vouched for', async () => {
    const expired = await issue('CN=old', ca, { ca: false, dns: ['h'], validHours: [-48, -24] });
    const early = await issue('CN=early', ca, { ca: false, dns: ['h'], validHours: [24, 48] });
    const clientOnly = await issue('CN=client', ca, {
      ca: false,
      dns: ['h'],
      eku: [x509.ExtendedKeyUsage.clientAuth],
    });
    for (const cert of [expired, early, clientOnly])
      assert.equal(isDirectlyTrustedServer(leaf(cert), roots, 'h'), false);
  });

  test('signed by an intermediate, by a CA outside the bundle, or by a non-CA: not vouched for', async () => {
    const intermediate = await issue('CN=intermediate', ca, { ca: true });
    const underIntermediate = await issue('CN=s', intermediate, { ca: false, dns: ['h'] });
    const impostor = await issue('CN=cluster-ca', undefined, { ca: true });
    const forged = await issue('CN=s', impostor, { ca: false, dns: ['h'] });
    const notCa = await issue('CN=not-a-ca', undefined, { ca: false });
    const underNotCa = await issue('CN=s', notCa, { ca: false, dns: ['h'] });
    assert.equal(isDirectlyTrustedServer(leaf(underIntermediate), roots, 'h'), false);
    assert.equal(isDirectlyTrustedServer(leaf(forged), roots, 'h'), false);
    assert.equal(isDirectlyTrustedServer(leaf(underNotCa), parsePemBundle(notCa.pem), 'h'), false);
  });

  test('a SHA-1 signature or a weak RSA key is left to OpenSSL; RSA 2048 with SHA-256 is vouched for', async () => {
    const rsa = async (bits: number) =>
      (await webcrypto.subtle.generateKey(
        {
          name: 'RSASSA-PKCS1-v1_5',
          modulusLength: bits,
          publicExponent: new Uint8Array([1, 0, 1]),
          hash: 'SHA-256',
        },
        true,
        ['sign', 'verify'],
      )) as webcrypto.CryptoKeyPair;
    const caKeys = await rsa(2048);
    const caCert = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: 'aa01',
      name: 'CN=rsa-ca',
      notBefore: new Date(Date.now() - 3600_000),
      notAfter: new Date(Date.now() + 3600_000),
      signingAlgorithm: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
      keys: caKeys,
      extensions: [
        new x509.BasicConstraintsExtension(true, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true),
      ],
    });
    const server = async (keys: webcrypto.CryptoKeyPair, hash: string) =>
      new X509Certificate(
        (
          await x509.X509CertificateGenerator.create({
            serialNumber: `aa${serial++}`,
            subject: 'CN=s',
            issuer: 'CN=rsa-ca',
            notBefore: new Date(Date.now() - 3600_000),
            notAfter: new Date(Date.now() + 3600_000),
            signingAlgorithm: { name: 'RSASSA-PKCS1-v1_5', hash },
            publicKey: keys.publicKey,
            // WebCrypto signs with the hash the key was imported for.
            signingKey: await webcrypto.subtle.importKey(
              'pkcs8',
              await webcrypto.subtle.exportKey('pkcs8', caKeys.privateKey),
              { name: 'RSASSA-PKCS1-v1_5', hash },
              false,
              ['sign'],
            ),
            extensions: [new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: 'h' }], false)],
          })
        ).toString('pem'),
      );
    const bundle = parsePemBundle(caCert.toString('pem'));
    const strong = await rsa(2048);
    assert.equal(isDirectlyTrustedServer(await server(strong, 'SHA-256'), bundle, 'h'), true);
    const sha1 = await server(strong, 'SHA-1');
    assert.equal(sha1.signatureAlgorithm, 'sha1WithRSAEncryption');
    assert.equal(isDirectlyTrustedServer(sha1, bundle, 'h'), false);
    assert.equal(isDirectlyTrustedServer(await server(await rsa(1024), 'SHA-256'), bundle, 'h'), false);
  });

  test('a CA with name constraints is left to OpenSSL', async () => {
    const constrained = await issue('CN=constrained', undefined, { ca: true });
    const withConstraints = await x509.X509CertificateGenerator.create({
      serialNumber: 'ff01',
      subject: 'CN=constrained',
      issuer: 'CN=constrained',
      notBefore: new Date(Date.now() - 3600_000),
      notAfter: new Date(Date.now() + 3600_000),
      signingAlgorithm: algorithm,
      publicKey: constrained.keys.publicKey,
      signingKey: constrained.keys.privateKey,
      extensions: [
        new x509.BasicConstraintsExtension(true, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true),
        // nameConstraints (2.5.29.30): permitted DNS subtree "example.com", as DER.
        new x509.Extension('2.5.29.30', true, Buffer.from('300fa00d300b820b6578616d706c652e636f6d', 'hex')),
      ],
    });
    const server = await issue('CN=s', constrained, { ca: false, dns: ['a.example.com'] });
    const bundle = parsePemBundle(withConstraints.toString('pem'));
    assert.equal(isDirectlyTrustedServer(leaf(server), bundle, 'a.example.com'), false);
    assert.equal(
      isDirectlyTrustedServer(leaf(server), parsePemBundle(constrained.pem), 'a.example.com'),
      true,
    );
  });
});

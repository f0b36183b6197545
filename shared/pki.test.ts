import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { test } from 'node:test';
import { createCertificateAuthority, loadCertificateAuthority } from './pki.ts';

test('a leaf certificate verifies against its CA and carries its names', async () => {
  const ca = await createCertificateAuthority('test-ca');
  const leaf = await ca.issue({
    commonName: 'admin',
    organizations: ['system:masters'],
    dnsNames: ['localhost'],
    ipAddresses: ['127.0.0.1'],
    usage: 'both',
  });
  const cert = new X509Certificate(leaf.cert);
  assert.ok(cert.verify(new X509Certificate(ca.cert).publicKey));
  assert.match(cert.subject, /CN=admin/);
  assert.match(cert.subject, /O=system:masters/);
  assert.equal(cert.checkHost('localhost'), 'localhost');
  assert.equal(cert.checkIP('127.0.0.1'), '127.0.0.1');
  assert.match(leaf.key, /BEGIN PRIVATE KEY/);
});

test('a CA loaded from PEM issues certificates that verify against it', async () => {
  const ca = await createCertificateAuthority('persisted');
  const loaded = await loadCertificateAuthority({ cert: ca.cert, key: ca.key });
  const leaf = await loaded.issue({ commonName: 'x', usage: 'client' });
  assert.ok(new X509Certificate(leaf.cert).verify(new X509Certificate(ca.cert).publicKey));
});

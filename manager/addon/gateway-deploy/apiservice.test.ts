import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createCertificateAuthority } from '../../../shared/pki.ts';
import { apiService } from './apiservice.ts';
import { gatewayNames } from './names.ts';

const names = gatewayNames('cg-system', 'cluster-gateway', 'creds');

test('the APIService trusts exactly the given CA and never skips verification', async () => {
  const ca = await createCertificateAuthority('test-ca');
  const obj = apiService(names, 443, ca.cert) as {
    metadata: { name: string };
    spec: Record<string, unknown>;
  };
  assert.equal(obj.metadata.name, 'v1alpha1.cluster.core.oam.dev');
  assert.equal(Buffer.from(String(obj.spec.caBundle), 'base64').toString(), ca.cert);
  assert.equal(obj.spec.insecureSkipTLSVerify, false);
  assert.deepEqual(obj.spec.service, { namespace: 'cg-system', name: 'cluster-gateway', port: 443 });
});

test('no placeholder bundle: empty, "Cg==" decoded, or a broken certificate is refused', () => {
  for (const bundle of ['', '\n', '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n']) {
    assert.throws(() => apiService(names, 443, bundle));
  }
});

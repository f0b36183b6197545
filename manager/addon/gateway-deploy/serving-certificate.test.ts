import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { describe, test } from 'node:test';
import { decodeSecretData, encodeSecretData, recheckAt, servingCertificate } from './serving-certificate.ts';

const day = 86400_000;
const settings = {
  hosts: ['gw.ns.svc', 'localhost'],
  subject: 'gw.ns',
  caValidForMs: 30 * day,
  servingValidForMs: 9 * day,
};

describe('gateway serving certificate', () => {
  test('made from nothing; kept while valid; the leaf renewed with the same CA', async () => {
    const now = Date.now();
    const first = await servingCertificate({}, settings, now);
    assert.equal(first.renewal, 'ca');
    const leaf = new X509Certificate(first.data['tls.crt'] ?? '');
    assert.ok(leaf.checkHost('gw.ns.svc') && leaf.checkHost('localhost'));
    assert.equal(first.caBundle, `${first.data['ca.crt']?.trimEnd()}\n`);
    const kept = await servingCertificate(first.data, settings, now + day);
    assert.equal(kept.renewal, 'none');
    assert.deepEqual(kept.data, first.data);
    const renewed = await servingCertificate(first.data, settings, now + 8 * day);
    assert.equal(renewed.renewal, 'serving');
    assert.equal(renewed.data['ca.crt'], first.data['ca.crt'], 'same CA: the caBundle does not change');
    assert.notEqual(renewed.data['tls.crt'], first.data['tls.crt']);
  });

  test('a new host (say, an external name added) reissues the leaf', async () => {
    const now = Date.now();
    const first = await servingCertificate({}, settings, now);
    const more = await servingCertificate(first.data, { ...settings, hosts: [...settings.hosts, 'gw'] }, now);
    assert.equal(more.renewal, 'serving');
  });

  test('recheck: at the next renewal point, and when the previous CA expires', async () => {
    const now = Date.now();
    const { data } = await servingCertificate({}, settings, now);
    const leaf = new X509Certificate(data['tls.crt'] ?? '');
    const from = Date.parse(leaf.validFrom);
    const to = Date.parse(leaf.validTo);
    assert.equal(recheckAt(data, now), to - (to - from) / 3);
    const withPrevious = { ...data, 'ca-previous.crt': data['ca.crt'] ?? '' };
    const beyond = to; // the leaf's renewal point passed: the CA's (and the previous CA's) remain
    assert.ok(recheckAt(withPrevious, beyond) > beyond);
  });

  test('Secret data round trip', () => {
    const data = { 'ca.crt': 'a', 'tls.key': 'b' };
    assert.deepEqual(decodeSecretData(encodeSecretData(data)), data);
  });
});

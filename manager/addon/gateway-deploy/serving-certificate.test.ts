import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { describe, test } from 'node:test';
import { parseRotationSchedule } from './rotation-schedule.ts';
import {
  decodeSecretData,
  encodeSecretData,
  planRotation,
  recheckAt,
  servingCertificate,
} from './serving-certificate.ts';

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
    assert.equal(recheckAt(data, settings, now), to - (to - from) / 3);
    const withPrevious = { ...data, 'ca-previous.crt': data['ca.crt'] ?? '' };
    const beyond = to; // the leaf's renewal point passed: the CA's (and the previous CA's) remain
    assert.ok(recheckAt(withPrevious, settings, beyond) > beyond);
  });

  test('test validities (CA 120 s, leaf 60 s): kept until their rotation point, not renewed on every reconcile', async () => {
    const short = { ...settings, caValidForMs: 120_000, servingValidForMs: 60_000 };
    const now = Date.now();
    const first = await servingCertificate({}, short, now);
    const leaf = new X509Certificate(first.data['tls.crt'] ?? '');
    // Backdated by a tenth of the validity, not an hour: the life rotation is measured on is the validity's.
    assert.ok(Date.parse(leaf.validTo) - Date.parse(leaf.validFrom) <= 67_000);
    assert.equal(planRotation(first.data, short, now + 1000).renewal, 'none');
    // The timer the controller sets: the leaf's rotation, about 38 s after issue.
    const recheck = first.recheckAt - now;
    assert.ok(recheck > 30_000 && recheck < 40_000, `recheck in ${recheck} ms`);
    assert.equal(planRotation(first.data, short, first.recheckAt).renewal, 'serving');
    const renewed = await servingCertificate(first.data, short, first.recheckAt);
    assert.equal(renewed.data['ca.crt'], first.data['ca.crt']);
    // The CA's turn (about 76 s after issue): a new CA, the old one kept in the bundle.
    const caTurn = await servingCertificate(renewed.data, short, now + 80_000);
    assert.equal(caTurn.renewal, 'ca');
    assert.equal(caTurn.data['ca-previous.crt'], first.data['ca.crt']);
    assert.equal((caTurn.caBundle.match(/BEGIN CERTIFICATE/g) ?? []).length, 2);
  });

  test('a lowered validity (helm upgrade to test values) rotates the CA at once', async () => {
    const now = Date.now();
    const { data } = await servingCertificate({}, settings, now);
    const lowered = { ...settings, caValidForMs: 120_000, servingValidForMs: 60_000 };
    assert.deepEqual(planRotation(data, lowered, now + 1000), { renewal: 'ca', reason: 'shortened' });
  });

  test('a maintenance window defers a due rotation to its tick, and the recheck points at the tick', async () => {
    const now = Date.now();
    const { data } = await servingCertificate({}, settings, now);
    const leaf = new X509Certificate(data['tls.crt'] ?? '');
    const due = Date.parse(leaf.validTo) - (Date.parse(leaf.validTo) - Date.parse(leaf.validFrom)) / 3;
    // Every day at 03:17:00 UTC: the first tick after the due point.
    const daily = parseRotationSchedule('0 17 3 * * *');
    assert.ok(daily);
    const windowed = { ...settings, schedule: daily };
    const tick = daily.nextTick(due, Number.POSITIVE_INFINITY) ?? 0;
    if (tick - due > 1000) assert.equal(planRotation(data, windowed, due + 1).renewal, 'none', 'waits');
    assert.equal(recheckAt(data, windowed, due + 1), tick);
    assert.deepEqual(planRotation(data, windowed, tick + 100), { renewal: 'serving', reason: 'window' });
  });

  test('missing or foreign parts are repaired at once, whatever the window', async () => {
    const windowed = { ...settings, schedule: parseRotationSchedule('0 0 1 1 *') };
    assert.deepEqual(planRotation({}, windowed, Date.now()), { renewal: 'ca', reason: 'repair' });
    const { data } = await servingCertificate({}, settings, Date.now());
    const other = await servingCertificate({}, settings, Date.now());
    const foreign = { ...data, 'tls.crt': other.data['tls.crt'], 'tls.key': other.data['tls.key'] };
    assert.deepEqual(planRotation(foreign, windowed, Date.now()), { renewal: 'serving', reason: 'repair' });
  });

  test('the verdict key: made once when missing, carried over unchanged through leaf renewal and CA rotation', async () => {
    const short = { ...settings, caValidForMs: 120_000, servingValidForMs: 60_000 };
    const now = Date.now();
    const first = await servingCertificate({}, short, now);
    assert.equal(first.verdictKeyGenerated, true);
    const key = first.data['verdict.key'] ?? '';
    assert.match(key, /^[0-9a-f]{64}$/, '32 random bytes, as hex');
    const kept = await servingCertificate(first.data, short, now + 1000);
    assert.equal(kept.renewal, 'none');
    assert.equal(kept.verdictKeyGenerated, false);
    assert.deepEqual(kept.data, first.data, 'nothing to write');
    const renewed = await servingCertificate(first.data, short, first.recheckAt);
    assert.equal(renewed.renewal, 'serving');
    assert.equal(renewed.data['verdict.key'], key, 'leaf renewal keeps it');
    const rotated = await servingCertificate(renewed.data, short, now + 80_000);
    assert.equal(rotated.renewal, 'ca');
    assert.notEqual(rotated.data['ca.crt'], first.data['ca.crt']);
    assert.equal(rotated.data['verdict.key'], key, 'CA rotation keeps it');
    assert.equal(rotated.verdictKeyGenerated, false);
    // A Secret from before the key existed, certificates valid: the key is added, nothing reissued.
    const { 'verdict.key': _dropped, ...older } = first.data;
    const added = await servingCertificate(older, short, now + 1000);
    assert.equal(added.renewal, 'none');
    assert.equal(added.verdictKeyGenerated, true);
    assert.equal(added.data['tls.crt'], first.data['tls.crt']);
    assert.match(added.data['verdict.key'] ?? '', /^[0-9a-f]{64}$/);
    assert.notEqual(added.data['verdict.key'], key, 'random, not derived');
    // One the gateway would refuse (shorter than 32 bytes) is replaced rather than stopping every replica.
    const tooShort = await servingCertificate({ ...first.data, 'verdict.key': 'x'.repeat(31) }, short, now);
    assert.equal(tooShort.verdictKeyGenerated, true);
    assert.match(tooShort.data['verdict.key'] ?? '', /^[0-9a-f]{64}$/);
  });

  test('Secret data round trip', () => {
    const data = { 'ca.crt': 'a', 'tls.key': 'b' };
    assert.deepEqual(decodeSecretData(encodeSecretData(data)), data);
  });
});

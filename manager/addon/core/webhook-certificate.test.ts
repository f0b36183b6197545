import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { describe, test } from 'node:test';
import { StatusError } from '../../../shared/kube/status.ts';
import { WebhookCertificate } from './webhook-certificate.ts';

const day = 24 * 3600 * 1000;
const quiet = { info() {}, warn() {} };

/** An in-memory Secret store with the apiserver's create/update conflict rules. */
function fakeHub() {
  let stored: { metadata: { resourceVersion: string }; data: Record<string, string> } | undefined;
  let version = 0;
  return {
    get stored() {
      return stored;
    },
    async getOptional() {
      return stored && structuredClone(stored);
    },
    async create(_path: string, body: { data: Record<string, string> }) {
      if (stored)
        throw new StatusError({
          kind: 'Status',
          status: 'Failure',
          code: 409,
          reason: 'AlreadyExists',
          message: 'exists',
        } as never);
      stored = { ...structuredClone(body), metadata: { resourceVersion: String(++version) } };
      return stored;
    },
    async request(_method: string, _path: string, options: { body?: unknown } = {}) {
      const body = options.body as { metadata: { resourceVersion?: string }; data: Record<string, string> };
      if (body.metadata.resourceVersion !== stored?.metadata.resourceVersion) {
        throw new StatusError({
          kind: 'Status',
          status: 'Failure',
          code: 409,
          reason: 'Conflict',
          message: 'modified',
        } as never);
      }
      stored = { ...structuredClone(body), metadata: { resourceVersion: String(++version) } };
      return stored;
    },
  };
}

function certificate(
  hub: ReturnType<typeof fakeHub>,
  options: { hosts?: string[]; now?: () => number } = {},
) {
  return new WebhookCertificate({
    hub: hub as never,
    namespace: 'cg',
    secretName: 'cg-webhook',
    hosts: options.hosts ?? ['svc.cg.svc', '127.0.0.1'],
    log: quiet,
    caValidForMs: 30 * day,
    servingValidForMs: 9 * day,
    ...(options.now ? { now: options.now } : {}),
  });
}

describe('WebhookCertificate', () => {
  test('made once, kept in the Secret: another replica or a restart serves the same one', async () => {
    const hub = fakeHub();
    const first = await certificate(hub).ensure();
    const again = await certificate(hub).ensure();
    assert.deepEqual(again, first);
    const leaf = new X509Certificate(first.cert);
    assert.ok(leaf.checkHost('svc.cg.svc') && leaf.checkIP('127.0.0.1'));
    assert.ok(leaf.verify(new X509Certificate(first.caBundle).publicKey), 'the bundle trusts the leaf');
  });

  test('two replicas starting together end up with one certificate', async () => {
    const hub = fakeHub();
    const [a, b] = await Promise.all([certificate(hub).ensure(), certificate(hub).ensure()]);
    assert.deepEqual(a, b);
  });

  test('the serving certificate is renewed with a third of its life left; the CA, and so the caBundle, stay', async () => {
    const hub = fakeHub();
    const first = await certificate(hub).ensure();
    const notYet = await certificate(hub, { now: () => Date.now() + 5 * day }).ensure();
    assert.equal(notYet.cert, first.cert);
    const renewed = await certificate(hub, { now: () => Date.now() + 7 * day }).ensure();
    assert.notEqual(renewed.cert, first.cert);
    assert.equal(renewed.caBundle, first.caBundle);
  });

  test('the CA is renewed with a third of its life left; the old one stays trusted meanwhile', async () => {
    const hub = fakeHub();
    const first = await certificate(hub).ensure();
    const renewed = await certificate(hub, { now: () => Date.now() + 21 * day }).ensure();
    assert.notEqual(renewed.caBundle, first.caBundle);
    assert.ok(renewed.caBundle.includes(first.caBundle.trim()), 'the previous CA is still in the bundle');
    const leaf = new X509Certificate(renewed.cert);
    assert.ok(!leaf.verify(new X509Certificate(first.caBundle).publicKey), 'signed by the new CA');
  });

  test('a new host (another --webhook-url) gets a certificate that names it', async () => {
    const hub = fakeHub();
    const first = await certificate(hub).ensure();
    const moved = await certificate(hub, { hosts: ['svc.cg.svc', '127.0.0.2'] }).ensure();
    assert.notEqual(moved.cert, first.cert);
    assert.ok(new X509Certificate(moved.cert).checkIP('127.0.0.2'));
    assert.equal(moved.caBundle, first.caBundle);
  });
});

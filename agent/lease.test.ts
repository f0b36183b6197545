import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Lease, microTime, renewed, renewLease } from './lease.ts';
import { fakeClient, statusError } from './testing.ts';

const id = { namespace: 'ns', name: 'cluster-gateway', holderIdentity: 'agent-1', leaseDurationSeconds: 12 };
const path = '/apis/coordination.k8s.io/v1/namespaces/ns/leases/cluster-gateway';
const t0 = Date.UTC(2026, 7, 11, 10, 0, 0) * 1000 + 123_456;

test('microTime: RFC 3339 with exactly six fractional digits, as metav1.MicroTime', () => {
  assert.equal(microTime(t0), '2026-08-11T10:00:00.123456Z');
  assert.equal(microTime(Date.UTC(2026, 0, 1) * 1000 + 7), '2026-01-01T00:00:00.000007Z');
  assert.equal(microTime(Date.UTC(2026, 0, 1) * 1000 + 999_999), '2026-01-01T00:00:00.999999Z');
});

test('renewed: moves renewTime, keeps acquireTime for the same holder and other fields', () => {
  const lease: Lease = {
    metadata: { name: 'x', namespace: 'ns', resourceVersion: '7' },
    spec: { holderIdentity: 'agent-1', acquireTime: 'A', renewTime: 'R', extra: 1 },
  };
  const out = renewed(lease, id, 'NOW');
  assert.equal(out.metadata.resourceVersion, '7');
  assert.deepEqual(out.spec, {
    holderIdentity: 'agent-1',
    acquireTime: 'A',
    renewTime: 'NOW',
    leaseDurationSeconds: 12,
    extra: 1,
  });
  // A new holder (the manager created it, or another pod held it) acquires it now.
  assert.equal(renewed({ ...lease, spec: { holderIdentity: 'other' } }, id, 'NOW').spec?.acquireTime, 'NOW');
});

test('renewLease: update with the resourceVersion read, MicroTime renewTime', async () => {
  const { client, calls } = fakeClient((c) =>
    c.method === 'GET'
      ? { metadata: { name: id.name, namespace: 'ns', resourceVersion: '5' }, spec: {} }
      : {},
  );
  assert.equal(await renewLease(client, id, { createIfMissing: false, now: () => t0 }), 'renewed');
  assert.deepEqual(
    calls.map((c) => `${c.method} ${c.path}`),
    [`GET ${path}`, `PUT ${path}`],
  );
  const body = calls[1]?.body as Lease;
  assert.equal(body.metadata.resourceVersion, '5');
  assert.equal(body.spec?.renewTime, '2026-08-11T10:00:00.123456Z');
});

test('renewLease: a Lease just read spares the GET', async () => {
  const { client, calls } = fakeClient(() => ({}));
  const current: Lease = { metadata: { name: id.name, namespace: 'ns', resourceVersion: '1' } };
  await renewLease(client, id, { createIfMissing: false, current });
  assert.deepEqual(
    calls.map((c) => c.method),
    ['PUT'],
  );
});

test('renewLease: missing Lease is created on the spoke (with its owner), an error on the hub', async () => {
  const missing = fakeClient((c) => {
    if (c.method === 'GET') throw statusError(404);
    return {};
  });
  const owner = { apiVersion: 'v1', kind: 'ServiceAccount', name: 'agent', uid: 'u1' };
  assert.equal(
    await renewLease(missing.client, id, { createIfMissing: true, ownerReference: owner, now: () => t0 }),
    'created',
  );
  const created = missing.calls[1];
  assert.equal(created?.method, 'POST');
  assert.equal(created?.path, '/apis/coordination.k8s.io/v1/namespaces/ns/leases');
  const body = created?.body as Lease;
  assert.deepEqual(body.metadata.ownerReferences, [owner]);
  assert.equal(body.spec?.renewTime, '2026-08-11T10:00:00.123456Z');
  assert.equal(body.spec?.acquireTime, body.spec?.renewTime);

  const hub = fakeClient(() => {
    throw statusError(404);
  });
  await assert.rejects(renewLease(hub.client, id, { createIfMissing: false }), { code: 404 });
  assert.equal(hub.calls.length, 1, 'never creates on the hub');
});

test('renewLease: a write conflict is retried once on a fresh read, then reported', async () => {
  let puts = 0;
  const once = fakeClient((c) => {
    if (c.method === 'GET')
      return { metadata: { name: id.name, namespace: 'ns', resourceVersion: String(puts) } };
    if (puts++ === 0) throw statusError(409);
    return {};
  });
  assert.equal(await renewLease(once.client, id, { createIfMissing: false }), 'renewed');
  assert.deepEqual(
    once.calls.map((c) => c.method),
    ['GET', 'PUT', 'GET', 'PUT'],
  );

  const always = fakeClient((c) => {
    if (c.method === 'GET') return { metadata: { name: id.name, namespace: 'ns' } };
    throw statusError(409);
  });
  await assert.rejects(renewLease(always.client, id, { createIfMissing: false }), { code: 409 });
  assert.equal(always.calls.length, 4);
});

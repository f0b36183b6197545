import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import type { Informer } from '../../../shared/kube/informer.ts';
import {
  type CertificateSigningRequest,
  createPeerRequest,
  peerCsrObject,
} from '../../gateway/tunnel/peer-certificate.ts';
import { PeerCertificateApprover, peerApprovalReason, peerDenialReason } from './peer-certificates.ts';
import { podNameExtra, podUidExtra } from './peer-csr-decision.ts';

const csrs = '/apis/certificates.k8s.io/v1/certificatesigningrequests';

async function csr(name: string, username: string, status?: CertificateSigningRequest['status']) {
  const obj = peerCsrObject((await createPeerRequest('gw-ns', 'gw-0')).request) as CertificateSigningRequest;
  return {
    ...obj,
    metadata: { name, labels: obj.metadata.labels ?? {}, creationTimestamp: '2026-01-01T00:00:00Z' },
    spec: { ...obj.spec, username, extra: { [podNameExtra]: ['gw-0'], [podUidExtra]: ['u'] } },
    ...(status ? { status } : {}),
  } as CertificateSigningRequest;
}

function setUp(items: Record<string, CertificateSigningRequest>, now: number) {
  const calls: { method: string; path: string; body?: CertificateSigningRequest }[] = [];
  const hub = {
    request: async (method: string, path: string, options?: { body?: CertificateSigningRequest }) => {
      calls.push({ method, path, ...(options?.body ? { body: options.body } : {}) });
      return {};
    },
    delete: async (path: string) => void calls.push({ method: 'DELETE', path }),
  };
  const informer = {
    get: (key: string) => items[key],
    list: () => Object.values(items),
    on: () => () => {},
    synced: Promise.resolve(),
  } as unknown as Informer<CertificateSigningRequest>;
  const approver = new PeerCertificateApprover({
    hub: hub as never,
    csrs: informer,
    namespace: 'gw-ns',
    serviceAccount: 'cluster-gateway',
    log: pino({ level: 'silent' }),
    now: () => now,
  });
  return { approver, calls };
}

test("approves a replica's CSR, denies another requester's with the reason (both through /approval)", async () => {
  const items = {
    good: await csr('good', 'system:serviceaccount:gw-ns:cluster-gateway'),
    forged: await csr('forged', 'system:serviceaccount:gw-ns:default'),
  };
  const { approver, calls } = setUp(items, Date.now());
  await approver.reconcile('good');
  await approver.reconcile('forged');
  await approver.reconcile('gone');
  assert.deepEqual(
    calls.map((c) => [c.method, c.path]),
    [
      ['PUT', `${csrs}/good/approval`],
      ['PUT', `${csrs}/forged/approval`],
    ],
  );
  const approved = calls[0]?.body?.status?.conditions?.at(-1);
  assert.equal(approved?.type, 'Approved');
  assert.equal(approved?.reason, peerApprovalReason);
  const denied = calls[1]?.body?.status?.conditions?.at(-1);
  assert.equal(denied?.type, 'Denied');
  assert.equal(denied?.reason, peerDenialReason);
  assert.match(denied?.message ?? '', /is not the gateway's ServiceAccount/);
});

test('removes finished CSRs: denied or failed after a minute, issued two minutes after approval; never before', async () => {
  const t0 = Date.parse('2026-01-01T00:00:00Z');
  const condition = (type: string) => ({ type, status: 'True', lastUpdateTime: '2026-01-01T00:00:00Z' });
  const items = {
    denied: await csr('denied', 'x', { conditions: [condition('Denied')] }),
    failed: await csr('failed', 'x', { conditions: [condition('Approved'), condition('Failed')] }),
    issued: await csr('issued', 'system:serviceaccount:gw-ns:cluster-gateway', {
      conditions: [condition('Approved')],
      certificate: 'Q0VSVA==',
    }),
    approved: await csr('approved', 'system:serviceaccount:gw-ns:cluster-gateway', {
      conditions: [condition('Approved')],
    }),
  };
  const early = setUp(items, t0 + 30_000);
  assert.deepEqual(await early.approver.reconcile('denied'), { requeueAfterMs: 30_000 });
  assert.deepEqual(await early.approver.reconcile('issued'), { requeueAfterMs: 90_000 });
  assert.equal(early.calls.length, 0, 'nothing removed or decided again yet');
  const later = setUp(items, t0 + 121_000);
  for (const name of Object.keys(items)) await later.approver.reconcile(name);
  assert.deepEqual(
    later.calls.map((c) => [c.method, c.path]),
    [
      ['DELETE', `${csrs}/denied`],
      ['DELETE', `${csrs}/failed`],
      ['DELETE', `${csrs}/issued`],
    ],
    'an approved CSR not yet issued stays (the signer has yet to write it)',
  );
});

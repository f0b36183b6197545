import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { certificateRequest } from '../../../e2e/support/csr.ts';
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { Informer, InformerHandlers } from '../../../shared/kube/informer.ts';
import { StatusError } from '../../../shared/kube/status.ts';
import type { ManagedClusterAddOn } from '../core/resources.ts';
import type { CertificateSigningRequest } from './csr-approval.ts';
import { approvalReason, CsrApprover } from './csr-approver.ts';
import { denialReason } from './csr-denial.ts';
import { addonAgentSubject } from './subject.ts';

const addonName = 'cluster-gateway';
const csrs = '/apis/certificates.k8s.io/v1/certificatesigningrequests';
type Call = { method: string; path: string; body?: unknown };

/** Records the hub calls; `forbidden` paths answer 403 (no approve verb on their signer). */
function fakeHub(forbidden: string[] = []) {
  const calls: Call[] = [];
  const hub = {
    request: async (method: string, path: string, options: { body?: unknown } = {}) => {
      calls.push({ method, path, body: options.body });
      if (forbidden.includes(path)) {
        throw new StatusError({
          kind: 'Status',
          apiVersion: 'v1',
          status: 'Failure',
          code: 403,
          reason: 'Forbidden',
          message: 'forbidden',
        } as ConstructorParameters<typeof StatusError>[0]);
      }
      return {};
    },
    delete: async (path: string) => {
      calls.push({ method: 'DELETE', path });
    },
  };
  return { hub: hub as unknown as KubeClient, calls };
}

/** A fake informer whose handlers the test can call. */
function informer<T extends { metadata?: { name?: string; namespace?: string } }>(items: Record<string, T>) {
  const handlers: InformerHandlers<T>[] = [];
  const fake = {
    get: (key: string) => items[key],
    list: () => Object.values(items),
    on: (h: InformerHandlers<T>) => {
      handlers.push(h);
      return () => {};
    },
    synced: Promise.resolve(),
  };
  return { informer: fake as unknown as Informer<T>, handlers };
}

async function csr(
  name: string,
  options: {
    cluster?: string;
    requesterCluster?: string;
    labels?: Record<string, string>;
    signer?: string;
    conditions?: { type: string; status: string; reason?: string }[];
  } = {},
): Promise<CertificateSigningRequest> {
  const cluster = options.cluster ?? 'cluster1';
  const requester = options.requesterCluster ?? cluster;
  const subject = addonAgentSubject(cluster, addonName);
  const { csr: pem } = await certificateRequest(subject.user, subject.groups);
  return {
    apiVersion: 'certificates.k8s.io/v1',
    kind: 'CertificateSigningRequest',
    metadata: {
      name,
      uid: `uid-${name}`,
      labels: options.labels ?? {
        'open-cluster-management.io/cluster-name': cluster,
        'open-cluster-management.io/addon-name': addonName,
      },
    },
    spec: {
      request: Buffer.from(pem).toString('base64'),
      signerName: options.signer ?? 'kubernetes.io/kube-apiserver-client',
      username: `system:open-cluster-management:${requester}:${requester}-agent`,
      groups: [`system:open-cluster-management:${requester}`, 'system:authenticated'],
      usages: ['digital signature', 'key encipherment', 'client auth'],
    },
    ...(options.conditions ? { status: { conditions: options.conditions } } : {}),
  };
}

const mca = (cluster: string) =>
  ({ metadata: { name: addonName, namespace: cluster, uid: `mca-${cluster}` } }) as ManagedClusterAddOn;

function setup(items: Record<string, CertificateSigningRequest>, forbidden: string[] = []) {
  const { hub, calls } = fakeHub(forbidden);
  const csrInformer = informer(items);
  const addons: Record<string, ManagedClusterAddOn> = {
    'cluster1/cluster-gateway': mca('cluster1'),
    'cluster2/cluster-gateway': mca('cluster2'),
  };
  const approver = new CsrApprover({
    hub,
    log: pino({ level: 'silent' }),
    addon: { name: addonName, registrationSubject: (c) => addonAgentSubject(c, addonName) },
    informers: {
      certificateSigningRequests: csrInformer.informer,
      managedClusterAddOns: informer(addons).informer,
    },
  });
  return { approver, calls, csrHandlers: csrInformer.handlers, addons };
}

type Condition = { type: string; status: string; reason: string; message: string };
const conditionsOf = (call: Call | undefined) =>
  (call?.body as { status?: { conditions?: Condition[] } } | undefined)?.status?.conditions ?? [];

test("a CSR with cluster2's labels from cluster1's agent is denied (why, via /approval), then deleted", async () => {
  const forged = await csr('forged', { cluster: 'cluster2', requesterCluster: 'cluster1' });
  const { approver, calls } = setup({ forged });
  await approver.reconcile('forged');
  assert.deepEqual(
    calls.map((c) => `${c.method} ${c.path}`),
    [`PUT ${csrs}/forged/approval`, `DELETE ${csrs}/forged`],
  );
  const [denied] = conditionsOf(calls[0]);
  assert.equal(denied?.type, 'Denied');
  assert.equal(denied?.status, 'True');
  assert.equal(denied?.reason, denialReason);
  assert.match(denied?.message ?? '', /requester "system:open-cluster-management:cluster1:cluster1-agent"/);
  assert.match(denied?.message ?? '', /only the registration agent of cluster cluster2/);
  assert.match(denied?.message ?? '', /deleted/);
  // This CSR, not a later one of the same name.
  assert.deepEqual((calls[1]?.body as { preconditions?: unknown } | undefined)?.preconditions, {
    uid: 'uid-forged',
  });
});

test('the genuine CSR is approved as before, and not deleted', async () => {
  const genuine = await csr('genuine', { cluster: 'cluster2' });
  const { approver, calls } = setup({ genuine });
  await approver.reconcile('genuine');
  assert.deepEqual(
    calls.map((c) => `${c.method} ${c.path}`),
    [`PUT ${csrs}/genuine/approval`],
  );
  const [approved] = conditionsOf(calls[0]);
  assert.deepEqual([approved?.type, approved?.reason], ['Approved', approvalReason]);
});

test("a CSR of this addon denied or failed by anyone else is deleted; an approved one isn't", async () => {
  const items = {
    denied: await csr('denied', { conditions: [{ type: 'Denied', status: 'True', reason: 'ByAHuman' }] }),
    failed: await csr('failed', {
      conditions: [
        { type: 'Approved', status: 'True' },
        { type: 'Failed', status: 'True' },
      ],
    }),
    approved: await csr('approved', { conditions: [{ type: 'Approved', status: 'True', reason: 'Other' }] }),
  };
  const { approver, calls } = setup(items);
  for (const name of Object.keys(items)) await approver.reconcile(name);
  assert.deepEqual(
    calls.map((c) => `${c.method} ${c.path}`),
    [`DELETE ${csrs}/denied`, `DELETE ${csrs}/failed`],
  );
});

test('a CSR with another signer is deleted even when the manager may not deny it (403)', async () => {
  const other = await csr('other-signer', { signer: 'example.com/signer' });
  const { approver, calls } = setup({ 'other-signer': other }, [`${csrs}/other-signer/approval`]);
  await approver.reconcile('other-signer');
  assert.deepEqual(
    calls.map((c) => `${c.method} ${c.path}`),
    [`PUT ${csrs}/other-signer/approval`, `DELETE ${csrs}/other-signer`],
  );
});

test('CSRs without this addon label (gateway peers, other addons) are never approved, denied or deleted', async () => {
  const items = {
    peer: await csr('peer', {
      requesterCluster: 'cluster2',
      labels: { 'cluster.core.oam.dev/gateway-peer': 'true' },
    }),
    peerDenied: await csr('peerDenied', {
      labels: { 'cluster.core.oam.dev/gateway-peer': 'true' },
      conditions: [{ type: 'Denied', status: 'True' }],
    }),
    otherAddon: await csr('otherAddon', {
      requesterCluster: 'cluster2',
      labels: {
        'open-cluster-management.io/cluster-name': 'cluster1',
        'open-cluster-management.io/addon-name': 'other',
      },
    }),
  };
  const { approver, calls, csrHandlers } = setup(items);
  for (const name of Object.keys(items)) await approver.reconcile(name);
  assert.deepEqual(calls, []);
  // Nor are they enqueued by their events.
  const enqueued: string[] = [];
  approver.controller.enqueue = (keys) => {
    if (typeof keys === 'string') enqueued.push(keys);
  };
  // Started only for its event handlers, stopped at once (nothing is synced or worked on).
  const stop = new AbortController();
  approver.controller.start(stop.signal);
  stop.abort();
  for (const item of Object.values(items)) for (const h of csrHandlers) h.onAdd?.(item);
  assert.deepEqual(enqueued, []);
});

test('a right request for a cluster without the addon (yet) waits: neither denied nor deleted', async () => {
  const early = await csr('early', { cluster: 'cluster3' });
  const { approver, calls } = setup({ early });
  await approver.reconcile('early');
  assert.deepEqual(calls, []);
});

test('events enqueue the CSRs to judge and the denied ones, not the approved', async () => {
  const items = {
    pending: await csr('pending'),
    denied: await csr('denied', { conditions: [{ type: 'Denied', status: 'True' }] }),
    approved: await csr('approved', { conditions: [{ type: 'Approved', status: 'True' }] }),
  };
  const { approver, csrHandlers } = setup(items);
  const enqueued: string[] = [];
  approver.controller.enqueue = (keys) => {
    if (typeof keys === 'string') enqueued.push(keys);
    else if (keys) enqueued.push(...keys);
  };
  // Started only for its event handlers, stopped at once (nothing is synced or worked on).
  const stop = new AbortController();
  approver.controller.start(stop.signal);
  stop.abort();
  for (const item of Object.values(items)) for (const h of csrHandlers) h.onUpdate?.(item, item);
  assert.deepEqual(enqueued, ['pending', 'denied']);
});

test('disabling the addon still deletes the CSRs approved by us for it, and only those', async () => {
  const items = {
    ours: await csr('ours', { conditions: [{ type: 'Approved', status: 'True', reason: approvalReason }] }),
    theirs: await csr('theirs', { conditions: [{ type: 'Approved', status: 'True', reason: 'Other' }] }),
  };
  const { approver, calls, addons } = setup(items);
  delete addons['cluster1/cluster-gateway'];
  await approver.cleanup('cluster1');
  assert.deepEqual(
    calls.map((c) => `${c.method} ${c.path}`),
    [`DELETE ${csrs}/ours`],
  );
});

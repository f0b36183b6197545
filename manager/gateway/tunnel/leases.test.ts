import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeClient } from '../../../shared/kube/client.ts';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import {
  type Lease,
  LeaseHolder,
  LeaseReader,
  leaseAcquiredRevisionAnnotation,
  leaseName,
  leasesPath,
  microTime,
  readTunnelLease,
  type TunnelHolder,
  tunnelLease,
  tunnelLeaseRecord,
} from './leases.ts';

const ns = 'cluster-gateway-system';
const holderA: TunnelHolder = {
  cluster: 'c1',
  replica: 'gw-a',
  address: '10.0.0.1:9444',
  durationSeconds: 10,
};

test('Lease names: the cluster after a prefix, hashed when that would be too long', () => {
  assert.equal(leaseName('cluster1'), 'cluster-gateway-tunnel-cluster1');
  const long = leaseName('a'.repeat(253));
  assert.ok(long.length <= 253);
  assert.match(long, /^cluster-gateway-tunnel-a+-[0-9a-f]{16}$/);
  assert.notEqual(long, leaseName(`${'a'.repeat(252)}b`), 'different clusters, different names');
});

test('MicroTime has six fractional digits', () => {
  assert.equal(microTime(new Date('2026-01-02T03:04:05.678Z')), '2026-01-02T03:04:05.678000Z');
});

test('a Lease written and read back; taking it over counts a transition, renewing does not', () => {
  const now = new Date('2026-01-02T03:04:05Z');
  const lease = tunnelLease(ns, holderA, now);
  assert.equal(lease.metadata?.name, 'cluster-gateway-tunnel-c1');
  assert.equal(lease.spec?.holderIdentity, 'gw-a');
  assert.equal(lease.spec?.leaseTransitions, 0);
  assert.deepEqual(readTunnelLease(lease), { ...holderA, acquiredAt: now });
  const renewed = tunnelLease(ns, holderA, new Date(+now + 3000), {
    ...lease,
    metadata: { ...lease.metadata, resourceVersion: '7' },
  });
  assert.equal(renewed.spec?.acquireTime, lease.spec?.acquireTime);
  assert.equal(renewed.spec?.leaseTransitions, 0);
  assert.equal(renewed.metadata?.resourceVersion, '7', 'an update names the version it replaces');
  const taken = tunnelLease(
    ns,
    { ...holderA, replica: 'gw-b', address: '10.0.0.2:9444' },
    new Date(+now + 4000),
    renewed,
  );
  assert.equal(taken.spec?.leaseTransitions, 1);
  assert.equal(readTunnelLease(taken)?.replica, 'gw-b');
});

test('a Lease that does not say who and where, or is named for another cluster, routes nothing', () => {
  const lease = tunnelLease(ns, holderA, new Date());
  assert.equal(readTunnelLease({ ...lease, spec: { ...lease.spec, holderIdentity: '' } }), undefined);
  assert.equal(readTunnelLease({ ...lease, metadata: { ...lease.metadata, annotations: {} } }), undefined);
  assert.equal(
    readTunnelLease({ ...lease, metadata: { ...lease.metadata, name: 'cluster-gateway-tunnel-other' } }),
    undefined,
  );
});

/** An apiserver's Lease store: resourceVersions, 409 on a stale update, delete preconditions. */
function fakeApiserver() {
  const store = new Map<string, Lease>();
  let version = 0;
  const calls: string[] = [];
  const client = {
    async request<T>(method: string, path: string, options: { body?: unknown } = {}): Promise<T> {
      calls.push(`${method} ${path}`);
      const body = options.body as Lease & { preconditions?: { resourceVersion?: string } };
      if (method === 'POST') {
        const name = body.metadata?.name ?? '';
        const key = `${path}/${name}`;
        if (store.has(key)) throw new StatusError(failureStatus(409, 'exists'));
        store.set(key, { ...body, metadata: { ...body.metadata, resourceVersion: String(++version) } });
        return store.get(key) as T;
      }
      const current = store.get(path);
      if (!current) throw new StatusError(failureStatus(404, 'not found'));
      if (method === 'GET') return structuredClone(current) as T;
      if (method === 'PUT') {
        if (body.metadata?.resourceVersion !== current.metadata?.resourceVersion)
          throw new StatusError(failureStatus(409, 'conflict'));
        store.set(path, { ...body, metadata: { ...body.metadata, resourceVersion: String(++version) } });
        return store.get(path) as T;
      }
      if (method === 'DELETE') {
        const want = body?.preconditions?.resourceVersion;
        if (want && want !== current.metadata?.resourceVersion)
          throw new StatusError(failureStatus(409, 'precondition'));
        store.delete(path);
        return undefined as T;
      }
      throw new Error(method);
    },
  };
  return { client, store, calls };
}

const settle = () => new Promise((r) => setTimeout(r, 20));
const pathOf = (cluster: string) => `${leasesPath(ns)}/${leaseName(cluster)}`;

test("the holder writes a Lease per tunnel, takes over another replica's, and releases only its own", async () => {
  const api = fakeApiserver();
  const a = new LeaseHolder({
    client: api.client,
    namespace: ns,
    replica: 'gw-a',
    address: 'a:1',
    durationSeconds: 10,
  });
  const b = new LeaseHolder({
    client: api.client,
    namespace: ns,
    replica: 'gw-b',
    address: 'b:1',
    durationSeconds: 10,
  });
  a.hold('c1', new Date());
  await settle();
  assert.equal(api.store.get(pathOf('c1'))?.spec?.holderIdentity, 'gw-a');
  // The agent moved to b: b takes the Lease over; a's late release must not delete b's.
  b.hold('c1', new Date());
  await settle();
  a.release('c1');
  await settle();
  const lease = api.store.get(pathOf('c1'));
  assert.equal(lease?.spec?.holderIdentity, 'gw-b');
  assert.equal(lease?.metadata?.annotations?.['cluster.core.oam.dev/tunnel-peer-address'], 'b:1');
  assert.equal(lease?.spec?.leaseTransitions, 1);
  await b.stop();
  const released = api.store.get(pathOf('c1'));
  assert.equal(released?.spec?.holderIdentity, undefined, 'released on stop: no holder');
  assert.equal(readTunnelLease(released as Lease), undefined, 'a released Lease routes nothing');
  assert.ok(!api.calls.some((c) => c.startsWith('DELETE')), 'releasing needs no delete permission');
});

test('a renewal never takes the Lease back from the replica the agent moved to', async () => {
  const api = fakeApiserver();
  const options = { client: api.client, namespace: ns, durationSeconds: 3 };
  const a = new LeaseHolder({ ...options, replica: 'gw-a', address: 'a:1' });
  const b = new LeaseHolder({ ...options, replica: 'gw-b', address: 'b:1' });
  a.hold('c1', new Date());
  await settle();
  // The agent moved to b while a has not noticed its tunnel died: a keeps renewing (every 1 s).
  b.hold('c1', new Date());
  await settle();
  a.start();
  await new Promise((r) => setTimeout(r, 1_100));
  assert.equal(api.store.get(pathOf('c1'))?.spec?.holderIdentity, 'gw-b', "a's renewal left b's Lease alone");
  // a notices at last: its release leaves b as the holder.
  a.release('c1');
  await settle();
  assert.equal(api.store.get(pathOf('c1'))?.spec?.holderIdentity, 'gw-b');
  // A new tunnel on a (the agent came back) takes it over again.
  a.hold('c1', new Date());
  await settle();
  assert.equal(api.store.get(pathOf('c1'))?.spec?.holderIdentity, 'gw-a');
  await a.stop();
  await b.stop();
});

test('a hold and a release in quick succession end released (writes are ordered per cluster)', async () => {
  const api = fakeApiserver();
  const a = new LeaseHolder({
    client: api.client,
    namespace: ns,
    replica: 'gw-a',
    address: 'a:1',
    durationSeconds: 10,
  });
  a.hold('c1', new Date());
  a.release('c1');
  await settle();
  assert.equal(api.store.get(pathOf('c1'))?.spec?.holderIdentity, undefined);
  assert.deepEqual(a.held, []);
});

test("the reader reports other replicas' live Leases, ignores its own, and expires unrenewed ones", () => {
  let now = 1_000_000;
  const changes: [string, string | undefined][] = [];
  const reader = new LeaseReader({
    client: {} as KubeClient,
    namespace: ns,
    replica: 'gw-b',
    onChange: (cluster, holder) => changes.push([cluster, holder?.replica]),
    now: () => now,
  });
  reader.observe(tunnelLease(ns, holderA, new Date()));
  reader.observe(tunnelLease(ns, { ...holderA, cluster: 'mine', replica: 'gw-b' }, new Date()));
  assert.equal(reader.get('c1')?.address, '10.0.0.1:9444');
  assert.equal(reader.get('mine'), undefined, 'its own Leases are not forwarded to');
  // A renewal seen at +8 s keeps it live past the first 10 s; nothing seen for 10 s more: gone.
  now += 8_000;
  reader.observe(tunnelLease(ns, holderA, new Date()));
  now += 9_000;
  reader.sweep();
  assert.ok(reader.get('c1'));
  now += 1_000;
  assert.equal(reader.get('c1'), undefined, 'expired even before the sweep');
  reader.sweep();
  // Taken over by this replica: the other's entry goes; deleted Leases go at once.
  reader.observe(tunnelLease(ns, holderA, new Date()));
  reader.observe(tunnelLease(ns, { ...holderA, replica: 'gw-b' }, new Date()));
  assert.equal(reader.get('c1'), undefined);
  reader.observe(tunnelLease(ns, holderA, new Date()));
  reader.forget(tunnelLease(ns, holderA, new Date()));
  assert.equal(reader.get('c1'), undefined);
  assert.deepEqual(changes, [
    ['c1', 'gw-a'],
    ['c1', undefined],
    ['c1', 'gw-a'],
    ['c1', undefined],
    ['c1', 'gw-a'],
    ['c1', undefined],
  ]);
});

test('what a tunnel Lease shows is the same for every reader: the holder, at the revision that took it, not at its renewals', async () => {
  const api = fakeApiserver();
  const a = new LeaseHolder({
    client: api.client,
    namespace: ns,
    replica: 'gw-a',
    address: 'a:1',
    durationSeconds: 3,
  });
  a.hold('c1', new Date('2026-03-01T00:00:00.700Z'));
  await settle();
  const taken = api.store.get(pathOf('c1')) as Lease;
  const takenAt = Number(taken.metadata?.resourceVersion);
  assert.deepEqual(tunnelLeaseRecord(taken), {
    cluster: 'c1',
    holder: { replica: 'gw-a', since: '2026-03-01T00:00:00Z' },
    version: takenAt,
  });
  a.start(); // renews every second (a third of 3 s)
  await new Promise((r) => setTimeout(r, 2_300));
  const renewed = api.store.get(pathOf('c1')) as Lease;
  assert.ok(Number(renewed.metadata?.resourceVersion) > takenAt, 'renewed');
  assert.equal(renewed.metadata?.annotations?.[leaseAcquiredRevisionAnnotation], String(takenAt));
  assert.equal(tunnelLeaseRecord(renewed)?.version, takenAt, 'a renewal changes nothing shown');

  // Another replica takes it: the recorded revision is the old holder's, void; the new take is the version.
  const b = new LeaseHolder({
    client: api.client,
    namespace: ns,
    replica: 'gw-b',
    address: 'b:1',
    durationSeconds: 3,
  });
  b.hold('c1', new Date());
  await settle();
  const moved = api.store.get(pathOf('c1')) as Lease;
  assert.equal(moved.metadata?.annotations?.[leaseAcquiredRevisionAnnotation], undefined);
  assert.equal(tunnelLeaseRecord(moved)?.version, Number(moved.metadata?.resourceVersion));
  assert.equal(tunnelLeaseRecord(moved)?.holder?.replica, 'gw-b');
  await a.stop();
  await b.stop();
  const released = api.store.get(pathOf('c1')) as Lease;
  assert.deepEqual(tunnelLeaseRecord(released), {
    cluster: 'c1',
    version: Number(released.metadata?.resourceVersion),
  });

  // A recorded revision above the Lease's own cannot be true (a forged annotation): the Lease's own counts.
  const forged = structuredClone(renewed);
  forged.metadata = {
    ...forged.metadata,
    annotations: { ...forged.metadata?.annotations, [leaseAcquiredRevisionAnnotation]: '99999' },
  };
  assert.equal(tunnelLeaseRecord(forged)?.version, Number(renewed.metadata?.resourceVersion));
  const otherName = structuredClone(taken);
  otherName.metadata = { ...otherName.metadata, name: leaseName('c2') };
  assert.equal(tunnelLeaseRecord(otherName), undefined, 'named for another cluster: not a record of c1');
});

test('the reader records every tunnel Lease (its own too) and clears the holder of one not renewed in time', () => {
  let now = 1_000_000;
  const records: string[] = [];
  const cleared: string[] = [];
  const reader = new LeaseReader({
    client: {} as KubeClient,
    namespace: ns,
    replica: 'gw-b',
    onChange: () => {},
    onRecord: (cluster, holder, version) => records.push(`${cluster} ${holder?.replica ?? '-'} ${version}`),
    clearExpired: async (lease) =>
      void cleared.push(`${lease.metadata?.name} ${lease.metadata?.resourceVersion}`),
    now: () => now,
  });
  const at = (lease: Lease, rv: string): Lease => ({
    ...lease,
    metadata: { ...lease.metadata, resourceVersion: rv },
  });
  reader.observe(at(tunnelLease(ns, holderA, new Date()), '5'));
  reader.observe(at(tunnelLease(ns, { ...holderA, cluster: 'mine', replica: 'gw-b' }, new Date()), '6'));
  now += 11_000;
  reader.sweep();
  assert.deepEqual(records, ['c1 gw-a 5', 'mine gw-b 6']);
  assert.deepEqual(cleared, ['cluster-gateway-tunnel-c1 5'], "only the other replica's, at the version seen");
});

test('a Lease whose cluster is not a DNS-1123 subdomain is no tunnel Lease, even under the name derived from it', () => {
  const hostile = `/../../x\n"><svg onload=1>\u202e${'a'.repeat(240)}`;
  const lease = tunnelLease(ns, { ...holderA, cluster: hostile }, new Date());
  assert.equal(lease.metadata?.name, leaseName(hostile), 'the hashed name a forger would use');
  assert.equal(readTunnelLease(lease), undefined);
  assert.equal(tunnelLeaseRecord(lease), undefined);
  const long = 'a'.repeat(253);
  assert.equal(readTunnelLease(tunnelLease(ns, { ...holderA, cluster: long }, new Date()))?.cluster, long);
});

test("another replica's Lease routes and shows connected only once its holder proved who it is, in event order", async () => {
  const proofs = new Map<string, (ok: boolean) => void>();
  const asked: string[] = [];
  const events: string[] = [];
  const reader = new LeaseReader({
    client: {} as KubeClient,
    namespace: ns,
    replica: 'gw-b',
    onChange: (cluster, holder) => events.push(`route ${cluster} ${holder?.replica ?? '-'}`),
    onRecord: (cluster, holder, version) =>
      events.push(`record ${cluster} ${holder?.replica ?? '-'} ${version}`),
    onSync: (rv) => events.push(`sync ${rv}`),
    verifyHolder: (holder) => {
      asked.push(`${holder.replica}@${holder.address}`);
      return new Promise((resolve) => proofs.set(holder.replica, resolve));
    },
  });
  const at = (lease: Lease, rv: string): Lease => ({
    ...lease,
    metadata: { ...lease.metadata, resourceVersion: rv },
  });
  const forged = at(tunnelLease(ns, { ...holderA, replica: 'evil', address: '10.9.9.9:1' }, new Date()), '7');
  const real = at(tunnelLease(ns, { ...holderA, cluster: 'c2' }, new Date()), '8');
  reader.receive({ type: 'seen', lease: forged });
  reader.receive({ type: 'seen', lease: real });
  assert.deepEqual(events, [], 'nothing applied before the proofs');
  assert.deepEqual(asked, ['evil@10.9.9.9:1']);
  proofs.get('evil')?.(false);
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(asked, ['evil@10.9.9.9:1', 'gw-a@10.0.0.1:9444'], 'asked in turn');
  proofs.get('gw-a')?.(true);
  await reader.settled();
  assert.deepEqual(events, ['record c1 - 7', 'record c2 gw-a 8', 'route c2 gw-a']);
  assert.equal(reader.get('c1'), undefined, 'the unproven holder gets no request');
  assert.equal(reader.get('c2')?.replica, 'gw-a');
  // A renewal of a proven holder applies at once, without asking again.
  reader.observe(at(tunnelLease(ns, { ...holderA, cluster: 'c2' }, new Date()), '9'));
  assert.equal(asked.length, 2);
  assert.equal(events.at(-1), 'record c2 gw-a 9');
});

test('the informer events are applied in order: a version is synced only after the records before it', async () => {
  let prove: (ok: boolean) => void = () => {};
  const events: string[] = [];
  const reader = new LeaseReader({
    client: {} as KubeClient,
    namespace: ns,
    replica: 'gw-b',
    onChange: () => {},
    onRecord: (cluster, holder, version) =>
      events.push(`record ${cluster} ${holder?.replica ?? '-'} ${version}`),
    onSync: (rv) => events.push(`sync ${rv}`),
    verifyHolder: () => new Promise((resolve) => (prove = resolve)),
  });
  const at = (lease: Lease, rv: string): Lease => ({
    ...lease,
    metadata: { ...lease.metadata, resourceVersion: rv },
  });
  reader.receive({ type: 'seen', lease: at(tunnelLease(ns, holderA, new Date()), '12') });
  reader.receive({ type: 'synced', resourceVersion: '12' });
  const mine = tunnelLease(ns, { ...holderA, cluster: 'mine', replica: 'gw-b' }, new Date());
  reader.receive({ type: 'seen', lease: at(mine, '13') });
  assert.deepEqual(events, [], 'the sync and a later Lease wait for the proof');
  prove(true);
  await reader.settled();
  assert.deepEqual(events, ['record c1 gw-a 12', 'sync 12', 'record mine gw-b 13']);
});

test('a holder whose renewal finds another holder lets the tunnel go and says so', async () => {
  const api = fakeApiserver();
  const lost: string[] = [];
  const a = new LeaseHolder({
    client: api.client,
    namespace: ns,
    replica: 'gw-a',
    address: 'a:1',
    durationSeconds: 3,
    onLost: (cluster, holder) => lost.push(`${cluster} ${holder}`),
  });
  a.hold('c1', new Date());
  await settle();
  // Someone else's write (another replica, or a forged update) names another holder.
  const current = api.store.get(pathOf('c1')) as Lease;
  api.store.set(pathOf('c1'), {
    ...current,
    metadata: {
      ...current.metadata,
      resourceVersion: String(Number(current.metadata?.resourceVersion) + 100),
    },
    spec: { ...current.spec, holderIdentity: 'evil' },
  });
  a.start();
  await new Promise((r) => setTimeout(r, 1_200));
  assert.deepEqual(lost, ['c1 evil']);
  assert.deepEqual(a.held, [], 'no longer believes it holds the tunnel');
  assert.equal(api.store.get(pathOf('c1'))?.spec?.holderIdentity, 'evil', 'and does not fight over it');
  // The agent's next connection takes it back.
  a.hold('c1', new Date());
  await settle();
  assert.equal(api.store.get(pathOf('c1'))?.spec?.holderIdentity, 'gw-a');
  await a.stop();
});

test('synced once the first list is applied, its holders proven; a later Lease waiting for a proof does not undo it', async () => {
  const proofs: ((ok: boolean) => void)[] = [];
  const reader = new LeaseReader({
    client: {} as KubeClient,
    namespace: ns,
    replica: 'gw-b',
    onChange: () => {},
    verifyHolder: () => new Promise((resolve) => proofs.push(resolve)),
  });
  assert.equal(reader.synced, false, 'nothing listed yet');
  // The first list: another replica's Lease, this replica's own, then the list's end.
  reader.receive({ type: 'seen', lease: tunnelLease(ns, holderA, new Date()) });
  reader.receive({
    type: 'seen',
    lease: tunnelLease(ns, { ...holderA, cluster: 'mine', replica: 'gw-b' }, new Date()),
  });
  reader.receive({ type: 'synced', resourceVersion: '5' });
  assert.equal(reader.synced, false, "listed, but gw-a's proof is still out");
  assert.equal(reader.get('c1'), undefined);
  proofs[0]?.(true);
  await reader.settled();
  assert.equal(reader.synced, true);
  assert.equal(reader.get('c1')?.replica, 'gw-a', 'synced means routed');
  // After the first list, Leases come and go: a new holder's pending proof keeps nothing unready.
  reader.receive({
    type: 'seen',
    lease: tunnelLease(ns, { ...holderA, cluster: 'c2', replica: 'gw-c' }, new Date()),
  });
  reader.receive({ type: 'synced', resourceVersion: '6' });
  assert.equal(reader.synced, true);
  proofs[1]?.(false);
  await reader.settled();
});

test('synced at once on a first list with no other replica holding anything, and with a refused proof once refused', async () => {
  const empty = new LeaseReader({
    client: {} as KubeClient,
    namespace: ns,
    replica: 'gw-b',
    onChange: () => {},
  });
  empty.receive({ type: 'synced', resourceVersion: '3' });
  assert.equal(empty.synced, true);
  let refuse: (ok: boolean) => void = () => {};
  const reader = new LeaseReader({
    client: {} as KubeClient,
    namespace: ns,
    replica: 'gw-b',
    onChange: () => {},
    verifyHolder: () => new Promise((resolve) => (refuse = resolve)),
  });
  reader.receive({ type: 'seen', lease: tunnelLease(ns, { ...holderA, replica: 'evil' }, new Date()) });
  reader.receive({ type: 'synced', resourceVersion: '4' });
  assert.equal(reader.synced, false);
  refuse(false);
  await reader.settled();
  assert.equal(reader.synced, true, 'a refused proof is an answer: applied as no holder');
  assert.equal(reader.get('c1'), undefined);
});

test('a proof that never settles keeps the reader unsynced for syncWithinMs after the first list, no longer', () => {
  let now = 1_000_000;
  const reader = new LeaseReader({
    client: {} as KubeClient,
    namespace: ns,
    replica: 'gw-b',
    onChange: () => {},
    verifyHolder: () => new Promise(() => {}),
    syncWithinMs: 15_000,
    now: () => now,
  });
  now += 60_000;
  assert.equal(reader.synced, false, 'the bound counts from the first list, not from start');
  reader.receive({ type: 'seen', lease: tunnelLease(ns, holderA, new Date()) });
  reader.receive({ type: 'synced', resourceVersion: '9' });
  now += 14_999;
  assert.equal(reader.synced, false);
  // A later list end (a relist, a bookmark) does not move the bound.
  reader.receive({ type: 'synced', resourceVersion: '10' });
  now += 1;
  assert.equal(reader.synced, true, 'ready after the bound, without the hung holder');
  assert.equal(reader.get('c1'), undefined);
});

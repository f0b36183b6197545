import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ClusterEvent, TunnelEndpoint } from './cluster.ts';
import { parseManagedCluster } from './managedcluster-source.ts';
import { ClusterRegistry } from './registry.ts';
import { parseClusterSecret } from './secret-source.ts';
import { managedCluster, secret } from './test-fixtures.ts';

const clock = () => {
  let now = 1_700_000_000_000;
  return { now: () => now, advance: (ms: number) => (now += ms) };
};

const tokenSecret = (name: string, token = 'tok', endpoint = 'https://h') =>
  parseClusterSecret(secret(name, { token, endpoint }));

const tunnel = (): TunnelEndpoint => ({
  type: 'ClusterProxy',
  serverName: 'kubernetes.default.svc',
  insecure: false,
  dial: async () => {
    throw new Error('unused');
  },
});

function record(registry: ClusterRegistry) {
  const events: string[] = [];
  registry.subscribe((e: ClusterEvent) => events.push(`${e.type} ${e.cluster.name}`));
  return events;
}

test('emits ADDED, MODIFIED only on visible change, and DELETED with a new resourceVersion', () => {
  const { now } = clock();
  const registry = new ClusterRegistry({ now });
  const events = record(registry);
  const start = registry.version;
  assert.equal(start, String(1_700_000_000_000 * 1000));

  registry.setSecret('a', tokenSecret('a'));
  const rv1 = registry.get('a')?.resourceVersion;
  assert.equal(registry.version, rv1);
  assert.ok(Number(rv1) > Number(start));

  registry.setSecret('a', tokenSecret('a')); // same content, e.g. a resync
  assert.equal(registry.get('a')?.resourceVersion, rv1);

  registry.setSecret('a', tokenSecret('a', 'rotated')); // invisible in the API, but the proxy must notice
  const rv2 = registry.get('a')?.resourceVersion;
  assert.ok(Number(rv2) > Number(rv1));

  registry.setSecret('a', undefined);
  assert.equal(registry.get('a'), undefined);
  assert.deepEqual(events, ['ADDED a', 'MODIFIED a', 'DELETED a']);
  assert.ok(Number(registry.version) > Number(rv2));
});

test('merges Secrets and ManagedClusters by name; a ManagedCluster alone is not listed', () => {
  const registry = new ClusterRegistry({ now: clock().now });
  registry.setManagedCluster(
    'm',
    parseManagedCluster(managedCluster('m', { url: 'https://m', available: 'True' })),
  );
  assert.deepEqual(registry.list(), []);
  registry.setSecret('m', parseClusterSecret(secret('m', { token: 't' })));
  registry.setSecret('b', tokenSecret('b'));
  assert.deepEqual(
    registry.list().map((c) => c.name),
    ['b', 'm'],
  );
  const m = registry.get('m');
  assert.equal(m?.endpoint?.type === 'Const' && m.endpoint.address, 'https://m');
  assert.equal(m?.health.healthy, true);
  registry.setManagedCluster('m', undefined);
  assert.equal(registry.get('m')?.problem, 'data key endpoint is missing');
});

test('a ManagedCluster status change that is invisible after parsing emits nothing', () => {
  const registry = new ClusterRegistry({ now: clock().now });
  registry.setSecret('m', tokenSecret('m'));
  const events = record(registry);
  const mc = parseManagedCluster(managedCluster('m', { url: 'https://m', available: 'True' }));
  registry.setManagedCluster('m', mc);
  registry.setManagedCluster('m', { ...mc });
  assert.deepEqual(events, ['MODIFIED m']);
});

test('tunnels are the endpoint of a ClusterProxy cluster; each new tunnel changes connectionKey', () => {
  const registry = new ClusterRegistry({ now: clock().now });
  registry.setSecret(
    'a',
    parseClusterSecret(
      secret(
        'a',
        { token: 'tok' },
        {
          'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken',
          'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy',
        },
      ),
    ),
  );
  const direct = registry.get('a');
  const first = tunnel();
  registry.setTunnel('a', first);
  const viaTunnel = registry.get('a');
  assert.equal(viaTunnel?.endpoint?.type, 'ClusterProxy');
  assert.equal(direct?.endpoint, undefined);
  assert.notEqual(viaTunnel?.connectionKey, direct?.connectionKey);
  registry.setTunnel('a', first); // same tunnel again: nothing changes
  assert.equal(registry.get('a')?.resourceVersion, viaTunnel?.resourceVersion);
  registry.setTunnel('a', tunnel());
  assert.notEqual(registry.get('a')?.connectionKey, viaTunnel?.connectionKey);
  registry.setTunnel('a', undefined);
  assert.equal(registry.get('a')?.connectionKey, direct?.connectionKey);

  registry.setTunnel('agent-only', tunnel(), {
    connectedAt: new Date('2026-03-01T00:00:00.400Z'),
    replica: 'gw-1',
  });
  assert.equal(registry.get('agent-only')?.problem, undefined);
  assert.deepEqual(registry.get('agent-only')?.tunnel, {
    connected: true,
    since: '2026-03-01T00:00:00Z',
    replica: 'gw-1',
  });
  registry.setTunnel('agent-only', undefined);
  assert.equal(registry.get('agent-only'), undefined);
});

test('setHealth overlays and clears', () => {
  const registry = new ClusterRegistry({ now: clock().now });
  // Before the cluster exists (a probe that ended after its deletion): dropped, nothing kept for it.
  registry.setHealth('a', { healthy: true, reason: 'probed' });
  registry.setSecret('a', tokenSecret('a'));
  assert.deepEqual(registry.get('a')?.health, { healthy: false });
  registry.setHealth('a', { healthy: true, reason: 'probed' });
  assert.deepEqual(registry.get('a')?.health, { healthy: true, reason: 'probed' });
  registry.setHealth('a', undefined);
  assert.deepEqual(registry.get('a')?.health, { healthy: false });
});

test('eventsSince serves resumable watches and refuses too-old versions', () => {
  const registry = new ClusterRegistry({ now: clock().now, historyLimit: 3 });
  const listVersion = registry.version;
  registry.setSecret('a', tokenSecret('a'));
  registry.setSecret('b', tokenSecret('b'));
  assert.deepEqual(
    registry.eventsSince(listVersion)?.map((e) => `${e.type} ${e.cluster.name}`),
    ['ADDED a', 'ADDED b'],
  );
  const afterB = registry.version;
  registry.setSecret('a', undefined);
  assert.deepEqual(
    registry.eventsSince(afterB)?.map((e) => `${e.type} ${e.cluster.name}`),
    ['DELETED a'],
  );
  assert.deepEqual(registry.eventsSince(registry.version), []);
  assert.deepEqual(registry.eventsSince(String(Number(registry.version) + 99)), []);
  assert.equal(registry.eventsSince('123'), undefined);
  assert.equal(registry.eventsSince('abc'), undefined);
  registry.setSecret('c', tokenSecret('c')); // pushes 'ADDED a' out of the history
  assert.equal(registry.eventsSince(listVersion), undefined);
  assert.equal(registry.eventsSince(afterB)?.length, 2);
});

test('versions never go backwards and track the clock across restarts', () => {
  const c = clock();
  const first = new ClusterRegistry({ now: c.now });
  first.setSecret('a', tokenSecret('a'));
  c.advance(5);
  const second = new ClusterRegistry({ now: c.now });
  assert.ok(Number(second.version) > Number(first.version));
  assert.equal(
    second.eventsSince(first.version),
    undefined,
    'a restarted replica makes older watches relist',
  );
});

test('synced waits for every source; a throwing listener does not break others', () => {
  const errors: unknown[] = [];
  const registry = new ClusterRegistry({ now: clock().now, onListenerError: (e) => errors.push(e) });
  assert.equal(registry.synced, true);
  const source = { hasSynced: false };
  registry.addSource(source);
  assert.equal(registry.synced, false);
  source.hasSynced = true;
  assert.equal(registry.synced, true);
  registry.subscribe(() => {
    throw new Error('boom');
  });
  const events = record(registry);
  registry.setSecret('a', tokenSecret('a'));
  assert.deepEqual(events, ['ADDED a']);
  assert.equal(errors.length, 1);
});

test('the merge policy (--insecure-skip-tls-verify-when-no-ca) reaches every cluster', () => {
  const strict = new ClusterRegistry();
  strict.setSecret('a', tokenSecret('a'));
  assert.equal(strict.get('a')?.endpoint?.insecure, false);
  const lenient = new ClusterRegistry({ policy: { insecureSkipTlsVerifyWhenNoCa: true } });
  lenient.setSecret('a', tokenSecret('a'));
  assert.equal(lenient.get('a')?.endpoint?.insecure, true);
});

test('a ManagedCluster that becomes trusted (accepted, then joined) changes the cluster', () => {
  const registry = new ClusterRegistry();
  const events = record(registry);
  registry.setSecret('a', parseClusterSecret(secret('a', { token: 't' })));
  registry.setManagedCluster(
    'a',
    parseManagedCluster(managedCluster('a', { url: 'https://m', hubAcceptsClient: false })),
  );
  assert.equal(registry.get('a')?.endpoint, undefined);
  assert.match(registry.get('a')?.problem ?? '', /not accepted by the hub/);
  registry.setManagedCluster(
    'a',
    parseManagedCluster(managedCluster('a', { url: 'https://m', joined: 'Unknown' })),
  );
  assert.match(registry.get('a')?.problem ?? '', /has not joined/);
  registry.setManagedCluster('a', parseManagedCluster(managedCluster('a', { url: 'https://m' })));
  assert.deepEqual(registry.get('a')?.endpoint, { type: 'Const', address: 'https://m', insecure: false });
  assert.deepEqual(events, ['ADDED a', 'MODIFIED a', 'MODIFIED a', 'MODIFIED a']);
});

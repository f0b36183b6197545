import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ClusterEvent, TunnelEndpoint } from './cluster.ts';
import { parseManagedCluster } from './managedcluster-source.ts';
import type { MergedCluster } from './merge.ts';
import { ClusterRegistry, visibleFingerprint } from './registry.ts';
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

/** Events as "TYPE name version", internal ones marked when asked for, else left out. */
function record(registry: ClusterRegistry, withInternal = false) {
  const events: string[] = [];
  registry.subscribe((e: ClusterEvent) => {
    if (e.internal && !withInternal) return;
    events.push(`${e.type} ${e.cluster.name} ${e.cluster.resourceVersion}${e.internal ? ' internal' : ''}`);
  });
  return events;
}

/** A parsed source object at resourceVersion `rv`. */
const v = <T extends { resourceVersion: number }>(info: T, rv: number): T => ({
  ...info,
  resourceVersion: rv,
});

test("versions are the sources' resourceVersions: ADDED, MODIFIED on any source change, DELETED at the deleting revision", () => {
  const registry = new ClusterRegistry({ now: clock().now });
  const events = record(registry);
  registry.setSecret('a', v(tokenSecret('a'), 10), 10);
  assert.equal(registry.get('a')?.resourceVersion, '10');
  assert.equal(registry.version, '10');

  registry.setSecret('a', v(tokenSecret('a'), 10), 10); // the same Secret again (a relist)
  assert.equal(events.length, 1);

  registry.setSecret('a', v(tokenSecret('a', 'rotated'), 12), 12); // the proxy must notice
  assert.equal(registry.get('a')?.resourceVersion, '12');
  const rotated = registry.get('a')?.connectionKey;

  registry.advance('20'); // progress elsewhere on the hub: the list version moves, the object does not
  assert.equal(registry.version, '20');
  assert.equal(registry.get('a')?.resourceVersion, '12');

  registry.setSecret('a', undefined, 25);
  assert.equal(registry.get('a'), undefined);
  assert.deepEqual(events, ['ADDED a 10', 'MODIFIED a 12', 'DELETED a 25']);
  assert.notEqual(rotated, undefined);
});

test('every replica gives an object the same version, whatever order its sources arrive in', () => {
  const mc = (rv: number) =>
    v(parseManagedCluster(managedCluster('m', { url: 'https://m', available: 'True' })), rv);
  const sec = (rv: number) => v(parseClusterSecret(secret('m', { token: 't' })), rv);
  const one = new ClusterRegistry();
  one.setManagedCluster('m', mc(30), 30);
  one.setSecret('m', sec(31), 31);
  one.setManagedCluster('m', mc(40), 40); // a status update of the ManagedCluster
  const other = new ClusterRegistry();
  other.setSecret('m', sec(31), 31);
  other.setManagedCluster('m', mc(40), 40); // started later: never saw revision 30
  assert.equal(one.get('m')?.resourceVersion, '40');
  assert.equal(other.get('m')?.resourceVersion, '40');
  assert.equal(
    one.get('m') && visibleFingerprint(one.get('m') as MergedCluster),
    other.get('m') && visibleFingerprint(other.get('m') as MergedCluster),
  );
  // A source removed while the cluster stays counts with the revision that removed it: never backwards.
  one.setManagedCluster('m', undefined, 45);
  assert.equal(one.get('m')?.resourceVersion, '45');
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

test('a ManagedCluster update is a new version even when nothing shown changes (its resourceVersion did)', () => {
  const registry = new ClusterRegistry({ now: clock().now });
  registry.setSecret('m', v(tokenSecret('m'), 5), 5);
  const events = record(registry);
  const mc = parseManagedCluster(managedCluster('m', { url: 'https://m', available: 'True' }));
  registry.setManagedCluster('m', v(mc, 6), 6);
  registry.setManagedCluster('m', v({ ...mc }, 6), 6); // the same object again: nothing
  registry.setManagedCluster('m', v({ ...mc }, 9), 9);
  assert.deepEqual(events, ['MODIFIED m 6', 'MODIFIED m 9']);
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

test('eventsSince: the history from the first complete sync; older is expired, newer is ahead', () => {
  const registry = new ClusterRegistry({ now: clock().now, historyLimit: 3 });
  const source = { hasSynced: false };
  registry.addSource(source);
  registry.setSecret('a', v(tokenSecret('a'), 10), 10);
  source.hasSynced = true;
  registry.advance('11'); // the list's revision
  const listVersion = registry.version;
  assert.equal(listVersion, '11');
  registry.setSecret('b', v(tokenSecret('b'), 12), 12);
  registry.setSecret('a', undefined, 13);
  const names = (rv: string) => {
    const answer = registry.eventsSince(rv);
    return answer.kind === 'events' ? answer.events.map((e) => `${e.type} ${e.cluster.name}`) : answer.kind;
  };
  assert.deepEqual(names(listVersion), ['ADDED b', 'DELETED a']);
  assert.deepEqual(names('12'), ['DELETED a']);
  assert.deepEqual(names('13'), []);
  assert.equal(names('14'), 'ahead');
  assert.equal(names('10'), 'expired', 'before the first complete sync: this replica cannot know');
  assert.equal(names('abc'), 'expired');
  registry.setSecret('c', v(tokenSecret('c'), 14), 14);
  registry.setSecret('d', v(tokenSecret('d'), 15), 15); // pushes 'ADDED b' out of the history
  assert.equal(names('11'), 'expired');
  assert.deepEqual(names('12'), ['DELETED a', 'ADDED c', 'ADDED d']);
});

test('waitForVersion resolves when the list version gets there, or false at the timeout', async () => {
  const registry = new ClusterRegistry();
  registry.advance('5');
  assert.equal(await registry.waitForVersion(5, 10), true);
  const waiting = registry.waitForVersion(8, 1000);
  registry.setSecret('a', v(tokenSecret('a'), 8), 8);
  assert.equal(await waiting, true);
  assert.equal(await registry.waitForVersion(50, 10), false);
});

test("with replica sharing, the tunnel shown is the Lease's; routes are internal and keep the version", async () => {
  const registry = new ClusterRegistry();
  const events = record(registry, true);
  registry.setSecret(
    'a',
    v(
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
      3,
    ),
    3,
  );
  const route = tunnel();
  registry.setTunnelRoute('a', route); // the agent attached here: routing only, until its Lease says so
  // (no event at all: nothing shown changed, and without the Lease's record there is no tunnel to route to)
  assert.deepEqual(registry.get('a')?.tunnel, { connected: false });
  registry.setTunnelRecord('a', { replica: 'gw-1', since: '2026-03-01T00:00:00Z' }, 7);
  const shown = registry.get('a');
  assert.equal(shown?.resourceVersion, '7');
  assert.deepEqual(shown?.tunnel, { connected: true, since: '2026-03-01T00:00:00Z', replica: 'gw-1' });
  assert.equal(shown?.endpoint?.type === 'ClusterProxy' && shown.endpoint.dial, route.dial);
  registry.setTunnelRoute('a', tunnel()); // another route (the holder moved its peer address): same version
  assert.equal(registry.get('a')?.resourceVersion, '7');
  registry.setTunnelRoute('a', undefined); // no way there from this replica: requests fail at once, saying why
  const unreachable = registry.get('a')?.endpoint;
  assert.equal(unreachable?.type, 'ClusterProxy');
  if (unreachable?.type !== 'ClusterProxy') return;
  await assert.rejects(unreachable.dial(), /held by gateway replica gw-1, which this replica cannot reach/);
  registry.setTunnelRecord('a', undefined, 9);
  assert.deepEqual(registry.get('a')?.tunnel, { connected: false });
  assert.deepEqual(events, [
    'ADDED a 3',
    'MODIFIED a 7',
    'MODIFIED a 7 internal',
    'MODIFIED a 7 internal',
    'MODIFIED a 9',
  ]);
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
  assert.deepEqual(events, ['ADDED a 1']);
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
  assert.deepEqual(events, ['ADDED a 1', 'MODIFIED a 1', 'MODIFIED a 1', 'MODIFIED a 1']);
});

test('without replica sharing, its own tunnels are numbered above every revision seen, deletions too', () => {
  const registry = new ClusterRegistry();
  const events = record(registry);
  registry.advance('40');
  registry.setTunnel('agent-only', tunnel(), {
    connectedAt: new Date('2026-03-01T00:00:00.400Z'),
    replica: 'gw-1',
  });
  assert.deepEqual(registry.get('agent-only')?.tunnel, {
    connected: true,
    since: '2026-03-01T00:00:00Z',
    replica: 'gw-1',
  });
  registry.setTunnel('agent-only', undefined);
  assert.equal(registry.get('agent-only'), undefined);
  assert.deepEqual(events, ['ADDED agent-only 41', 'DELETED agent-only 42']);
  assert.equal(registry.version, '42');
});

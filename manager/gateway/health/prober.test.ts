/**
 * The prober's scheduling against a real loopback server (real pools, real
 * requests) with a fake clock: spread and jitter, bounded concurrency, rate
 * limit, deleted clusters forgotten.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { ClusterEvent, ClusterHealth, ClusterTarget } from '../clusters/cluster.ts';
import { type ClusterPools, createClusterPools } from '../proxy/cluster-pools.ts';
import { HealthProber, type ProberOptions } from './prober.ts';

let server: http.Server;
let address: string;
/** Requests in flight on the server now, and the most seen at once; connections opened. */
const load = { now: 0, max: 0, total: 0, connections: 0 };
/** When set, the server holds every request until this resolves. */
let hold: Promise<void> | undefined;

before(async () => {
  server = http.createServer(async (req, res) => {
    load.total++;
    load.now++;
    load.max = Math.max(load.max, load.now);
    if (hold) await hold;
    load.now--;
    res.end(req.url === '/healthz' ? 'ok' : 'no');
  });
  server.on('connection', () => load.connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  address = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
/** Probers and pools of every test, stopped at the end. */
const cleanups: (() => void)[] = [];
after(() => {
  for (const cleanup of cleanups) cleanup();
  server.closeAllConnections();
  server.close();
});

function target(name: string): ClusterTarget {
  return {
    name,
    labels: {},
    annotations: {},
    creationTimestamp: '2026-01-01T00:00:00Z',
    resourceVersion: '1',
    health: { healthy: false },
    connectionKey: `key-${name}`,
    endpoint: { type: 'Const', address, insecure: false },
    credential: { type: 'ServiceAccountToken', token: 't' },
  };
}

interface Harness {
  prober: HealthProber;
  clock: { now: number };
  health: Map<string, ClusterHealth>;
  clusters: Map<string, ClusterTarget>;
  emit: (event: ClusterEvent) => void;
  forgotten: string[];
  /** Waits until no probe is in flight (the server answered them all). */
  settle: () => Promise<void>;
}

function harness(count: number, options: Partial<ProberOptions> = {}): Harness {
  const clock = { now: 0 };
  const clusters = new Map<string, ClusterTarget>();
  for (let i = 0; i < count; i++) clusters.set(`c${i}`, target(`c${i}`));
  const health = new Map<string, ClusterHealth>();
  const listeners = new Set<(event: ClusterEvent) => void>();
  const forgotten: string[] = [];
  const real = options.pools ?? createClusterPools();
  const pools: ClusterPools = {
    ...real,
    get: (t) => real.get(t),
    forget: (name) => {
      forgotten.push(name);
      real.forget(name);
    },
  };
  let started = 0;
  const prober = new HealthProber({
    list: () => [...clusters.values()],
    get: (name) => clusters.get(name),
    subscribe: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    setHealth: (name, h) => health.set(name, h),
    pools,
    intervalMs: 10_000,
    now: () => clock.now,
    ...options,
  });
  const originalProbe = prober.probe.bind(prober);
  let finished = 0;
  prober.probe = async (t) => {
    started++;
    try {
      return await originalProbe(t);
    } finally {
      finished++;
    }
  };
  cleanups.push(() => {
    prober.stop();
    real.close();
  });
  return {
    prober,
    clock,
    health,
    clusters,
    forgotten,
    emit: (event) => {
      for (const l of listeners) l(event);
    },
    settle: async () => {
      while (finished < started) await new Promise((resolve) => setTimeout(resolve, 5));
      await new Promise((resolve) => setImmediate(resolve));
    },
  };
}

test('first probes at once, then spread over the interval, then every interval ± jitter', async () => {
  // random() walks 0, 0.01, …, 0.99: the second probes land at 0, 100, …, 9900 ms.
  let i = 0;
  const h = harness(100, { random: () => (i++ % 100) / 100 });
  h.prober.start();
  await h.settle();
  assert.equal(h.health.size, 100, 'every cluster probed once at start');
  assert.ok([...h.health.values()].every((x) => x.healthy));
  const total = load.total;

  h.clock.now = 4_999;
  h.prober.tick();
  await h.settle();
  assert.equal(load.total - total, 50, 'half the second round in the first half of the interval');

  // Third round: each 10 s ± 10 % after its second probe, never all at once.
  i = 0;
  h.clock.now = 10_000;
  h.prober.tick();
  await h.settle();
  const afterSecond = load.total;
  assert.equal(afterSecond - total, 100);
  h.clock.now = 13_998; // before 4_999 + 9_000 (the earliest jittered due time of the first half)
  h.prober.tick();
  await h.settle();
  assert.equal(load.total, afterSecond, 'no probe earlier than interval × (1 − jitter)');
  h.clock.now = 31_000; // after 10_000 + 11_000 (the latest)
  h.prober.tick();
  await h.settle();
  assert.equal(load.total - afterSecond, 100);
});

test('at most `concurrency` probes in flight', async () => {
  let release!: () => void;
  hold = new Promise((resolve) => {
    release = resolve;
  });
  load.max = 0;
  const h = harness(40, { concurrency: 4 });
  try {
    h.prober.start();
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(load.now, 4);
    release();
    hold = undefined;
    await h.settle();
    assert.equal(h.health.size, 40);
    assert.equal(load.max, 4);
  } finally {
    release();
    hold = undefined;
  }
});

test('at most `maxProbesPerSecond` probes start per second; the others wait their turn', async () => {
  const info: string[] = [];
  const h = harness(25, {
    maxProbesPerSecond: 10,
    log: { debug: () => {}, info: (_o, m) => info.push(m) },
  });
  h.prober.start();
  await h.settle();
  assert.equal(h.health.size, 10);
  h.clock.now = 999;
  h.prober.tick();
  await h.settle();
  assert.equal(h.health.size, 10, 'still the same second');
  h.clock.now = 1_000;
  h.prober.tick();
  await h.settle();
  assert.equal(h.health.size, 20);
  h.clock.now = 2_000;
  h.prober.tick();
  await h.settle();
  assert.equal(h.health.size, 25);
  assert.match(info[0] ?? '', /more clusters than 10 probes per second .* about every 3 s/);
});

test('a deleted cluster is forgotten: schedule, pool, and a probe that ends after the deletion', async () => {
  let release!: () => void;
  hold = new Promise((resolve) => {
    release = resolve;
  });
  const h = harness(3);
  try {
    h.prober.start();
    await new Promise((resolve) => setTimeout(resolve, 50)); // probes of c0..c2 in flight
    const gone = h.clusters.get('c1') as ClusterTarget;
    h.clusters.delete('c1');
    h.emit({ type: 'DELETED', cluster: gone });
    assert.equal(h.prober.tracked, 2);
    assert.deepEqual(h.forgotten, ['c1'], 'its pool is dropped (the prober owns the pools here)');
    release();
    hold = undefined;
    await h.settle();
    assert.deepEqual([...h.health.keys()].sort(), ['c0', 'c2'], 'no result for the deleted cluster');

    // A new cluster is probed at once, without waiting for the next listing.
    const added = target('c9');
    h.clusters.set('c9', added);
    h.emit({ type: 'ADDED', cluster: added });
    h.prober.tick();
    await h.settle();
    assert.equal(h.health.get('c9')?.healthy, true);

    // A cluster missing from a listing (an event lost) is forgotten too.
    h.clusters.delete('c2');
    h.clock.now = 10_000;
    h.prober.tick();
    assert.equal(h.prober.tracked, 2);
    assert.deepEqual(h.forgotten, ['c1', 'c2']);
  } finally {
    release();
    hold = undefined;
  }
});

test('shared pools are the proxy’s: the prober neither forgets nor closes them', async () => {
  const h = harness(2, { sharedPools: true });
  h.prober.start();
  await h.settle();
  const gone = h.clusters.get('c0') as ClusterTarget;
  h.clusters.delete('c0');
  h.emit({ type: 'DELETED', cluster: gone });
  h.prober.stop();
  assert.deepEqual(h.forgotten, []);
  assert.equal(h.prober.tracked, 1);
});

test('a probe keeps no connection of its own, and reuses one the proxy keeps warm', async () => {
  const pools = createClusterPools();
  const h = harness(3, { sharedPools: true, pools });
  const connections = load.connections;
  h.prober.start();
  await h.settle();
  assert.equal(load.connections - connections, 3);
  assert.equal(pools.stats().idleSockets, 0, 'each probe connection closed after its answer');

  // The proxy talked to c0 and keeps its connection: c0's next probe takes it, no new connection.
  const upstream = pools.get(h.clusters.get('c0') as ClusterTarget);
  assert.ok(typeof upstream !== 'string');
  await new Promise<void>((resolve, reject) => {
    upstream
      .request(
        { agent: upstream.agent, hostname: upstream.hostname, port: upstream.port, path: '/api' },
        (res) => {
          res.resume();
          res.on('end', resolve);
        },
      )
      .on('error', reject)
      .end();
  });
  await new Promise((resolve) => setImmediate(resolve));
  const warm = load.connections;
  assert.equal(pools.stats().idleSockets, 1);
  h.clock.now = 100_000;
  h.prober.tick();
  await h.settle();
  assert.equal(load.connections - warm, 2, 'new connections for c1 and c2 only');
  assert.equal(pools.stats().idleSockets, 1, "the proxy's connection is still there");
  pools.close();
});

test('clusters deleted while queued behind the rate limit spend none of it', async () => {
  const h = harness(2000, { maxProbesPerSecond: 10 });
  h.prober.start();
  await h.settle();
  assert.equal(h.health.size, 10); // c0..c9: the queue keeps the listing's order
  for (let i = 10; i < 1510; i++) {
    const gone = h.clusters.get(`c${i}`) as ClusterTarget;
    h.clusters.delete(gone.name);
    h.emit({ type: 'DELETED', cluster: gone });
  }
  assert.equal(h.prober.tracked, 500);
  h.clock.now = 1_000;
  h.prober.tick();
  await h.settle();
  assert.deepEqual(
    [...h.health.keys()].slice(10),
    Array.from({ length: 10 }, (_, i) => `c${1510 + i}`),
    'the next second goes to clusters that still exist',
  );
});

test('no probe before every source has listed its clusters', async () => {
  // A restart with Secrets listed before the ManagedClusters that give their URLs: a probe then
  // would find "no endpoint" and keep the cluster unhealthy until its next turn.
  let synced = false;
  const h = harness(3, { sourcesSynced: () => synced });
  const total = load.total;
  h.prober.start();
  await new Promise((resolve) => setTimeout(resolve, 250)); // a few of its re-checks
  await h.settle();
  assert.equal(load.total, total, 'nothing probed while a source is still listing');
  assert.equal(h.health.size, 0, 'and no verdict reported');
  assert.equal(h.prober.unprobed, 3);
  synced = true;
  await new Promise((resolve) => setTimeout(resolve, 250));
  await h.settle();
  assert.equal(h.health.size, 3);
  assert.equal(h.prober.unprobed, 0);
  assert.ok([...h.health.values()].every((x) => x.healthy));
});

test('a cluster whose endpoint, credential or problem changes is probed again at once', async () => {
  const h = harness(2, { random: () => 0.5 });
  const withoutEndpoint = (name: string): ClusterTarget => {
    const { endpoint: _endpoint, ...rest } = target(name);
    return { ...rest, connectionKey: 'none', problem: 'no endpoint' };
  };
  h.clusters.set('c0', withoutEndpoint('c0'));
  h.prober.start();
  await h.settle();
  assert.deepEqual(h.health.get('c0'), { healthy: false, reason: 'no endpoint' });
  assert.equal(h.health.get('c1')?.healthy, true);
  const total = load.total;

  // c0's ManagedCluster arrives with its URL: probed now, not at its place in the interval (5 s).
  h.clock.now = 100;
  h.clusters.set('c0', target('c0'));
  h.emit({ type: 'MODIFIED', cluster: target('c0') });
  h.emit({ type: 'MODIFIED', cluster: { ...target('c1'), resourceVersion: '2' } }); // only health: no re-probe
  h.prober.tick();
  await h.settle();
  assert.equal(h.health.get('c0')?.healthy, true);
  assert.equal(load.total - total, 1, 'c0 only');

  // And it keeps its regular schedule afterwards: nothing more until its interval comes.
  h.clock.now = 4_000;
  h.prober.tick();
  await h.settle();
  assert.equal(load.total - total, 1);
});

test('a cluster unreachable through its tunnel: healthyReason names the path, the network error stays in the log', async () => {
  const logged: object[] = [];
  const h = harness(0, {
    log: { debug: () => {}, info: (fields) => void logged.push(fields) },
  });
  const tunnelled: ClusterTarget = {
    ...target('t1'),
    endpoint: {
      type: 'ClusterProxy',
      serverName: 'kubernetes.default.svc',
      insecure: false,
      // What a route to a chosen address would fail with: the error a port scanner reads.
      dial: () => Promise.reject(new Error('connect ECONNREFUSED 10.9.9.9:1')),
    },
  };
  const first = await h.prober.probe(tunnelled);
  assert.equal(first.healthy, false);
  assert.doesNotMatch(first.reason ?? '', /ECONNREFUSED|10\.9\.9\.9/);
  assert.match(first.reason ?? '', /agent tunnel/);
  await h.prober.probe(tunnelled);
  assert.equal(logged.length, 1, 'logged once while it stays the same');
  assert.match(JSON.stringify(logged[0]), /ECONNREFUSED 10\.9\.9\.9:1/);
  // A cluster reached without a tunnel keeps its precise reason (its endpoint is the credential owner's).
  const direct = await h.prober.probe({
    ...target('d1'),
    endpoint: { type: 'Const', address: 'http://127.0.0.1:1', insecure: false },
  });
  assert.match(direct.reason ?? '', /ECONNREFUSED/);
});

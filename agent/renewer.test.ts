import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeClient } from '../shared/kube/client.ts';
import { AgentMetrics } from './metrics.ts';
import { Renewer } from './renewer.ts';
import { type Call, fakeClient, type Handler, statusError } from './testing.ts';

const quiet = { debug() {}, info() {}, warn() {} };
const hubLease = {
  namespace: 'cluster1',
  name: 'cluster-gateway',
  holderIdentity: 'a',
  leaseDurationSeconds: 12,
};
const spokeLease = { ...hubLease, namespace: 'agent-ns' };
const lease = (ns: string) => ({
  metadata: { name: 'cluster-gateway', namespace: ns, resourceVersion: '1' },
});

const healthyHub: Handler = (c) => (c.method === 'GET' ? lease('cluster1') : {});
const healthySpoke: Handler = (c) => {
  if (c.path === '/readyz') return 'ok';
  if (c.method === 'GET') throw statusError(404);
  return {};
};

function setup(hubHandler: Handler | Error, spokeHandler: Handler = healthySpoke) {
  const hub = hubHandler instanceof Error ? undefined : fakeClient(hubHandler);
  const spoke = fakeClient(spokeHandler);
  const metrics = new AgentMetrics();
  const renewer = new Renewer({
    hub: (): KubeClient => {
      if (!hub) throw hubHandler;
      return hub.client;
    },
    spoke: () => spoke.client,
    hubLease,
    spokeLease,
    intervalMs: 1000,
    jitter: 0,
    metrics,
    log: quiet,
  });
  return { renewer, metrics, hubCalls: hub?.calls ?? [], spokeCalls: spoke.calls };
}

const writes = (calls: Call[]) => calls.filter((c) => c.method !== 'GET').map((c) => `${c.method} ${c.path}`);

test('healthy: the hub heartbeat is updated (one GET, one PUT) and the spoke Lease created', async () => {
  const s = setup(healthyHub);
  await s.renewer.round();
  assert.equal(s.renewer.health.healthy, true);
  assert.deepEqual(
    s.hubCalls.map((c) => c.method),
    ['GET', 'PUT'],
  );
  assert.deepEqual(writes(s.spokeCalls), ['POST /apis/coordination.k8s.io/v1/namespaces/agent-ns/leases']);
  assert.match(s.metrics.render(), /lease_renewals_total\{lease="hub"\} 1/);
  assert.match(s.metrics.render(), /lease_renewals_total\{lease="spoke"\} 1/);
});

test('managed /readyz failing: nothing is renewed on either side, the round is counted as skipped', async () => {
  const s = setup(healthyHub, (c) => {
    if (c.path === '/readyz') throw statusError(500, '[-]etcd failed');
    return {};
  });
  await s.renewer.round();
  assert.equal(s.renewer.health.healthy, false);
  assert.equal(s.renewer.health.reason, 'ManagedAPIServerNotReady');
  assert.match(s.renewer.health.message, /etcd failed/);
  assert.deepEqual(writes(s.hubCalls), []);
  assert.deepEqual(writes(s.spokeCalls), []);
  assert.match(s.metrics.render(), /renewals_skipped_total\{reason="ManagedAPIServerNotReady"\} 1/);
  assert.match(s.metrics.render(), /cluster_gateway_agent_healthy 0/);
});

for (const [code, reason] of [
  [401, 'HubCredentialRejected'],
  [403, 'HubAccessForbidden'],
] as const) {
  test(`hub answers ${code}: nothing is renewed on either side (${reason})`, async () => {
    const s = setup(() => {
      throw statusError(code);
    });
    await s.renewer.round();
    assert.equal(s.renewer.health.reason, reason);
    assert.equal(s.renewer.health.healthy, false);
    assert.deepEqual(writes(s.hubCalls), []);
    assert.deepEqual(writes(s.spokeCalls), []);
  });
}

test('hub credential files unreadable: nothing is renewed (HubCredentialUnavailable)', async () => {
  const s = setup(new Error('cannot read kubeconfig /managed/hub-kubeconfig/kubeconfig: ENOENT'));
  await s.renewer.round();
  assert.equal(s.renewer.health.reason, 'HubCredentialUnavailable');
  assert.deepEqual(writes(s.spokeCalls), []);
});

test('hub heartbeat not created yet, or hub unreachable: the spoke Lease is still renewed', async () => {
  for (const [err, reason] of [
    [statusError(404), 'HubLeaseNotFound'],
    [Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }), 'HubUnreachable'],
  ] as const) {
    const s = setup(() => {
      throw err;
    });
    await s.renewer.round();
    assert.equal(s.renewer.health.healthy, true);
    assert.equal(s.renewer.health.reason, reason);
    assert.deepEqual(writes(s.hubCalls), [], 'the agent never creates the hub Lease');
    assert.equal(writes(s.spokeCalls).length, 1);
  }
});

test('a failed write is counted with its reason and does not stop the other side', async () => {
  const s = setup((c) => {
    if (c.method === 'GET') return lease('cluster1');
    throw statusError(500, 'etcdserver: request timed out');
  });
  await s.renewer.round();
  assert.match(s.metrics.render(), /lease_renewal_failures_total\{lease="hub",reason="InternalError"\} 1/);
  assert.match(s.metrics.render(), /lease_renewals_total\{lease="spoke"\} 1/);
});

test('recovery: renewals resume with the first healthy round', async () => {
  let ready = false;
  const s = setup(healthyHub, (c) => {
    if (c.path === '/readyz') {
      if (!ready) throw statusError(500);
      return 'ok';
    }
    return c.method === 'GET' ? lease('agent-ns') : {};
  });
  await s.renewer.round();
  assert.equal(writes(s.hubCalls).length + writes(s.spokeCalls).length, 0);
  ready = true;
  await s.renewer.round();
  assert.equal(s.renewer.health.healthy, true);
  assert.deepEqual(writes(s.hubCalls), [
    'PUT /apis/coordination.k8s.io/v1/namespaces/cluster1/leases/cluster-gateway',
  ]);
  assert.deepEqual(writes(s.spokeCalls), [
    'PUT /apis/coordination.k8s.io/v1/namespaces/agent-ns/leases/cluster-gateway',
  ]);
});

test('run: rounds repeat at the interval until aborted', async () => {
  const s = setup(healthyHub);
  const r = new Renewer({
    hub: () => fakeClient(healthyHub).client,
    spoke: () => fakeClient(healthySpoke).client,
    hubLease,
    spokeLease,
    intervalMs: 20,
    jitter: 0.5,
    metrics: s.metrics,
    log: quiet,
  });
  const stop = new AbortController();
  const done = r.run(stop.signal);
  await new Promise((resolve) => setTimeout(resolve, 200));
  stop.abort();
  await done;
  const renewals = Number(/lease_renewals_total\{lease="hub"\} (\d+)/.exec(s.metrics.render())?.[1]);
  assert.ok(renewals >= 4 && renewals <= 11, `renewals in 200 ms at 20-30 ms: ${renewals}`);
});

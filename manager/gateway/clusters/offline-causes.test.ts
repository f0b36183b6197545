import assert from 'node:assert/strict';
import { test } from 'node:test';
import { clusterOfflineStatus } from '../../../shared/kube/cluster-offline.ts';
import type { TunnelEndpoint } from './cluster.ts';
import { parseManagedCluster } from './managedcluster-source.ts';
import { mergeCluster } from './merge.ts';
import { noTunnelCause, offlineAnswer } from './offline-causes.ts';
import { ClusterRegistry } from './registry.ts';
import { parseClusterSecret } from './secret-source.ts';
import { caPem, managedCluster, secret } from './test-fixtures.ts';

const healthyKey = 'status.cluster.core.oam.dev/healthy';
const reasonKey = 'status.cluster.core.oam.dev/healthy-reason';
const data = { endpoint: 'https://127.0.0.1:6443', 'ca.crt': caPem, token: 't' };
const proxyLabels = {
  'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken',
  'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy',
};
const tunnel: TunnelEndpoint = {
  type: 'ClusterProxy',
  serverName: 'kubernetes.default.svc',
  insecure: false,
  dial: async () => {
    throw new Error('not in tests');
  },
};
const refused = { healthy: false, reason: 'unreachable: connect ECONNREFUSED' };
const probing = { probing: true };

const constSecret = (annotations: Record<string, string> = {}) =>
  parseClusterSecret(secret('c1', data, undefined, annotations));
const proxySecret = (annotations: Record<string, string> = {}) =>
  parseClusterSecret(secret('c1', { token: 't', 'ca.crt': caPem }, proxyLabels, annotations));

test('an operator mark is a cause, with the reason the operator gave', () => {
  const marked = mergeCluster(
    { name: 'c1', secret: constSecret({ [healthyKey]: 'false', [reasonKey]: 'Maintenance' }) },
    probing,
  );
  assert.deepEqual(marked?.offline, [
    { kind: 'mark', message: 'marked unhealthy through the health subresource: Maintenance' },
  ]);
  const noReason = mergeCluster({ name: 'c1', secret: constSecret({ [healthyKey]: 'false' }) }, probing);
  assert.match(noReason?.offline?.[0]?.message ?? '', /marked unhealthy .*\(no reason given\)/);
  // A mark of healthy is no cause; an unhealthy mark on a Secret-less cluster's ManagedCluster is.
  assert.equal(
    mergeCluster({ name: 'c1', secret: constSecret({ [healthyKey]: 'true' }) }, probing)?.offline,
    undefined,
  );
});

test('a failed probe is a cause; not probed yet, a ManagedCluster condition, or the prober off are not', () => {
  const probed = mergeCluster({ name: 'c1', secret: constSecret(), health: refused }, probing);
  assert.deepEqual(probed?.offline, [
    { kind: 'probe', message: 'the last health probe failed: unreachable: connect ECONNREFUSED' },
  ]);
  // Not probed yet (a restart): Unknown, tried.
  const pending = mergeCluster({ name: 'c1', secret: constSecret() }, probing);
  assert.equal(pending?.health.unknown, true);
  assert.equal(pending?.offline, undefined);
  // Unhealthy only by its ManagedCluster's condition: the gateway did not find it offline itself.
  const managed = parseManagedCluster(managedCluster('c1', { url: 'https://m', available: 'Unknown' }));
  const byCondition = mergeCluster({ name: 'c1', secret: constSecret(), managed });
  assert.equal(byCondition?.health.healthy, false);
  assert.equal(byCondition?.offline, undefined);
  // The prober off: every cluster without a mark reads unhealthy by default, none is offline.
  const off = mergeCluster({ name: 'c1', secret: constSecret() });
  assert.deepEqual(off?.health, { healthy: false });
  assert.equal(off?.offline, undefined);
  // A healthy probe: nothing.
  assert.equal(
    mergeCluster({ name: 'c1', secret: constSecret(), health: { healthy: true } }, probing)?.offline,
    undefined,
  );
});

test('a ClusterProxy cluster without a tunnel is offline whatever the flag; with one it is not', () => {
  const down = mergeCluster({ name: 'c1', secret: proxySecret() }, probing);
  assert.deepEqual(down?.offline, [{ kind: 'tunnel', message: noTunnelCause }]);
  assert.deepEqual(down?.tunnel, { connected: false });
  // The probe fails for the same reason: the tunnel cause says it, the probe adds nothing.
  const probedToo = mergeCluster({ name: 'c1', secret: proxySecret(), health: refused }, probing);
  assert.deepEqual(
    probedToo?.offline?.map((c) => c.kind),
    ['tunnel'],
  );
  const up = mergeCluster(
    {
      name: 'c1',
      secret: proxySecret(),
      tunnel: { endpoint: tunnel, generation: 1, connectedAt: '2026-03-01T00:00:00Z' },
    },
    probing,
  );
  assert.equal(up?.offline, undefined);
  // Marked and tunnel down: the operator's word first, then the tunnel.
  const both = mergeCluster(
    { name: 'c1', secret: proxySecret({ [healthyKey]: 'false', [reasonKey]: 'Retired' }) },
    probing,
  );
  assert.deepEqual(
    both?.offline?.map((c) => c.kind),
    ['mark', 'tunnel'],
  );
});

test('offlineAnswer: tunnel always, mark and probe only with --reject-unhealthy; the Status it becomes', () => {
  const merged = (inputs: Parameters<typeof mergeCluster>[0]) => {
    const m = mergeCluster(inputs, probing);
    assert.ok(m);
    return { ...m, resourceVersion: '1' };
  };
  const tunnelDown = merged({ name: 'c1', secret: proxySecret() });
  const marked = merged({
    name: 'c1',
    secret: constSecret({ [healthyKey]: 'false', [reasonKey]: 'Maintenance' }),
  });
  const probed = merged({ name: 'c1', secret: constSecret(), health: refused });

  for (const rejectUnhealthy of [false, true]) {
    const answer = offlineAnswer(tunnelDown, { rejectUnhealthy, probeIntervalSeconds: 10 });
    assert.equal(
      answer?.message,
      'cluster "c1" is unreachable: endpoint type is ClusterProxy but no agent tunnel is connected for this cluster',
    );
    assert.deepEqual(answer?.causes, [noTunnelCause]);
    assert.equal(answer?.retryAfterSeconds, undefined, 'the gateway cannot know when the agent is back');
  }
  assert.equal(offlineAnswer(marked, { rejectUnhealthy: false }), undefined, 'tried, as the original does');
  assert.equal(offlineAnswer(probed, { rejectUnhealthy: false }), undefined);

  const markAnswer = offlineAnswer(marked, { rejectUnhealthy: true, probeIntervalSeconds: 10 });
  assert.deepEqual(markAnswer, {
    cluster: 'c1',
    message: 'cluster "c1" is unhealthy: Maintenance',
    causes: ['marked unhealthy through the health subresource: Maintenance'],
  });
  const probeAnswer = offlineAnswer(probed, { rejectUnhealthy: true, probeIntervalSeconds: 10 });
  assert.equal(probeAnswer?.message, 'cluster "c1" is unhealthy: unreachable: connect ECONNREFUSED');
  assert.equal(probeAnswer?.retryAfterSeconds, 10, 'looked at again by the next probe');

  assert.ok(probeAnswer);
  assert.deepEqual(clusterOfflineStatus(probeAnswer), {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: 'cluster "c1" is unhealthy: unreachable: connect ECONNREFUSED',
    reason: 'ServiceUnavailable',
    code: 503,
    details: {
      name: 'c1',
      group: 'cluster.core.oam.dev',
      kind: 'clustergateways',
      causes: [
        {
          reason: 'ClusterOffline',
          message: 'the last health probe failed: unreachable: connect ECONNREFUSED',
        },
      ],
      retryAfterSeconds: 10,
    },
  });
});

test('in the registry: the causes follow the mark, the probe and the tunnel as they change', () => {
  const registry = new ClusterRegistry({ policy: { probing: true } });
  registry.setSecret('c1', proxySecret(), 1);
  assert.deepEqual(
    registry.get('c1')?.offline?.map((c) => c.kind),
    ['tunnel'],
  );
  registry.setTunnel('c1', tunnel, { connectedAt: new Date('2026-03-01T00:00:00Z') });
  assert.equal(registry.get('c1')?.offline, undefined, 'tunnel up, not probed yet: not offline');
  registry.setHealth('c1', refused);
  assert.deepEqual(
    registry.get('c1')?.offline?.map((c) => c.kind),
    ['probe'],
  );
  registry.setSecret('c1', proxySecret({ [healthyKey]: 'false', [reasonKey]: 'Maintenance' }), 2);
  assert.deepEqual(
    registry.get('c1')?.offline?.map((c) => c.kind),
    ['mark', 'probe'],
  );
  registry.setHealth('c1', { healthy: true });
  registry.setSecret('c1', proxySecret({ [healthyKey]: 'true' }), 3);
  assert.equal(registry.get('c1')?.offline, undefined);
  registry.setTunnel('c1', undefined);
  assert.deepEqual(
    registry.get('c1')?.offline?.map((c) => c.kind),
    ['tunnel'],
  );
});

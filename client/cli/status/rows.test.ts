import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { HealthzResult } from './healthz.ts';
import { agentStatus, imageVersion, statusRows } from './rows.ts';
import type { ClusterGateway, Lease, ListFailure, ManifestWork, StatusSources } from './sources.ts';
import { statusCells } from './table.ts';

const now = Date.parse('2026-12-05T12:00:00Z');
const ago = (s: number) => new Date(now - s * 1000).toISOString();

const work = (cluster: string, image: string, feedback: Record<string, number>): ManifestWork => ({
  metadata: { name: 'addon-cluster-gateway-deploy-0', namespace: cluster },
  spec: {
    workload: {
      manifests: [
        { kind: 'Namespace', metadata: { name: 'open-cluster-management-agent-addon' } },
        {
          kind: 'Deployment',
          metadata: { name: 'cluster-gateway-agent', namespace: 'open-cluster-management-agent-addon' },
          spec: { template: { spec: { containers: [{ name: 'agent', image }] } } },
        },
      ],
    },
  },
  status: {
    resourceStatus: {
      manifests: [
        {
          resourceMeta: { kind: 'Deployment', resource: 'deployments', name: 'cluster-gateway-agent' },
          statusFeedback: {
            values: Object.entries(feedback).map(([name, integer]) => ({
              name,
              fieldValue: { type: 'Integer', integer },
            })),
          },
        },
      ],
    },
  },
});

const rolledOut = {
  Replicas: 1,
  AvailableReplicas: 1,
  UpdatedReplicas: 1,
  Generation: 2,
  ObservedGeneration: 2,
};

const tunnelLease = (cluster: string, holder: string, renewedAgo: number): Lease => ({
  metadata: {
    name: `cluster-gateway-tunnel-${cluster}`,
    namespace: 'open-cluster-management-addon',
    annotations: { 'cluster.core.oam.dev/cluster-name': cluster },
  },
  spec: {
    holderIdentity: holder,
    leaseDurationSeconds: 40,
    acquireTime: ago(300),
    renewTime: ago(renewedAgo),
  },
});

const gateway = (name: string, type: string, status: ClusterGateway['status']): ClusterGateway => ({
  metadata: { name },
  spec: { access: { endpoint: { type } } },
  status: status ?? {},
});

function sources(overrides: Partial<StatusSources> = {}): StatusSources {
  return {
    managedClusters: { items: [{ metadata: { name: 'c1' } }, { metadata: { name: 'c2' } }] },
    addons: {
      items: [
        {
          metadata: { name: 'cluster-gateway', namespace: 'c1' },
          status: {
            conditions: [
              { type: 'Available', status: 'True', reason: 'AgentAvailable', message: 'ok' },
              { type: 'Progressing', status: 'False' },
            ],
          },
        },
        {
          metadata: { name: 'cluster-gateway', namespace: 'c2' },
          status: {
            conditions: [
              { type: 'Available', status: 'Unknown', reason: 'HeartbeatStale', message: 'stale' },
            ],
          },
        },
      ],
    },
    works: {
      items: [
        work('c1', 'registry.example/cg:v1.2.3', rolledOut),
        work('c2', 'registry.example/cg:v1.2.4', { ...rolledOut, ObservedGeneration: 1 }),
      ],
    },
    heartbeats: {
      items: [
        {
          metadata: { name: 'cluster-gateway', namespace: 'c1' },
          spec: { renewTime: ago(3), holderIdentity: 'agent-1', leaseDurationSeconds: 12 },
        },
        { metadata: { name: 'cluster-gateway', namespace: 'c2' }, spec: { renewTime: ago(400) } },
        // Another addon's Lease with the label: not the heartbeat.
        { metadata: { name: 'other', namespace: 'c2' }, spec: { renewTime: ago(1) } },
      ],
    },
    tunnelLeases: { items: [tunnelLease('c1', 'gw-a', 2), tunnelLease('c2', 'gw-b', 100)] },
    gateways: {
      items: [
        gateway('c1', 'Const', { healthy: true }),
        gateway('c2', 'ClusterProxy', {
          healthy: false,
          healthyReason: 'TunnelDisconnected',
          tunnel: { connected: false },
        }),
        // A Secret-only cluster: a ClusterGateway, no ManagedCluster, no addon.
        gateway('secret-only', 'Const', { healthy: true }),
      ],
    },
    ...overrides,
  };
}

const probes = new Map<string, HealthzResult>([
  ['c1', { ok: true, milliseconds: 12, code: 200 }],
  ['c2', { ok: false, milliseconds: 3, code: 503, error: 'offline', message: 'cluster c2 is offline' }],
  ['secret-only', { ok: false, error: 'timeout', message: 'no answer within 2 s' }],
]);

test('a row per ManagedCluster and per ClusterGateway without one, sorted, each field from its object', () => {
  const rows = statusRows(sources(), probes, now);
  assert.deepEqual(
    rows.map((r) => r.name),
    ['c1', 'c2', 'secret-only'],
  );
  const [c1, c2, secretOnly] = rows;
  assert.deepEqual(c1, {
    name: 'c1',
    managedCluster: true,
    addon: { available: 'True', reason: 'AgentAvailable', message: 'ok' },
    agent: {
      image: 'registry.example/cg:v1.2.3',
      version: 'v1.2.3',
      rolledOut: true,
      replicas: 1,
      availableReplicas: 1,
    },
    endpointType: 'Const',
    tunnel: {
      connected: true,
      replica: 'gw-a',
      since: ago(300),
      sinceSeconds: 300,
      renewTime: ago(2),
      renewAgeSeconds: 2,
      source: 'lease',
    },
    heartbeat: { renewTime: ago(3), ageSeconds: 3, holder: 'agent-1', leaseDurationSeconds: 12 },
    gateway: { healthy: true },
    healthz: { ok: true, milliseconds: 12, code: 200 },
  });
  assert.equal(
    c2?.agent && 'rolledOut' in c2.agent && c2.agent.rolledOut,
    false,
    'observed generation behind: rolling out',
  );
  assert.deepEqual(
    c2?.tunnel && 'stale' in c2.tunnel && c2.tunnel.stale,
    true,
    'held, not renewed for 100 s of 40: stale',
  );
  assert.deepEqual(
    c2?.heartbeat,
    { renewTime: ago(400), ageSeconds: 400 },
    'the cluster-gateway Lease, not the other one',
  );
  assert.deepEqual(secretOnly?.managedCluster, false);
  assert.equal(secretOnly?.addon, null);
  assert.equal(secretOnly?.agent, null);
  assert.equal(secretOnly?.tunnel, null);
  assert.equal(secretOnly?.heartbeat, null);
});

test('table cells: short values and ages; what needs a look says so in a word', () => {
  const rows = statusRows(sources(), probes, now);
  assert.deepEqual(
    rows.map((r) => statusCells(r)),
    [
      ['c1', 'True', 'AgentAvailable', 'v1.2.3', 'Const', 'Connected', 'gw-a', '3s', 'true', '12ms'],
      [
        'c2',
        'Unknown',
        'HeartbeatStale',
        'v1.2.4 (rolling out)',
        'ClusterProxy',
        'Stale',
        '-',
        '6m40s',
        'false (TunnelDisconnected)',
        'offline',
      ],
      ['secret-only', '-', 'NoManagedCluster', '-', 'Const', '-', '-', 'missing', 'true', 'timeout'],
    ],
  );
});

test('a released tunnel Lease (no holder) is Disconnected', () => {
  const lease = tunnelLease('c1', '', 1);
  const [c1] = statusRows(sources({ tunnelLeases: { items: [lease] } }), probes, now);
  assert.deepEqual(c1?.tunnel, { connected: false, renewTime: ago(1), renewAgeSeconds: 1, source: 'lease' });
});

const forbidden = (resource: string): { failure: ListFailure } => ({
  failure: {
    resource,
    word: 'forbidden',
    missingPermission: `list ${resource} in all namespaces`,
    message: 'no',
    connection: false,
  },
});

test('a collection that could not be listed: its columns say why, the others are unaffected', () => {
  const rows = statusRows(
    sources({
      addons: forbidden('managedclusteraddons.addon.open-cluster-management.io'),
      heartbeats: forbidden('leases.coordination.k8s.io'),
    }),
    probes,
    now,
  );
  const [c1] = rows;
  assert.deepEqual(c1?.addon, { unknown: 'forbidden' });
  assert.deepEqual(c1?.heartbeat, { unknown: 'forbidden' });
  assert.equal(c1?.endpointType, 'Const');
  assert.deepEqual(statusCells(c1!).slice(0, 3), ['c1', 'forbidden', 'forbidden']);
});

test('tunnel Leases not listable: the tunnel comes from the ClusterGateway status instead', () => {
  const withTunnel = sources({
    tunnelLeases: forbidden('leases.coordination.k8s.io'),
    gateways: {
      items: [
        gateway('c1', 'ClusterProxy', {
          healthy: true,
          tunnel: { connected: true, replica: 'gw-a', connectedSince: ago(60) },
        }),
      ],
    },
  });
  const [c1] = statusRows(withTunnel, probes, now);
  assert.deepEqual(c1?.tunnel, {
    connected: true,
    replica: 'gw-a',
    since: ago(60),
    sinceSeconds: 60,
    source: 'clustergateway',
  });
});

test('ClusterGateways not listable: ENDPOINT, HEALTHY and HEALTHZ say why; the rows come from the ManagedClusters', () => {
  const rows = statusRows(
    sources({
      gateways: {
        failure: {
          resource: 'clustergateways.cluster.core.oam.dev',
          word: 'unavailable',
          message: '503',
          connection: false,
        },
      },
    }),
    { unknown: 'unavailable' },
    now,
  );
  assert.deepEqual(
    rows.map((r) => r.name),
    ['c1', 'c2'],
  );
  assert.deepEqual(statusCells(rows[0]!).slice(4), [
    'unavailable',
    'Connected',
    'gw-a',
    '3s',
    'unavailable',
    'unavailable',
  ]);
});

test('agent version: the tag, a digest shortened, rolling out until every replica is updated and available', () => {
  assert.equal(imageVersion('ghcr.io/x/cluster-gateway:v1.0.0'), 'v1.0.0');
  assert.equal(imageVersion('localhost:5000/cg'), 'localhost:5000/cg', 'a registry port is not a tag');
  assert.equal(imageVersion('cg:v1@sha256:0123456789abcdef0123'), 'v1');
  assert.equal(imageVersion('cg@sha256:0123456789abcdef0123'), '@0123456789ab');
  assert.equal(agentStatus(undefined), null);
  assert.equal(agentStatus(work('c', 'cg:v1', { ...rolledOut, UpdatedReplicas: 0 }))?.rolledOut, false);
  assert.equal(agentStatus(work('c', 'cg:v1', { ...rolledOut, AvailableReplicas: 0 }))?.rolledOut, false);
  assert.equal(agentStatus(work('c', 'cg:v1', {}))?.rolledOut, false, 'no feedback yet');
  assert.equal(agentStatus(work('c', 'cg:v1', rolledOut))?.rolledOut, true);
});

test('a ManagedClusterAddOn without status yet is Unknown, not "not enabled"; a Lease under another name is no tunnel', () => {
  const forged: Lease = {
    ...tunnelLease('c1', 'gw-evil', 1),
    metadata: { ...tunnelLease('c1', 'x', 1).metadata, name: 'cluster-gateway-tunnel-c2' },
  };
  const [c1] = statusRows(
    sources({
      addons: { items: [{ metadata: { name: 'cluster-gateway', namespace: 'c1' } }] },
      tunnelLeases: { items: [forged] },
    }),
    probes,
    now,
  );
  assert.deepEqual(c1?.addon, { available: 'Unknown', reason: 'NoAvailableCondition' });
  assert.equal(c1?.tunnel, null);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  type AvailableReason,
  availableReasons,
  computeAvailable,
  type HealthObservations,
} from './available.ts';

const healthy: HealthObservations = {
  addonName: 'cluster-gateway',
  cluster: 'cluster1',
  workName: 'addon-cluster-gateway-deploy-0',
  agentDeployment: 'open-cluster-management-agent-addon/cluster-gateway-agent',
  managedCluster: { available: { status: 'True', reason: 'ManagedClusterAvailable', message: 'ok' } },
  work: { state: 'applied' },
  deployment: { state: 'available', availableReplicas: 1, replicas: 1 },
  heartbeat: { state: 'renewed', ageSeconds: 3 },
  gateway: { state: 'healthy' },
  heartbeatStaleSeconds: 12,
};

const table: {
  name: string;
  change: Partial<HealthObservations>;
  status: string;
  reason: AvailableReason | string;
  message: RegExp;
}[] = [
  {
    name: 'no ManagedCluster',
    change: { managedCluster: {} },
    status: 'False',
    reason: 'ManagedClusterNotFound',
    message: /ManagedCluster cluster1 does not exist/,
  },
  {
    name: 'cluster Unknown: mirrors OCM hub copy',
    change: {
      managedCluster: {
        available: {
          status: 'Unknown',
          reason: 'ManagedClusterLeaseUpdateStopped',
          message: 'Registration agent stopped updating its lease.',
        },
      },
    },
    status: 'Unknown',
    reason: 'ManagedClusterLeaseUpdateStopped',
    message: /^Registration agent stopped updating its lease\.$/,
  },
  {
    name: 'cluster False',
    change: {
      managedCluster: {
        available: { status: 'False', reason: 'Down', message: 'kube-apiserver /healthz failed' },
      },
    },
    status: 'False',
    reason: 'ManagedClusterUnavailable',
    message: /cluster1 is not available \(Down: kube-apiserver \/healthz failed\)/,
  },
  {
    name: 'no work',
    change: { work: { state: 'missing' } },
    status: 'Unknown',
    reason: 'WorkNotFound',
    message: /create ManifestWork cluster1\/addon-cluster-gateway-deploy-0/,
  },
  {
    name: 'agent without a hub credential: OCM halted its CSRs',
    change: {
      deployment: { state: 'unavailable', availableReplicas: 0, replicas: 1 },
      heartbeat: { state: 'never-renewed' },
      credential: {
        status: 'False',
        reason: 'ClientCertificateUpdateFailed',
        message: 'Stop creating csr since there are too many csr created already on hub',
      },
    },
    status: 'False',
    reason: 'AgentCredentialNotIssued',
    message:
      /waits for its hub credential.*too many csr.*kubectl get csr -l open-cluster-management.io\/cluster-name=cluster1/,
  },
  {
    name: 'work pending',
    change: { work: { state: 'pending' } },
    status: 'Unknown',
    reason: 'WorkNotApplied',
    message: /waiting for the work agent of cluster1 to apply/,
  },
  {
    name: 'work failed',
    change: { work: { state: 'failed', message: 'AppliedManifestWorkFailed: namespaces "x" is forbidden' } },
    status: 'False',
    reason: 'WorkApplyFailed',
    message: /failed to apply on cluster1: AppliedManifestWorkFailed: namespaces "x" is forbidden/,
  },
  {
    name: 'no feedback yet',
    change: { deployment: { state: 'no-feedback' } },
    status: 'Unknown',
    reason: 'AgentDeploymentNoFeedback',
    message: /waiting for the status of Deployment/,
  },
  {
    name: 'deployment unavailable and no fresh heartbeat (a crash loop): the Deployment is the cause',
    change: {
      deployment: {
        state: 'unavailable',
        availableReplicas: 0,
        replicas: 1,
        message: 'Deployment does not have minimum availability.',
      },
      heartbeat: { state: 'renewed', ageSeconds: 60 },
    },
    status: 'False',
    reason: 'AgentDeploymentUnavailable',
    message:
      /0\/1 available replicas \(Deployment does not have minimum availability\.\); check its pods there for an image pull error or a crash loop: kubectl -n open-cluster-management-agent-addon get pods/,
  },
  {
    name: 'deployment unavailable while the agent heartbeats (restarted, not yet Ready): the heartbeat decides',
    change: {
      deployment: { state: 'unavailable', availableReplicas: 0, replicas: 1 },
      heartbeat: { state: 'renewed', ageSeconds: 1 },
    },
    status: 'True',
    reason: 'AgentAvailable',
    message: /add-on is available/,
  },
  {
    name: 'no heartbeat Lease',
    change: { heartbeat: { state: 'missing' } },
    status: 'Unknown',
    reason: 'HeartbeatLeaseNotFound',
    message: /Lease cluster1\/cluster-gateway on the hub is missing/,
  },
  {
    name: 'never renewed',
    change: { heartbeat: { state: 'never-renewed' } },
    status: 'Unknown',
    reason: 'WaitingForFirstHeartbeat',
    message: /waiting for its first heartbeat/,
  },
  {
    name: 'stale heartbeat',
    change: { heartbeat: { state: 'renewed', ageSeconds: 40.4 } },
    status: 'False',
    reason: 'HeartbeatStale',
    message: /renewed its heartbeat 40s ago \(stale after 12s\)/,
  },
  {
    name: 'tunnel-only cluster whose tunnel is down',
    change: { gateway: { state: 'tunnel-disconnected', reason: 'no agent tunnel is connected' } },
    status: 'False',
    reason: 'TunnelDisconnected',
    message:
      /its tunnel to the cluster gateway is not connected.*endpoint type ClusterProxy.*cannot attach the tunnel/,
  },
  {
    name: 'the gateway serves no ClusterGateway of the cluster (no credential, no tunnel yet)',
    change: { gateway: { state: 'absent' } },
    status: 'False',
    reason: 'ClusterNotServedByGateway',
    message:
      /does not serve cluster1 yet: it has no credential Secret for it and no tunnel.*TUNNEL_TRUST_MODEL.*docs\/install\.md/,
  },
  {
    name: 'gateway cannot reach the cluster',
    change: { gateway: { state: 'unhealthy', reason: 'connect ECONNREFUSED 127.0.0.1:6443' } },
    status: 'False',
    reason: 'ClusterUnreachableFromGateway',
    message:
      /cannot reach the cluster: connect ECONNREFUSED 127\.0\.0\.1:6443 \(kubectl get clustergateway cluster1\)/,
  },
  {
    name: 'available',
    change: {},
    status: 'True',
    reason: 'AgentAvailable',
    message: /available: the agent on cluster1 renewed its heartbeat within the last 12s/,
  },
  {
    name: 'available, gateway not installed',
    change: { gateway: { state: 'unknown' } },
    status: 'True',
    reason: 'AgentAvailable',
    message: /available/,
  },
];

for (const row of table) {
  test(`Available: ${row.name} -> ${row.status} ${row.reason}`, () => {
    const v = computeAvailable({ ...healthy, ...row.change });
    assert.equal(v.status, row.status);
    assert.equal(v.reason, row.reason);
    assert.match(v.message, row.message);
  });
}

test('every declared reason appears in the table (each state has its own reason)', () => {
  const covered = new Set(table.map((r) => r.reason));
  for (const reason of availableReasons) assert.ok(covered.has(reason), `${reason} has no row`);
});

test('a stale heartbeat wins over a healthy gateway; a cluster problem wins over everything', () => {
  assert.equal(
    computeAvailable({ ...healthy, heartbeat: { state: 'renewed', ageSeconds: 13 } }).reason,
    'HeartbeatStale',
  );
  assert.equal(
    computeAvailable({
      ...healthy,
      work: { state: 'missing' },
      managedCluster: { available: { status: 'False', reason: 'x', message: 'y' } },
    }).reason,
    'ManagedClusterUnavailable',
  );
});

test('the Available message does not change with every renewal (no write per heartbeat)', () => {
  const a = computeAvailable({ ...healthy, heartbeat: { state: 'renewed', ageSeconds: 1 } });
  const b = computeAvailable({ ...healthy, heartbeat: { state: 'renewed', ageSeconds: 9 } });
  assert.deepEqual(a, b);
});

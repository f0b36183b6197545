import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  addonExists,
  agentRuns,
  agentState,
  type ClusterGateway,
  type HeartbeatLease,
  heartbeatFresh,
  type ManifestWork,
  tunnelUp,
  workApplied,
} from './agent.ts';
import { defaultLayout as l } from './model.ts';
import type { Read } from './reads.ts';

const now = Date.parse('2026-12-05T12:00:00Z');
const found = <T>(value: T): Read<T> => ({ state: 'found', value, hubTime: now });
const agentAt = { namespace: 'open-cluster-management-agent-addon', name: 'cluster-gateway-agent' };

function work(feedback: Record<string, number> | undefined, applied = 'True'): ManifestWork {
  return {
    metadata: { name: 'addon-cluster-gateway-deploy-0', generation: 1 },
    spec: { workload: { manifests: [{ kind: 'Deployment', metadata: agentAt }] } },
    status: {
      conditions: [{ type: 'Applied', status: applied, reason: 'R', message: 'm', observedGeneration: 1 }],
      resourceStatus: {
        manifests: [
          {
            resourceMeta: { kind: 'Deployment', ...agentAt },
            statusFeedback: {
              values: Object.entries(feedback ?? {}).map(([name, integer]) => ({
                name,
                fieldValue: { integer },
              })),
            },
          },
        ],
      },
    },
  };
}
const heartbeat = (secondsAgo: number): Read<HeartbeatLease> =>
  found({
    metadata: { name: 'cluster-gateway' },
    spec: { holderIdentity: 'agent-pod', renewTime: new Date(now - secondsAgo * 1000).toISOString() },
  });
const gateway = (type: string, connected?: boolean, healthy = true): ClusterGateway => ({
  metadata: { name: 'c1' },
  spec: { access: { endpoint: { type } } },
  status: {
    healthy,
    ...(healthy ? {} : { healthyReason: 'dial tcp: connection refused' }),
    ...(connected === undefined ? {} : { tunnel: { connected } }),
  },
});

test('no addon: enable it, unless a credential Secret serves the cluster (then the agent checks do not apply)', () => {
  const missing: Read<never> = { state: 'missing', hubTime: now };
  const v = addonExists('c1', missing, undefined, l);
  assert.equal(v.result, 'fail');
  assert.equal(v.fix, 'clusteradm addon enable --names cluster-gateway --clusters c1');
  const secret = addonExists('c1', missing, gateway('Const'), l);
  assert.deepEqual([secret.result, secret.cascade], ['skipped', true]);
  assert.equal(addonExists('c1', missing, gateway('ClusterProxy'), l).result, 'fail');
});

test('ManifestWork: missing, failed, not yet applied, applied', () => {
  assert.match(workApplied('c1', found({ items: [] }), l).message, /no ManifestWork/);
  assert.match(
    workApplied('c1', found({ items: [work({}, 'False')] }), l).message,
    /failed to apply it: R: m/,
  );
  assert.match(workApplied('c1', found({ items: [work({}, 'Unknown')] }), l).message, /not applied yet/);
  assert.equal(workApplied('c1', found({ items: [work({})] }), l).result, 'pass');
});

test('the agent Deployment from the status feedback, as the manager reads it', () => {
  assert.deepEqual(agentState(work({ Replicas: 1, AvailableReplicas: 1 }), agentAt.namespace, agentAt.name), {
    state: 'available',
    available: 1,
    replicas: 1,
  });
  assert.equal(agentState(work({}), agentAt.namespace, agentAt.name).state, 'no-feedback');
  assert.equal(
    agentState(work({ Replicas: 0, AvailableReplicas: 0 }), agentAt.namespace, agentAt.name).state,
    'unavailable',
  );
});

test('agent stopped: scaled to 0 fails with the scale command; a fresh heartbeat outweighs a lagging count', () => {
  const works = found({ items: [work({ Replicas: 0, AvailableReplicas: 0 })] });
  const stopped = agentRuns('c1', works, undefined, heartbeat(30), l);
  assert.equal(stopped.result, 'fail');
  assert.match(stopped.message, /scaled to 0/);
  assert.match(stopped.fix ?? '', /scale deployment\/cluster-gateway-agent --replicas=1 {3}# on c1/);
  assert.equal(agentRuns('c1', works, undefined, heartbeat(2), l).result, 'pass');
  const crashing = agentRuns(
    'c1',
    found({ items: [work({ Replicas: 1, AvailableReplicas: 0 })] }),
    undefined,
    heartbeat(30),
    l,
  );
  assert.match(crashing.message, /0\/1 available replicas/);
});

test('heartbeat: fresh within 12 s by the hub clock, stale after; with the gateway also failing, the apiserver is named', () => {
  assert.equal(heartbeatFresh('c1', heartbeat(11), agentAt, gateway('Const'), l).result, 'pass');
  const stale = heartbeatFresh('c1', heartbeat(13), agentAt, gateway('Const'), l);
  assert.equal(stale.result, 'fail');
  assert.match(stale.message, /13s ago \(stale after 12s\)/);
  assert.equal(stale.object, 'lease c1/cluster-gateway');
  const apiserver = heartbeatFresh('c1', heartbeat(20), agentAt, gateway('Const', undefined, false), l);
  assert.match(apiserver.message, /managed kube-apiserver is down/);
  assert.equal(apiserver.object, 'the kube-apiserver of c1');
  assert.match(
    heartbeatFresh('c1', { state: 'missing', hubTime: now }, agentAt, undefined, l).message,
    /missing/,
  );
});

test('tunnel: needed only for ClusterProxy', () => {
  assert.equal(tunnelUp('c1', found(gateway('Const')), agentAt).result, 'pass');
  assert.equal(tunnelUp('c1', found(gateway('ClusterProxy', true)), agentAt).result, 'pass');
  const down = tunnelUp('c1', found(gateway('ClusterProxy', false)), agentAt);
  assert.equal(down.result, 'fail');
  assert.match(down.message, /tunnel is not connected/);
  assert.match(tunnelUp('c1', { state: 'missing', hubTime: now }, agentAt).message, /does not serve c1/);
});

test('a caller who may not read the ManifestWorks gets the agent check as not checked, not failed', () => {
  const v = agentRuns(
    'c1',
    { state: 'forbidden', permission: 'list manifestworks in c1', message: '' },
    undefined,
    heartbeat(2),
    l,
  );
  assert.equal(v.result, 'skipped');
  assert.match(v.message, /you may not list manifestworks in c1/);
});

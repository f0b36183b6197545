import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type ClusterGatewayView, observeGateway } from './observe.ts';

const gateway = (view: Partial<ClusterGatewayView>): ClusterGatewayView => ({
  apiVersion: 'cluster.core.oam.dev/v1alpha1',
  kind: 'ClusterGateway',
  metadata: { name: 'c1' },
  ...view,
});

test('observeGateway: the tunnel of a ClusterProxy cluster down is its own state; otherwise health decides', () => {
  const proxy = { access: { endpoint: { type: 'ClusterProxy' } } };
  assert.deepEqual(
    observeGateway(
      gateway({
        spec: proxy,
        status: {
          healthy: false,
          healthyReason: 'no agent tunnel is connected',
          tunnel: { connected: false },
        },
      }),
      true,
    ),
    { state: 'tunnel-disconnected', reason: 'no agent tunnel is connected' },
  );
  assert.deepEqual(
    observeGateway(gateway({ spec: proxy, status: { healthy: true, tunnel: { connected: true } } }), true),
    { state: 'healthy' },
  );
  // A Const cluster whose attached agent is gone is not tunnel-only: its health speaks.
  assert.deepEqual(
    observeGateway(
      gateway({
        spec: { access: { endpoint: { type: 'Const' } } },
        status: { healthy: false, healthyReason: 'timeout', tunnel: { connected: false } },
      }),
      true,
    ),
    { state: 'unhealthy', reason: 'timeout' },
  );
  assert.deepEqual(
    observeGateway(gateway({ spec: proxy, status: { tunnel: { connected: false } } }), false),
    {
      state: 'unknown',
    },
  );
  // Served, and no ClusterGateway of the cluster: the gateway has no way in; not served: no opinion.
  assert.deepEqual(observeGateway(undefined, true), { state: 'absent' });
  assert.deepEqual(observeGateway(undefined, false), { state: 'unknown' });
});

import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import type { TunnelEndpoint } from '../clusters/cluster.ts';
import type { TunnelHolder } from './leases.ts';
import { ReplicaRouter } from './replicas.ts';

function setup() {
  const endpoints = new Map<string, { endpoint: TunnelEndpoint }>();
  const leases: string[] = [];
  const remote = new Map<string, TunnelHolder>();
  const dialed: string[] = [];
  const router = new ReplicaRouter({
    sink: {
      setTunnelRoute(cluster, endpoint) {
        if (endpoint) endpoints.set(cluster, { endpoint });
        else endpoints.delete(cluster);
      },
    },
    leases: {
      hold: (c) => void leases.push(`hold ${c}`),
      release: (c) => void leases.push(`release ${c}`),
    },
    remote: (c) => remote.get(c),
    dialPeer: async (address, replica, cluster, kind) => {
      dialed.push(`${address} ${replica} ${cluster} ${kind}`);
      return new PassThrough();
    },
  });
  return { router, endpoints, leases, remote, dialed };
}

const local: TunnelEndpoint = {
  type: 'ClusterProxy',
  serverName: 'kubernetes.default.svc',
  insecure: false,
  dial: async () => new PassThrough(),
};

test("this replica's own tunnel wins and holds the Lease; when it goes, the other replica's is used", async () => {
  const { router, endpoints, leases, remote, dialed } = setup();
  remote.set('c1', { cluster: 'c1', replica: 'gw-a', address: 'a:9444', durationSeconds: 10 });
  router.setTunnel('c1', local, { replica: 'gw-b' });
  assert.equal(endpoints.get('c1')?.endpoint, local);
  assert.deepEqual(leases, ['hold c1']);
  router.setTunnel('c1', undefined);
  assert.deepEqual(leases, ['hold c1', 'release c1']);
  // Routes only: which replica holds it shows from its Lease (leases.test.ts, tunnelLeaseRecord).
  const forwarded = endpoints.get('c1');
  await forwarded?.endpoint.dial('impersonate');
  await forwarded?.endpoint.dial();
  assert.deepEqual(dialed, ['a:9444 gw-a c1 impersonate', 'a:9444 gw-a c1 relay']);
});

test('the forwarding endpoint stays the same object while the holder stays (connection pools stay), and goes with the Lease', () => {
  const { router, endpoints, remote } = setup();
  remote.set('c1', { cluster: 'c1', replica: 'gw-a', address: 'a:9444', durationSeconds: 10 });
  router.update('c1');
  const first = endpoints.get('c1')?.endpoint;
  router.update('c1');
  assert.equal(endpoints.get('c1')?.endpoint, first);
  remote.set('c1', { cluster: 'c1', replica: 'gw-c', address: 'c:9444', durationSeconds: 10 });
  router.update('c1');
  assert.notEqual(endpoints.get('c1')?.endpoint, first);
  remote.delete('c1');
  router.update('c1');
  assert.equal(endpoints.has('c1'), false, 'no live Lease, no local tunnel: no endpoint (503 at once)');
});

test('a release without a hold writes nothing', () => {
  const { router, leases } = setup();
  router.setTunnel('c9', undefined);
  assert.deepEqual(leases, []);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { leaseName } from '../../../manager/gateway/tunnel/leases.ts';
import type { KubeList } from '../../../shared/kube/client.ts';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import { collections, listSources, tunnelLeaseName } from './sources.ts';

test('every collection is listed once, for all clusters at once (no per-cluster request)', async () => {
  const paths: string[] = [];
  const sources = await listSources({
    list: async <T>(p: string) => {
      paths.push(p);
      return { metadata: {}, items: [] } as unknown as KubeList<T & never>;
    },
  } as never);
  assert.equal(paths.length, collections.length);
  assert.ok(
    paths.every((p) => !p.includes('/namespaces/')),
    `cluster-wide lists: ${paths.join(', ')}`,
  );
  assert.deepEqual(Object.keys(sources).sort(), collections.map((c) => c.key).sort());
});

test('a forbidden list is kept as a failure naming the missing permission; the others still list', async () => {
  let gatewaysSeen = false;
  const sources = await listSources(
    {
      list: async (p: string) => {
        if (p.includes('managedclusteraddons'))
          throw new StatusError(failureStatus(403, 'forbidden: User "u" cannot list'));
        if (p.includes('clustergateways')) return { metadata: {}, items: [{ metadata: { name: 'c1' } }] };
        return { metadata: {}, items: [] };
      },
    } as never,
    (g) => {
      gatewaysSeen = 'items' in g && g.items.length === 1;
    },
  );
  assert.deepEqual(sources.addons, {
    failure: {
      resource: 'managedclusteraddons.addon.open-cluster-management.io',
      word: 'forbidden',
      missingPermission: 'list managedclusteraddons.addon.open-cluster-management.io in all namespaces',
      message: 'forbidden: User "u" cannot list',
      connection: false,
    },
  });
  assert.deepEqual(sources.managedClusters, { items: [] });
  assert.ok(gatewaysSeen, 'the ClusterGateways are handed on as soon as they are listed');
});

test('no answer at all from the hub is a connection failure', async () => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
  const sources = await listSources({ list: async () => Promise.reject(refused) } as never);
  assert.ok('failure' in sources.gateways && sources.gateways.failure.connection);
  assert.ok('failure' in sources.gateways && sources.gateways.failure.word === 'unreachable');
});

test("the tunnel Lease name is the gateway's, short and long (hashed) names alike", () => {
  for (const cluster of ['c1', 'a.b-c', `x${'y'.repeat(240)}`]) {
    assert.equal(tunnelLeaseName(cluster), leaseName(cluster), cluster);
  }
  assert.ok(tunnelLeaseName(`x${'y'.repeat(240)}`).length <= 253);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeList, KubeObject, WatchEvent } from '../../../shared/kube/client.ts';
import type { InformerClient } from '../../../shared/kube/informer.ts';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import {
  ManagedClusterSource,
  managedClusterHealth,
  parseManagedCluster,
  trustedManagedClusterHealth,
} from './managedcluster-source.ts';
import { caPem, managedCluster } from './test-fixtures.ts';

test('address and CA come from the first client config; health from Available', () => {
  const info = parseManagedCluster(
    managedCluster('spoke', {
      url: 'https://spoke:6443',
      ca: caPem,
      available: 'True',
      labels: { env: 'prod' },
    }),
  );
  assert.equal(info.address, 'https://spoke:6443');
  assert.equal(info.caBundle, caPem);
  assert.deepEqual(info.health, { healthy: true, reason: 'ManagedClusterAvailable' });
  assert.deepEqual(info.labels, { env: 'prod' });
  assert.equal(info.creationTimestamp, '2025-12-01T00:00:00Z');
});

test('no client config, or a bad URL, is an address problem', () => {
  assert.match(
    parseManagedCluster(managedCluster('a')).addressProblem ?? '',
    /no spec.managedClusterClientConfigs\[0\].url/,
  );
  assert.match(parseManagedCluster(managedCluster('a', { url: 'ftp://x' })).addressProblem ?? '', /https/);
});

test('only an accepted, joined ManagedCluster with an https URL provides an address and CA', () => {
  const trusted = parseManagedCluster(managedCluster('a', { url: 'https://a', ca: caPem }));
  assert.equal(trusted.distrust, undefined);
  assert.equal(trusted.address, 'https://a');
  const notAccepted = parseManagedCluster(
    managedCluster('a', { url: 'https://a', ca: caPem, hubAcceptsClient: false }),
  );
  assert.match(notAccepted.distrust ?? '', /not accepted by the hub \(spec.hubAcceptsClient is not true\)/);
  assert.equal(notAccepted.address, undefined);
  assert.equal(notAccepted.caBundle, undefined);
  for (const joined of ['False', 'Unknown', 'missing'] as const) {
    const info = parseManagedCluster(managedCluster('a', { url: 'https://a', ca: caPem, joined }));
    assert.match(info.distrust ?? '', new RegExp(`has not joined \\(ManagedClusterJoined is ${joined}\\)`));
    assert.equal(info.address, undefined);
  }
  for (const url of ['http://a:8080', 'HTTP://a']) {
    const http = parseManagedCluster(managedCluster('a', { url, ca: caPem }));
    assert.equal(http.distrust, undefined);
    assert.equal(http.address, undefined, url);
    assert.equal(http.caBundle, undefined, url);
    assert.match(http.addressProblem ?? '', /must be https:\/\//);
  }
  // Without a scheme, like client-go: https.
  assert.equal(parseManagedCluster(managedCluster('a', { url: 'a:6443' })).address, 'https://a:6443');
});

test('an untrusted ManagedCluster has no say in health', () => {
  const unavailable = { url: 'https://a', available: 'False' } as const;
  assert.equal(
    trustedManagedClusterHealth(managedCluster('a', { ...unavailable, hubAcceptsClient: false })),
    undefined,
  );
  assert.equal(
    trustedManagedClusterHealth(managedCluster('a', { ...unavailable, joined: 'missing' })),
    undefined,
  );
  assert.equal(trustedManagedClusterHealth(managedCluster('a', unavailable))?.healthy, false);
});

test('Available False, Unknown and missing are unhealthy with a reason', () => {
  assert.deepEqual(managedClusterHealth(managedCluster('a', { available: 'False' }).status?.conditions), {
    healthy: false,
    reason: 'ManagedClusterLeaseUpdateStopped: Registration agent stopped updating its lease.',
  });
  assert.deepEqual(managedClusterHealth([{ type: 'ManagedClusterConditionAvailable', status: 'Unknown' }]), {
    healthy: false,
    reason: 'ManagedClusterConditionAvailable=Unknown',
  });
  assert.deepEqual(managedClusterHealth([]), {
    healthy: false,
    reason: 'ManagedCluster has no ManagedClusterConditionAvailable condition',
  });
});

test('without the ManagedCluster CRD the source is synced and absent, then picks clusters up', async () => {
  let lists = 0;
  const client: InformerClient = {
    list: async <T extends KubeObject>(path: string) => {
      assert.match(path, /^\/apis\/cluster.open-cluster-management.io\/v1\/managedclusters\?/);
      if (lists++ === 0)
        throw new StatusError(failureStatus(404, 'the server could not find the requested resource'));
      return {
        metadata: { resourceVersion: '2' },
        items: [managedCluster('spoke', { url: 'https://s' })],
      } as KubeList<T>;
    },
    watch: async function* <T extends KubeObject>(
      _path: string,
      signal?: AbortSignal,
    ): AsyncGenerator<WatchEvent<T>> {
      await new Promise((resolve) => signal?.addEventListener('abort', resolve, { once: true }));
    },
  };
  const seen: string[] = [];
  const source = new ManagedClusterSource(
    client,
    { informer: { sleep: async () => {} } },
    { setManagedCluster: (name, info) => seen.push(`${name}:${info?.address ?? 'deleted'}`) },
  );
  source.start();
  await source.informer.synced;
  const deadline = Date.now() + 2000;
  while (seen.length === 0 && Date.now() < deadline) await new Promise((resolve) => setImmediate(resolve));
  source.stop();
  assert.equal(source.hasSynced, true);
  assert.equal(source.absent, false);
  assert.deepEqual(seen, ['spoke:https://s']);
});

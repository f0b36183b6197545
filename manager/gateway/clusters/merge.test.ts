import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TunnelEndpoint } from './cluster.ts';
import { connectionKey } from './connection-key.ts';
import { parseManagedCluster } from './managedcluster-source.ts';
import { mergeCluster } from './merge.ts';
import { parseClusterSecret } from './secret-source.ts';
import { caPem, managedCluster, secret } from './test-fixtures.ts';

const tokenSecret = (
  data: Record<string, string>,
  labels?: Record<string, string>,
  annotations?: Record<string, string>,
) =>
  parseClusterSecret(
    secret(
      'c1',
      { token: 'tok', ...data },
      { 'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken', ...labels },
      annotations,
    ),
  );

const tunnel: TunnelEndpoint = {
  type: 'ClusterProxy',
  serverName: 'kubernetes.default.svc',
  insecure: false,
  dial: async () => {
    throw new Error('not in tests');
  },
};

test('a Secret alone: Const endpoint, insecure without CA, credential, default health', () => {
  const merged = mergeCluster({ name: 'c1', secret: tokenSecret({ endpoint: 'https://h:6443' }) });
  assert.deepEqual(merged?.endpoint, { type: 'Const', address: 'https://h:6443', insecure: true });
  assert.deepEqual(merged?.credential, { type: 'ServiceAccountToken', token: 'tok' });
  assert.deepEqual(merged?.health, { healthy: false });
  assert.equal(merged?.problem, undefined);
  assert.match(merged?.connectionKey ?? '', /^[0-9a-f]{64}$/);
  const withCa = mergeCluster({
    name: 'c1',
    secret: tokenSecret({ endpoint: 'https://h', 'ca.crt': caPem, 'proxy-url': 'http://p:3128' }),
  });
  assert.deepEqual(withCa?.endpoint, {
    type: 'Const',
    address: 'https://h',
    insecure: false,
    caBundle: caPem,
    proxyUrl: 'http://p:3128',
  });
});

test('no Secret and no tunnel: no cluster, even with a ManagedCluster', () => {
  assert.equal(mergeCluster({ name: 'c1' }), undefined);
  assert.equal(
    mergeCluster({ name: 'c1', managed: parseManagedCluster(managedCluster('c1', { url: 'https://m' })) }),
    undefined,
  );
});

test('OCM: the ManagedCluster endpoint wins, the Secret still gives credential and proxy', () => {
  const merged = mergeCluster({
    name: 'c1',
    secret: tokenSecret({ 'proxy-url': 'socks5://p:1080' }, { team: 'a' }),
    managed: parseManagedCluster(
      managedCluster('c1', {
        url: 'https://m:6443',
        ca: caPem,
        available: 'True',
        labels: { team: 'b', env: 'prod' },
      }),
    ),
  });
  assert.deepEqual(merged?.endpoint, {
    type: 'Const',
    address: 'https://m:6443',
    insecure: false,
    caBundle: caPem,
    proxyUrl: 'socks5://p:1080',
  });
  assert.equal(merged?.problem, undefined, 'the Secret needs no endpoint when the ManagedCluster has one');
  assert.deepEqual(merged?.labels, {
    team: 'a',
    env: 'prod',
    'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken',
  });
  assert.deepEqual(merged?.health, { healthy: true, reason: 'ManagedClusterAvailable' });
  assert.equal(merged?.creationTimestamp, '2026-01-02T03:04:05Z');
});

test('OCM without a usable client config falls back to the Secret endpoint', () => {
  const merged = mergeCluster({
    name: 'c1',
    secret: tokenSecret({ endpoint: 'https://s' }),
    managed: parseManagedCluster(managedCluster('c1')),
  });
  assert.equal(merged?.endpoint?.type === 'Const' && merged.endpoint.address, 'https://s');
});

test('health precedence: prober overlay, then Secret annotations, then ManagedCluster', () => {
  const secretInfo = tokenSecret(
    { endpoint: 'https://s' },
    {},
    {
      'status.cluster.core.oam.dev/healthy': 'false',
      'status.cluster.core.oam.dev/healthy-reason': 'ConnectionTimeout',
    },
  );
  const managed = parseManagedCluster(managedCluster('c1', { available: 'True' }));
  assert.deepEqual(mergeCluster({ name: 'c1', secret: secretInfo, managed })?.health, {
    healthy: false,
    reason: 'ConnectionTimeout',
  });
  assert.deepEqual(
    mergeCluster({ name: 'c1', secret: secretInfo, managed, health: { healthy: true } })?.health,
    { healthy: true },
  );
  assert.deepEqual(mergeCluster({ name: 'c1', secret: tokenSecret({}), managed })?.health.healthy, true);
});

test('problems are collected, never thrown', () => {
  const noEndpoint = mergeCluster({ name: 'c1', secret: tokenSecret({}) });
  assert.equal(noEndpoint?.endpoint, undefined);
  assert.equal(noEndpoint?.problem, 'data key endpoint is missing');
  const badBoth = mergeCluster({
    name: 'c1',
    secret: parseClusterSecret(
      secret(
        'c1',
        { endpoint: 'https://h', 'ca.crt': 'junk' },
        { 'cluster.core.oam.dev/cluster-credential-type': 'X509Certificate' },
      ),
    ),
  });
  assert.equal(
    badBoth?.problem,
    'data key ca.crt is not a PEM certificate; credential type X509Certificate needs data key tls.crt and tls.key',
  );
  const clusterProxy = mergeCluster({
    name: 'c1',
    secret: tokenSecret({}, { 'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy' }),
  });
  assert.match(clusterProxy?.problem ?? '', /no agent tunnel is connected/);
});

test('a tunnel provides the endpoint; alone it lists the cluster with a credential problem', () => {
  const input = { endpoint: tunnel, generation: 1, connectedAt: '2026-03-01T00:00:00Z' };
  const withSecret = mergeCluster({
    name: 'c1',
    secret: tokenSecret(
      { endpoint: 'https://ignored' },
      { 'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy' },
    ),
    tunnel: input,
  });
  assert.equal(withSecret?.endpoint, tunnel);
  assert.equal(withSecret?.problem, undefined);
  const alone = mergeCluster({ name: 'c1', tunnel: input });
  assert.equal(alone?.endpoint, tunnel);
  assert.equal(alone?.credential, undefined);
  assert.equal(alone?.creationTimestamp, '2026-03-01T00:00:00Z');
  assert.match(alone?.problem ?? '', /no credential Secret named "c1"/);
});

test('connectionKey changes with the credential, the CA and the tunnel generation only', () => {
  const ep = { type: 'Const' as const, address: 'https://h', insecure: true };
  const a = connectionKey(ep, { type: 'ServiceAccountToken', token: 'one' });
  assert.equal(a, connectionKey({ ...ep }, { type: 'ServiceAccountToken', token: 'one' }));
  assert.notEqual(a, connectionKey(ep, { type: 'ServiceAccountToken', token: 'two' }));
  assert.notEqual(
    a,
    connectionKey({ ...ep, insecure: false, caBundle: caPem }, { type: 'ServiceAccountToken', token: 'one' }),
  );
  assert.notEqual(connectionKey(tunnel, undefined, 1), connectionKey(tunnel, undefined, 2));
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { renderClusterGateway, renderClusterGatewayList } from './clustergateway.ts';
import { caPem, certPem, keyPem, target, token } from './test-fixtures.ts';
import { uidFromName } from './uid.ts';

/** No rendering may contain any of these, in any encoding. */
function assertNoSecrets(value: unknown) {
  const text = JSON.stringify(value);
  for (const secret of [token, certPem, keyPem, 'MIIBfakeLeaf', 'MIIBfakeKey', 'PRIVATE KEY', 'pw@']) {
    assert.ok(!text.includes(secret), `rendered object contains ${secret}`);
    assert.ok(
      !text.includes(Buffer.from(secret).toString('base64')),
      `rendered object contains base64 of ${secret}`,
    );
  }
}

test('renders the Go wire shape: Const endpoint with base64 caBundle, credential type only', () => {
  const gateway = renderClusterGateway(
    target('prod', {
      labels: { 'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken', env: 'prod' },
      annotations: { 'cluster.core.oam.dev/cluster-alias': 'p' },
      health: { healthy: true, reason: 'ok' },
    }),
  );
  assert.deepEqual(gateway, {
    apiVersion: 'cluster.core.oam.dev/v1alpha1',
    kind: 'ClusterGateway',
    metadata: {
      name: 'prod',
      uid: uidFromName('prod'),
      resourceVersion: '100',
      creationTimestamp: '2026-01-01T00:00:00Z',
      labels: { 'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken', env: 'prod' },
      annotations: { 'cluster.core.oam.dev/cluster-alias': 'p' },
    },
    spec: {
      provider: '',
      access: {
        endpoint: {
          type: 'Const',
          const: { address: 'https://prod:6443', caBundle: Buffer.from(caPem).toString('base64') },
        },
        credential: { type: 'ServiceAccountToken' },
      },
    },
    status: { healthy: true, healthyReason: 'ok' },
  });
  assertNoSecrets(gateway);
});

test('never renders X509 material, a proxy password or secret-ish annotations', () => {
  const gateway = renderClusterGateway(
    target('edge', {
      credential: { type: 'X509Certificate', certificate: certPem, privateKey: keyPem },
      endpoint: {
        type: 'Const',
        address: 'https://edge',
        insecure: true,
        proxyUrl: 'http://user:pw@proxy:3128',
      },
      annotations: { 'kubectl.kubernetes.io/last-applied-configuration': `{"data":{"tls.key":"${keyPem}"}}` },
    }),
  );
  assert.deepEqual(gateway.spec.access, {
    endpoint: {
      type: 'Const',
      const: { address: 'https://edge', insecure: true, 'proxy-url': 'http://user:xxxxx@proxy:3128' },
    },
    credential: { type: 'X509Certificate' },
  });
  assert.equal(gateway.metadata.annotations, undefined);
  assertNoSecrets(gateway);
});

test('tunnel endpoints render as ClusterProxy without address; problems make the cluster unhealthy', () => {
  const viaTunnel = renderClusterGateway(
    target('t', {
      endpoint: {
        type: 'ClusterProxy',
        serverName: 'kubernetes',
        insecure: false,
        dial: async () => Promise.reject(new Error()),
      },
    }),
  );
  assert.deepEqual(viaTunnel.spec.access.endpoint, { type: 'ClusterProxy' });

  const broken = renderClusterGateway(
    target('b', {
      endpoint: undefined,
      credential: undefined,
      labels: {
        'cluster.core.oam.dev/cluster-credential-type': 'X509Certificate',
        'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy',
      },
      problem: 'endpoint type is ClusterProxy but no agent tunnel is connected for this cluster',
      health: { healthy: true },
    }),
  );
  assert.deepEqual(broken.spec.access, {
    endpoint: { type: 'ClusterProxy' },
    credential: { type: 'X509Certificate' },
  });
  assert.deepEqual(broken.status, { healthy: false, healthyReason: broken.status.healthyReason });
  assert.match(broken.status.healthyReason ?? '', /no agent tunnel/);

  const bare = renderClusterGateway(
    target('x', { endpoint: undefined, credential: undefined, labels: {}, creationTimestamp: '' }),
  );
  assert.deepEqual(bare.spec.access, { endpoint: { type: 'Const' } });
  assert.equal(bare.metadata.creationTimestamp, null);
  assert.equal(bare.metadata.labels, undefined);
});

test('lists carry the directory version; uids are stable UUIDv5 per name', () => {
  const list = renderClusterGatewayList([target('a'), target('b')], '555');
  assert.equal(list.kind, 'ClusterGatewayList');
  assert.deepEqual(list.metadata, { resourceVersion: '555' });
  assert.deepEqual(
    list.items.map((i) => i.metadata.name),
    ['a', 'b'],
  );
  assertNoSecrets(list);
  assert.equal(uidFromName('a'), uidFromName('a'));
  assert.notEqual(uidFromName('a'), uidFromName('b'));
  assert.match(uidFromName('a'), /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
});

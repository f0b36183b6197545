import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertClusterName, clusterProxyPath, clusterServer, rewriteToCluster } from './cluster-path.ts';

const proxy = (c: string) => `/apis/cluster.core.oam.dev/v1alpha1/clustergateways/${c}/proxy`;

test('the proxy path of a cluster, dots and dashes kept in one segment', () => {
  assert.equal(clusterProxyPath('cluster1'), proxy('cluster1'));
  assert.equal(clusterProxyPath('prod.eu-west.example.com'), proxy('prod.eu-west.example.com'));
});

test('a name that cannot be a ClusterGateway is refused with a clear error', () => {
  for (const bad of ['', 'Cluster1', 'a/b', '..', '.', '-a', 'a-', 'a..b', 'a b', 'a%2Fb', 'x'.repeat(254)]) {
    assert.throws(() => clusterProxyPath(bad), /cluster name|DNS-1123/, bad);
  }
  assert.throws(() => assertClusterName(undefined), /non-empty string/);
});

test('a hub server moves under the proxy, keeping its own path prefix', () => {
  assert.equal(clusterServer('https://hub:6443', 'c.1'), `https://hub:6443${proxy('c.1')}`);
  assert.equal(clusterServer('https://hub:6443/', 'c1'), `https://hub:6443${proxy('c1')}`);
  assert.equal(clusterServer('https://lb/k8s/hub/', 'c1'), `https://lb/k8s/hub${proxy('c1')}`);
  assert.throws(() => clusterServer('https://hub?x=1', 'c1'), /no query/);
});

test('a request URL built against the hub is rewritten to the cluster, query kept', () => {
  assert.equal(
    rewriteToCluster('https://hub:6443/api/v1/namespaces/default/pods?limit=5&labelSelector=a%3Db', 'c.2'),
    `https://hub:6443${proxy('c.2')}/api/v1/namespaces/default/pods?limit=5&labelSelector=a%3Db`,
  );
  assert.equal(
    rewriteToCluster('https://hub/apis/apps/v1/deployments', 'c2'),
    `https://hub${proxy('c2')}/apis/apps/v1/deployments`,
  );
  assert.equal(rewriteToCluster('https://hub/version', 'c2'), `https://hub${proxy('c2')}/version`);
});

test('a hub behind a path prefix: found before the API path, or exactly from the hub server given', () => {
  assert.equal(
    rewriteToCluster('https://lb/k8s/hub/api/v1/pods', 'c1'),
    `https://lb/k8s/hub${proxy('c1')}/api/v1/pods`,
  );
  // A prefix that itself looks like an API path is only right with the hub's server.
  assert.equal(
    rewriteToCluster('https://lb/api/hub/api/v1/pods', 'c1', 'https://lb/api/hub'),
    `https://lb/api/hub${proxy('c1')}/api/v1/pods`,
  );
  assert.throws(() => rewriteToCluster('https://other/x/api/v1', 'c1', 'https://lb/api/hub'), /not a URL of/);
  assert.throws(() => rewriteToCluster('https://hub/nothing/known', 'c1'), /pass the hub/);
});

test('a URL already going to a cluster goes to the chosen one instead (the per-call choice wins)', () => {
  assert.equal(
    rewriteToCluster(`https://hub${proxy('c1')}/api/v1/pods`, 'c.2'),
    `https://hub${proxy('c.2')}/api/v1/pods`,
  );
  assert.equal(
    rewriteToCluster(`https://hub${proxy('c1')}/api/v1/pods`, 'c2', 'https://hub'),
    `https://hub${proxy('c2')}/api/v1/pods`,
  );
});

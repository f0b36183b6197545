/**
 * The ClusterGateway API through the hub's real kube-aggregator: kubectl
 * get (table, yaml), explain, api-resources, selectors and watch, and no
 * secret material in any response.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { waitFor } from '../hack/localenv/wait.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import { applyClusterSecret, gatewayToken, secretPath } from './support/credentials.ts';
import { environmentState, hubClient } from './support/environment.ts';
import { kubectl } from './support/kubectl.ts';

let hub: KubeClient;
let kubeconfig: string;

before(async () => {
  hub = await hubClient();
  kubeconfig = environmentState().hub.kubeconfig;
});
after(() => hub.close());

test('kubectl get clustergateways lists every managed cluster in a table', async () => {
  const out = await kubectl(kubeconfig, 'get', 'clustergateways');
  const [header, ...rows] = out.trim().split('\n');
  assert.match(header ?? '', /^NAME\s+PROVIDER\s+CREDENTIAL-TYPE\s+ENDPOINT-TYPE\s+HEALTHY\s+AGE/);
  for (const cluster of environmentState().managed) {
    const row = rows.find((r) => r.startsWith(`${cluster.name} `));
    assert.ok(row, `${cluster.name} listed`);
    assert.match(row, /ServiceAccountToken\s+Const\s+true\s+\d+[smh]/);
  }
});

test('kubectl get -o yaml shows the endpoint but never a token or key', async () => {
  const token = await gatewayToken(hub, 'cluster1');
  assert.ok(token.length > 20, 'the credential Secret holds a token');
  const yaml = await kubectl(kubeconfig, 'get', 'clustergateways', '-o', 'yaml');
  const cluster1 = environmentState().managed.find((c) => c.name === 'cluster1');
  assert.ok(yaml.includes(`address: ${cluster1?.reachableServer}`), yaml);
  assert.match(yaml, /type: ServiceAccountToken/);
  assert.ok(!yaml.includes(token), 'token absent');
  assert.ok(!/serviceAccountToken|privateKey|BEGIN .*PRIVATE KEY/.test(yaml), 'no credential fields');
});

test('kubectl explain and api-resources work through the aggregator', async () => {
  // The hub aggregates a new APIService's OpenAPI asynchronously: allow it a moment after start-up.
  const explain = await waitFor('kubectl explain to find clustergateways', () =>
    kubectl(kubeconfig, 'explain', 'clustergateway.spec.access.endpoint').catch(() => undefined),
  );
  assert.match(explain, /KIND:\s+ClusterGateway/);
  assert.match(explain, /const\s+<.+>/);
  const resources = await kubectl(kubeconfig, 'api-resources', '--api-group=cluster.core.oam.dev');
  assert.match(resources, /clustergateways\s+cluster\.core\.oam\.dev\/v1alpha1\s+false\s+ClusterGateway/);
});

test('label and field selectors filter, and a bad selector is a 400 that says why', async () => {
  const byName = await kubectl(
    kubeconfig,
    'get',
    'clustergateways',
    '--field-selector=metadata.name=cluster2',
    '-o',
    'name',
  );
  assert.equal(byName.trim(), 'clustergateway.cluster.core.oam.dev/cluster2');
  const byLabel = await kubectl(
    kubeconfig,
    'get',
    'clustergateways',
    '-l',
    'cluster.core.oam.dev/cluster-credential-type=X509Certificate',
    '-o',
    'name',
  );
  assert.equal(byLabel.trim(), '');
  await assert.rejects(
    kubectl(kubeconfig, 'get', 'clustergateways', '--field-selector=spec.provider=x'),
    /field selector|not supported|spec\.provider/i,
  );
});

test('watch streams clusters as their Secrets come and go', async () => {
  const name = 'watched.example.com';
  const abort = new AbortController();
  const events: { type: string; name?: string }[] = [];
  const watching = (async () => {
    for await (const event of hub.watch<{ metadata: { name: string } }>(
      '/apis/cluster.core.oam.dev/v1alpha1/clustergateways?resourceVersion=0',
      abort.signal,
    )) {
      events.push({ type: event.type, name: event.object.metadata?.name });
    }
  })();
  try {
    await waitFor('initial ADDED events', () =>
      events.some((e) => e.type === 'ADDED' && e.name === 'cluster1'),
    );
    await applyClusterSecret(hub, name, 'ServiceAccountToken', {
      endpoint: 'https://127.0.0.1:1',
      token: 'not-a-real-token',
    });
    await waitFor('ADDED for the new Secret', () =>
      events.some((e) => e.type === 'ADDED' && e.name === name),
    );
    await hub.delete(secretPath(name));
    await waitFor('DELETED for the removed Secret', () =>
      events.some((e) => e.type === 'DELETED' && e.name === name),
    );
  } finally {
    abort.abort();
    await watching;
  }
});

test('?watch=True through the aggregator is a watch stream, as the hub and the gateway authorized it', async () => {
  // Go reads every value but "false" and "0" (any case) as a watch: the hub's
  // apiserver treats this request as a long-running watch, and the gateway
  // authorizes a watch, so it must serve one, not a ClusterGatewayList.
  const abort = new AbortController();
  const res = await hub.send('GET', '/apis/cluster.core.oam.dev/v1alpha1/clustergateways?watch=True', {
    signal: abort.signal,
  });
  try {
    assert.equal(res.statusCode, 200);
    res.setEncoding('utf8');
    let text = '';
    for await (const chunk of res) {
      text += chunk;
      if (text.includes('\n')) break;
    }
    assert.ok(text.includes('\n'), `a line per watch event, got ${text.slice(0, 200)}`);
    assert.equal(res.headers['transfer-encoding'], 'chunked', 'a stream, not a complete body');
    const first = JSON.parse(text.slice(0, text.indexOf('\n'))) as {
      type: string;
      object: { kind: string; metadata: { name: string } };
    };
    assert.equal(first.type, 'ADDED');
    assert.equal(first.object.kind, 'ClusterGateway');
  } finally {
    abort.abort();
    res.destroy();
  }
  // "false" in any case and "0" are a list, on the same path.
  for (const value of ['FALSE', '0']) {
    const list = await hub.request<{ kind: string }>(
      'GET',
      `/apis/cluster.core.oam.dev/v1alpha1/clustergateways?watch=${value}`,
    );
    assert.equal(list.kind, 'ClusterGatewayList', `watch=${value}`);
  }
});

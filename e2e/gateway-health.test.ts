/**
 * The health subresource as the original's clients use it, through the
 * hub's real kube-aggregator and RBAC: a PUT of the whole object (get, set
 * status.healthy, update), kubectl patch --subresource=health, the mark
 * stored on the credential Secret, 403 without update/patch on
 * clustergateways/health, the operator's "unhealthy" winning over the
 * prober, and --reject-unhealthy honouring it on a second gateway process.
 *
 * It works on its own cluster, "health-e2e" (cluster1's endpoint and the
 * gateway's token for it), so the other files' clusters keep their health.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import tls from 'node:tls';
import { waitFor } from '../hack/localenv/wait.ts';
import { KubeClient, type KubeObject } from '../shared/kube/client.ts';
import { StatusError } from '../shared/kube/status.ts';
import { applyClusterSecret, clusterEndpoint, gatewayToken, secretPath } from './support/credentials.ts';
import { environmentState, hubClient } from './support/environment.ts';
import { gatewayRequest } from './support/gateway-client.ts';
import { kubectl } from './support/kubectl.ts';
import { grantOnHub, hubUser, revokeOnHub } from './support/rbac.ts';
import { startSecondGateway } from './support/second-gateway.ts';
import { hubUserKubeconfig, proxyPrefix } from './support/users.ts';

const cluster = 'health-e2e';
const healthPath = `${proxyPrefix}/${cluster}/health`;
const denied = 'health-carol';
const annotationHealthy = 'status.cluster.core.oam.dev/healthy';
const annotationReason = 'status.cluster.core.oam.dev/healthy-reason';

interface Gateway extends KubeObject {
  metadata: { name: string; resourceVersion: string };
  status: { healthy: boolean; healthyReason?: string };
}

let hub: KubeClient;
let kubeconfig: string;

before(async () => {
  hub = await hubClient();
  kubeconfig = environmentState().hub.kubeconfig;
  await applyClusterSecret(hub, cluster, 'ServiceAccountToken', {
    ...clusterEndpoint('cluster1'),
    token: await gatewayToken(hub, 'cluster1'),
  });
  // The prober (every 2 s in the environment) finds it reachable.
  await waitFor('the new cluster to be probed healthy', async () => (await getHealth()).status.healthy);
  // carol may read clustergateways and their health, but not change it.
  await grantOnHub(
    hub,
    denied,
    [hubUser(denied)],
    [
      {
        apiGroups: ['cluster.core.oam.dev'],
        resources: ['clustergateways', 'clustergateways/health'],
        verbs: ['get', 'list'],
      },
    ],
  );
});

after(async () => {
  await hub.delete(secretPath(cluster));
  await revokeOnHub(hub, denied);
  hub.close();
});

/** As the aggregator sends requests to a gateway: front-proxy certificate and X-Remote-* headers. */
const admin = { frontProxy: { user: 'admin', groups: ['system:masters'] } };
const asDenied = { frontProxy: { user: denied, groups: ['system:authenticated'] } };

const getHealth = () => hub.get<Gateway>(healthPath);
const put = (object: Gateway) => hub.request<Gateway>('PUT', healthPath, { body: object });

async function secretAnnotations(): Promise<Record<string, string>> {
  return (await hub.get(secretPath(cluster))).metadata?.annotations ?? {};
}

async function tableRow(): Promise<string> {
  const out = await kubectl(kubeconfig, 'get', 'clustergateways', cluster, '--no-headers');
  return out.trim();
}

async function statusOf(promise: Promise<unknown>): Promise<StatusError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof StatusError) return err;
    throw err;
  }
  assert.fail('expected the request to fail');
}

test('the prober reports on /metrics: probes by verdict, clusters tracked and not probed yet', async () => {
  const metrics = async () => {
    const res = await gatewayRequest('GET', '/metrics', {
      frontProxy: { user: 'admin', groups: ['system:masters'] },
    });
    assert.equal(res.status, 200);
    const sample = (series: string) => {
      const line = res.body.split('\n').find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    };
    return {
      healthy: sample('cluster_gateway_health_probes_total{result="healthy"}') ?? 0,
      tracked: sample('cluster_gateway_health_clusters{state="tracked"}'),
      unprobed: sample('cluster_gateway_health_clusters{state="unprobed"}'),
    };
  };
  const before = await metrics();
  const listed = (await hub.get<{ items: unknown[] }>(proxyPrefix)).items.length;
  assert.equal(before.tracked, listed, 'every listed cluster is tracked');
  // health-e2e was probed healthy (before()); every 2 s it is probed again, and healthy each time.
  await waitFor('more healthy probes', async () => (await metrics()).healthy > before.healthy);
  // Every tracked cluster gets a verdict, reachable or not: none stays unprobed.
  await waitFor('every cluster probed', async () => (await metrics()).unprobed === 0);
});

test('a cluster that refuses TLS 1.2 is probed healthy: the probe offers TLS 1.2, then falls back to TLS 1.3', async () => {
  const name = 'tls13-e2e';
  const endpoint = clusterEndpoint('cluster2');
  // cluster2's kube-apiserver runs with --tls-min-version=VersionTLS13 (hack/localenv/environment.ts).
  assert.match(
    await tls12Handshake(endpoint),
    /^ERR_SSL_(TLSV1_ALERT_PROTOCOL_VERSION|UNSUPPORTED_PROTOCOL)$/,
  );
  await applyClusterSecret(hub, name, 'ServiceAccountToken', {
    ...endpoint,
    token: await gatewayToken(hub, 'cluster2'),
  });
  try {
    const health = () => hub.get<Gateway>(`${proxyPrefix}/${name}/health`);
    await waitFor(
      'the TLS 1.3-only cluster to be probed healthy',
      async () => (await health()).status.healthy,
    );
    // Later probes (every 2 s) go straight to TLS 1.3 and resume its session: still healthy.
    await new Promise((r) => setTimeout(r, 5000));
    const { status } = await health();
    assert.equal(status.healthy, true, JSON.stringify(status));
    const version = await hub.get<{ gitVersion: string }>(`${proxyPrefix}/${name}/proxy/version`);
    assert.match(version.gitVersion, /^v1\./);
  } finally {
    await hub.delete(secretPath(name));
  }
});

/** What a client that offers TLS 1.2 at most gets from `endpoint`: OpenSSL's error code, or the protocol. */
function tls12Handshake(endpoint: { endpoint: string; 'ca.crt': string }): Promise<string> {
  const url = new URL(endpoint.endpoint);
  return new Promise((resolve) => {
    const socket = tls.connect({
      host: url.hostname,
      port: Number(url.port),
      ca: endpoint['ca.crt'],
      maxVersion: 'TLSv1.2',
    });
    socket.once('secureConnect', () => {
      resolve(`accepted ${socket.getProtocol()}`);
      socket.destroy();
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

test("PUT of the whole object, as the original's client does: true, then false, each read back", async () => {
  const gw = await getHealth();
  gw.status.healthy = true;
  gw.status.healthyReason = 'ConnectionTimeout';
  const updated = await put(gw);
  assert.equal(updated.kind, 'ClusterGateway');
  assert.deepEqual(updated.status, { healthy: true, healthyReason: 'ConnectionTimeout' });
  assert.deepEqual((await hub.get<Gateway>(`${proxyPrefix}/${cluster}`)).status, updated.status);
  assert.match(await tableRow(), /^health-e2e\s+ServiceAccountToken\s+Const\s+true\s+/);
  assert.equal((await secretAnnotations())[annotationHealthy], 'true');
  assert.equal((await secretAnnotations())[annotationReason], 'ConnectionTimeout');

  const again = await getHealth();
  again.status = { healthy: false, healthyReason: 'Maintenance' };
  const down = await put(again);
  assert.deepEqual(down.status, { healthy: false, healthyReason: 'Maintenance' });
  assert.deepEqual((await getHealth()).status, down.status);
  assert.match(await tableRow(), /^health-e2e\s+ServiceAccountToken\s+Const\s+false\s+/);
  assert.deepEqual(
    [(await secretAnnotations())[annotationHealthy], (await secretAnnotations())[annotationReason]],
    ['false', 'Maintenance'],
  );

  // The object from before the last write is stale now: optimistic concurrency.
  const stale = await statusOf(put(gw));
  assert.equal(stale.code, 409);
  assert.match(
    stale.message,
    /the object has been modified; please apply your changes to the latest version/,
  );
  assert.equal((await getHealth()).status.healthyReason, 'Maintenance');

  const invalid = await statusOf(put({ ...again, metadata: { ...again.metadata, name: 'cluster2' } }));
  assert.equal(invalid.code, 400);
  assert.match(
    invalid.message,
    /name of the object \(cluster2\) does not match the name on the URL \(health-e2e\)/,
  );
});

test("the operator's unhealthy wins over the prober until cleared (kubectl patch --subresource=health)", async () => {
  await kubectl(
    kubeconfig,
    'patch',
    'clustergateway',
    cluster,
    '--subresource=health',
    '-p',
    '{"status":{"healthy":false,"healthyReason":"Maintenance"}}',
  );
  // Several probe rounds (every 2 s) that reach the cluster do not overrule the mark.
  await new Promise((r) => setTimeout(r, 5000));
  assert.deepEqual((await getHealth()).status, { healthy: false, healthyReason: 'Maintenance' });

  const cleared = await kubectl(
    kubeconfig,
    'patch',
    'clustergateway',
    cluster,
    '--subresource=health',
    '--type=json',
    '-p',
    '[{"op":"replace","path":"/status/healthy","value":true},{"op":"remove","path":"/status/healthyReason"}]',
    '-o',
    'json',
  );
  assert.equal((JSON.parse(cleared) as Gateway).status.healthy, true);
  assert.match(await tableRow(), /\strue\s+/);
  assert.deepEqual(await secretAnnotations(), {
    ...(await secretAnnotations()),
    [annotationHealthy]: 'true',
    [annotationReason]: '',
  });
});

test('refused with 403 without update/patch on clustergateways/health, by the hub and by the gateway', async () => {
  const before = await secretAnnotations();
  const carolKubeconfig = await hubUserKubeconfig(denied);
  await assert.rejects(
    kubectl(
      carolKubeconfig,
      'patch',
      'clustergateway',
      cluster,
      '--subresource=health',
      '-p',
      '{"status":{"healthy":false}}',
    ),
    /cannot patch resource "clustergateways\/health" in API group "cluster.core.oam.dev"/,
  );
  const carol = await KubeClient.fromKubeconfig(carolKubeconfig);
  try {
    const gw = await carol.get<Gateway>(healthPath);
    gw.status.healthy = false;
    const refused = await statusOf(carol.request('PUT', healthPath, { body: gw }));
    assert.equal(refused.code, 403);
    assert.match(refused.message, /cannot update resource "clustergateways\/health"/);
  } finally {
    carol.close();
  }
  // Straight to the gateway as the aggregator would send it: its own SubjectAccessReview refuses.
  const direct = await gatewayRequest('PUT', healthPath, asDenied, undefined, {
    apiVersion: 'cluster.core.oam.dev/v1alpha1',
    kind: 'ClusterGateway',
    metadata: { name: cluster },
    status: { healthy: false },
  });
  assert.equal(direct.status, 403);
  assert.match(direct.body, /User \\"health-carol\\" cannot update resource \\"clustergateways\/health\\"/);
  assert.deepEqual(await secretAnnotations(), before);
});

test('--reject-unhealthy (second gateway) answers 503 for the marked cluster, and serves it again once cleared', async () => {
  const gateway = await startSecondGateway('gateway-health', [
    '--health-check-interval=1',
    '--reject-unhealthy',
  ]);
  const version = `${proxyPrefix}/${cluster}/proxy/version`;
  try {
    await waitFor(
      'the cleared cluster to be proxied',
      async () => (await gatewayRequest('GET', version, admin, gateway.url)).status === 200,
    );
    const gw = await getHealth();
    gw.status = { healthy: false, healthyReason: 'Maintenance' };
    await put(gw);
    const rejected = await waitFor('the second gateway to see the mark', async () => {
      const r = await gatewayRequest('GET', version, admin, gateway.url);
      return r.status === 503 ? r : undefined;
    });
    assert.match(rejected.body, /cluster \\"health-e2e\\" is unhealthy: Maintenance/);
    // Still rejected after several of its own probes (every second) found the cluster reachable.
    await new Promise((r) => setTimeout(r, 3000));
    assert.equal((await gatewayRequest('GET', version, admin, gateway.url)).status, 503);

    const marked = await getHealth();
    marked.status = { healthy: true };
    await put(marked);
    await waitFor(
      'the cleared cluster to be proxied again',
      async () => (await gatewayRequest('GET', version, admin, gateway.url)).status === 200,
    );
  } finally {
    gateway.stop();
  }
});

test('discovery and OpenAPI advertise exactly the verbs served on clustergateways/health', async () => {
  const list = await hub.get<{ resources: { name: string; verbs: string[] }[] }>(
    '/apis/cluster.core.oam.dev/v1alpha1',
  );
  const health = list.resources.find((r) => r.name === 'clustergateways/health');
  assert.deepEqual(health?.verbs, ['get', 'patch', 'update']);
  const openapi = await hub.get<{ paths: Record<string, Record<string, unknown>> }>(
    '/openapi/v3/apis/cluster.core.oam.dev/v1alpha1',
  );
  const item = openapi.paths['/apis/cluster.core.oam.dev/v1alpha1/clustergateways/{name}/health'] ?? {};
  assert.deepEqual(
    Object.keys(item)
      .filter((k) => k !== 'parameters')
      .sort(),
    ['get', 'patch', 'put'],
  );
  const patchTypes = Object.keys((item.patch as { requestBody: { content: object } }).requestBody.content);
  assert.ok(patchTypes.includes('application/strategic-merge-patch+json'), patchTypes.join());
  // get, update (PUT) and patch (PATCH) were each served above; anything else is a 405.
  const post = await statusOf(hub.request('POST', healthPath, { body: {} }));
  assert.equal(post.code, 405);
  const del = await statusOf(hub.request('DELETE', healthPath));
  assert.equal(del.code, 405);
});

import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
// Tests only: the library itself never loads @kubernetes/client-node at runtime.
import { CoreV1Api, KubeConfig, Watch } from '@kubernetes/client-node';
import { clusterOfflineStatus } from '../shared/kube/cluster-offline.ts';
import { failureStatus, StatusError } from '../shared/kube/status.ts';
import { clusterOfflineCause, clusterOfflineReason, isClusterOffline } from './offline.ts';

const cause = 'marked unhealthy through the health subresource: Maintenance';
const offline = clusterOfflineStatus({
  cluster: 'c1',
  message: 'cluster "c1" is unhealthy: Maintenance',
  causes: [cause],
});
const otherUnavailable = failureStatus(503, 'cluster "c1" is unreachable: connect ECONNREFUSED', {
  name: 'c1',
  group: 'cluster.core.oam.dev',
  kind: 'clustergateways',
});

// A stand-in for the gateway's proxy path: what each cluster answers.
const answers: Record<string, { code: number; body: string; contentType?: string }> = {
  offline: { code: 503, body: JSON.stringify(offline) },
  other: { code: 503, body: JSON.stringify(otherUnavailable) },
  missing: { code: 404, body: JSON.stringify(failureStatus(404, 'namespaces "x" not found')) },
  html: { code: 503, body: '<html>Service Unavailable</html>', contentType: 'text/html' },
};
let server: http.Server;
let base: string;

before(async () => {
  server = http.createServer((req, res) => {
    const cluster = /clustergateways\/([^/]+)\/proxy/.exec(req.url ?? '')?.[1] ?? '';
    if (cluster === 'watching') {
      // A watch that the server ends with an ERROR event, as kube-apiservers do.
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`${JSON.stringify({ type: 'ERROR', object: offline })}\n`);
      return;
    }
    const answer = answers[cluster] ?? answers.missing;
    assert.ok(answer);
    res.writeHead(answer.code, { 'content-type': answer.contentType ?? 'application/json' });
    res.end(answer.body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => {
  server.closeAllConnections();
  server.close();
});

function kubeConfigFor(cluster: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: 'gw',
        server: `${base}/apis/cluster.core.oam.dev/v1alpha1/clustergateways/${cluster}/proxy`,
        // Plain HTTP stand-in: client-node refuses http:// unless told so.
        skipTLSVerify: true,
      },
    ],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'gw', cluster: 'gw', user: 'u' }],
    currentContext: 'gw',
  });
  return kc;
}

async function apiError(cluster: string): Promise<unknown> {
  try {
    await kubeConfigFor(cluster).makeApiClient(CoreV1Api).readNamespace({ name: 'default' });
  } catch (err) {
    return err;
  }
  assert.fail('expected the call to fail');
}

test('the cause type is the shared constant', () => {
  assert.equal(clusterOfflineCause, 'ClusterOffline');
});

test("client-node's ApiException: the gateway's offline answer yes, another 503 or a 404 no", async () => {
  const err = await apiError('offline');
  assert.equal((err as { code?: number }).code, 503, 'a real ApiException');
  assert.equal(isClusterOffline(err), true);
  assert.equal(clusterOfflineReason(err), cause);
  for (const cluster of ['other', 'missing', 'html']) {
    const notOffline = await apiError(cluster);
    assert.equal(isClusterOffline(notOffline), false, cluster);
    assert.equal(clusterOfflineReason(notOffline), undefined, cluster);
  }
});

test("client-node's ApiException whose body is the Status text, not parsed", () => {
  const raw = Object.assign(new Error('HTTP-Code: 503'), { code: 503, body: JSON.stringify(offline) });
  assert.equal(clusterOfflineReason(raw), cause);
  // The code rules: a 500 carrying the same body is not the gateway's offline answer.
  assert.equal(isClusterOffline({ code: 500, body: offline }), false);
});

test("client-node's Watch: the ERROR event's Status yes; its bodiless non-200 error cannot tell", async () => {
  const events: { type: string; object: unknown }[] = [];
  await new Promise<void>((resolve, reject) => {
    void new Watch(kubeConfigFor('watching'))
      .watch(
        '/api/v1/pods',
        {},
        (type, object) => events.push({ type, object }),
        (err) => (err ? reject(err) : resolve()),
      )
      .catch(reject);
  });
  assert.equal(events[0]?.type, 'ERROR');
  assert.equal(isClusterOffline(events[0]?.object), true);
  assert.equal(isClusterOffline(events[0]), true, 'the whole event too');

  // A 503 before the stream: client-node 2.0.1 hands over Error(statusText) with statusCode only.
  const done = await new Promise<unknown>((resolve) => {
    void new Watch(kubeConfigFor('offline')).watch('/api/v1/pods', {}, () => {}, resolve);
  });
  assert.equal((done as { statusCode?: number }).statusCode, 503);
  assert.equal(isClusterOffline(done), false, 'the body was dropped: nothing tells it from any 503');
  // An error that does carry the Status (a wrapper, a later client-node) is recognised.
  assert.equal(
    isClusterOffline(Object.assign(new Error('Service Unavailable'), { statusCode: 503, body: offline })),
    true,
  );
});

test("this project's StatusError, a Status object, its JSON text, a wrapped cause", () => {
  assert.equal(clusterOfflineReason(StatusError.fromResponse(503, JSON.stringify(offline))), cause);
  assert.equal(clusterOfflineReason(new StatusError(offline)), cause);
  assert.equal(clusterOfflineReason(offline), cause);
  assert.equal(clusterOfflineReason(JSON.stringify(offline)), cause);
  assert.equal(clusterOfflineReason(new Error('list failed', { cause: new StatusError(offline) })), cause);
  assert.equal(isClusterOffline(new StatusError(otherUnavailable)), false);
  assert.equal(isClusterOffline(StatusError.fromResponse(503, 'upstream connect error')), false);
});

test('anything else is not offline', () => {
  for (const value of [
    undefined,
    null,
    503,
    '',
    'ClusterOffline',
    '{not json',
    new Error('ClusterOffline'),
    { kind: 'Status', code: 503, details: { causes: [{ reason: 'Other' }] } },
    { kind: 'Status', code: 404, details: { causes: [{ reason: 'ClusterOffline' }] } },
    { kind: 'NotStatus', code: 503, details: { causes: [{ reason: 'ClusterOffline' }] } },
    [offline],
  ]) {
    assert.equal(isClusterOffline(value), false, JSON.stringify(value) ?? String(value));
  }
});

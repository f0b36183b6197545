/**
 * The proxied KubeConfig and onCluster, through client-node's real code paths (typed API, Watch, Log, Exec's
 * WebSocket) against a local HTTP server that records what arrives: the path each request really takes.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { after, before, test } from 'node:test';
import { CoreV1Api, Exec, KubeConfig, Log, Watch } from '@kubernetes/client-node';
import { onCluster } from './on-cluster.ts';
import { kubeConfigForCluster } from './proxied-kubeconfig.ts';

const proxy = (c: string) => `/apis/cluster.core.oam.dev/v1alpha1/clustergateways/${c}/proxy`;
const seen: { url: string; auth?: string; agent?: string; upgrade: boolean }[] = [];
let server: http.Server;
let hub: KubeConfig;

before(async () => {
  server = http.createServer((req, res) => {
    seen.push({
      url: req.url!,
      auth: req.headers.authorization,
      agent: req.headers['user-agent'],
      upgrade: false,
    });
    res.setHeader('content-type', 'application/json');
    if (req.url!.includes('/log')) return res.end('a log line\n');
    if (req.url!.includes('watch=true')) {
      res.write(
        `${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'p', resourceVersion: '2' } } })}\n`,
      );
      return res.end();
    }
    res.end(
      JSON.stringify({ apiVersion: 'v1', kind: 'PodList', metadata: { resourceVersion: '1' }, items: [] }),
    );
  });
  server.on('upgrade', (req, socket) => {
    seen.push({ url: req.url!, auth: req.headers.authorization, upgrade: true });
    socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  hub = new KubeConfig();
  hub.loadFromOptions({
    clusters: [{ name: 'hub', server: `http://127.0.0.1:${port}/prefix`, skipTLSVerify: true }],
    users: [{ name: 'admin', token: 'hub-token' }],
    contexts: [{ name: 'hub-ctx', cluster: 'hub', user: 'admin', namespace: 'hub-only' }],
    currentContext: 'hub-ctx',
  });
});

after(() => server.close());

const last = () => seen.at(-1)!;

test('a typed API of the proxied KubeConfig goes to the cluster proxy with the hub identity', async () => {
  const kc = kubeConfigForCluster(hub, 'edge.eu-1');
  await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: 'default', labelSelector: 'a=b' });
  assert.equal(last().url, `/prefix${proxy('edge.eu-1')}/api/v1/namespaces/default/pods?labelSelector=a%3Db`);
  assert.equal(last().auth, 'Bearer hub-token');
  // The hub's KubeConfig is untouched and still goes to the hub.
  await hub.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: 'default' });
  assert.equal(last().url, '/prefix/api/v1/namespaces/default/pods');
  assert.equal(hub.getCurrentContext(), 'hub-ctx');
});

test('the proxied KubeConfig: one added context, the hub user, no hub namespace', () => {
  const kc = kubeConfigForCluster(hub, 'c1');
  const ctx = kc.getContextObject(kc.getCurrentContext())!;
  assert.equal(ctx.user, 'admin');
  assert.equal(ctx.namespace, undefined);
  assert.equal(kc.getCurrentCluster()!.server.endsWith(`/prefix${proxy('c1')}`), true);
  assert.deepEqual(
    kc.getContexts().map((c) => c.name),
    ['hub-ctx', 'hub-ctx/clustergateways/c1'],
  );
  assert.throws(() => kubeConfigForCluster(hub, 'Not/A/Name'), /not a cluster name/);
  assert.throws(() => kubeConfigForCluster(new KubeConfig(), 'c1'), /no current context/);
});

test('Watch and Log of the proxied KubeConfig go through the proxy', async () => {
  const kc = kubeConfigForCluster(hub, 'c2');
  const events: string[] = [];
  await new Promise<void>((resolve, reject) => {
    new Watch(kc)
      .watch(
        '/api/v1/pods',
        { resourceVersion: '1' },
        (type, obj) => events.push(`${type} ${obj.metadata.name}`),
        (e) => (e ? reject(e) : resolve()),
      )
      .catch(reject);
  });
  assert.deepEqual(events, ['ADDED p']);
  assert.match(last().url, new RegExp(`^/prefix${proxy('c2')}/api/v1/pods\\?watch=true&resourceVersion=1$`));
  const out = new PassThrough();
  await new Log(kc).log('ns', 'pod', 'main', out, { follow: false });
  assert.match(
    last().url,
    new RegExp(`^/prefix${proxy('c2')}/api/v1/namespaces/ns/pods/pod/log\\?container=main&`),
  );
});

test("Exec's WebSocket upgrade goes through the proxy with the hub identity", async () => {
  const kc = kubeConfigForCluster(hub, 'c3');
  await assert.rejects(new Exec(kc).exec('ns', 'pod', 'main', ['echo', 'hi'], null, null, null, false));
  assert.equal(last().upgrade, true);
  assert.match(last().url, new RegExp(`^/prefix${proxy('c3')}/api/v1/namespaces/ns/pods/pod/exec\\?`));
  assert.equal(last().auth, 'Bearer hub-token');
});

test('onCluster: one API made from the hub, the cluster chosen per call; other middleware kept', async () => {
  const core = hub.makeApiClient(CoreV1Api);
  await core.listNamespacedPod({ namespace: 'a' }, onCluster('cluster2'));
  assert.equal(last().url, `/prefix${proxy('cluster2')}/api/v1/namespaces/a/pods`);
  assert.match(
    last().agent ?? '',
    /kubernetes-client-javascript/,
    "client-node's User-Agent middleware still ran",
  );
  assert.equal(last().auth, 'Bearer hub-token');
  await core.listNamespacedPod({ namespace: 'a' }, onCluster('cluster3', { hub }));
  assert.equal(last().url, `/prefix${proxy('cluster3')}/api/v1/namespaces/a/pods`);
  // Without options the same API still reads the hub.
  await core.listNamespacedPod({ namespace: 'a' });
  assert.equal(last().url, '/prefix/api/v1/namespaces/a/pods');
  // On an API of a proxied KubeConfig, the per-call cluster wins.
  await kubeConfigForCluster(hub, 'c1')
    .makeApiClient(CoreV1Api)
    .listNamespacedPod({ namespace: 'a' }, onCluster('c9'));
  assert.equal(last().url, `/prefix${proxy('c9')}/api/v1/namespaces/a/pods`);
  assert.throws(() => onCluster('UPPER'), /not a cluster name/);
});

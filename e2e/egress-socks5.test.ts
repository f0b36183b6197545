/**
 * A cluster behind a SOCKS5 proxy: a credential Secret whose `proxy-url` is socks5:// (as the Go
 * original reads it), through the hub's kube-aggregator to the environment's gateway (a process on
 * this machine) and on through a SOCKS5 server this test runs, which counts what passes.
 *
 * The direct route is closed by name: the Secret's endpoint is `kubernetes.default.svc`, a name in
 * cluster1's serving certificate that this machine cannot resolve; only the proxy maps it to
 * cluster1's address. So a request that reaches cluster1 went through the proxy, with the name sent
 * unresolved and TLS (checked against cluster1's CA for that name) end to end inside it.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { waitFor } from '../hack/localenv/wait.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import { StatusError } from '../shared/kube/status.ts';
import { type Socks5TestServer, startSocks5Server } from '../shared/transport/socks5-test-server.ts';
import { applyClusterSecret, clusterEndpoint, gatewayToken, secretPath } from './support/credentials.ts';
import { environmentState, hubClient, managedClient } from './support/environment.ts';
import { kubectl } from './support/kubectl.ts';
import { proxyPrefix } from './support/users.ts';

const onlyTheProxyKnows = 'kubernetes.default.svc';
const user = 'e2e-socks';
const password = `right-${randomBytes(12).toString('hex')}`;
const wrongPassword = `wrong-${randomBytes(12).toString('hex')}`;
const reached = 'socks5-cluster';
const refused = 'socks5-wrong-password';

let hub: KubeClient;
let spoke: KubeClient;
let socks: Socks5TestServer;

/** Sessions of the proxy that authenticated as `user` with `pass` and opened a connection to cluster1. */
const connectedWith = (pass: string) =>
  socks.sessions.filter((s) => s.username === user && s.password === pass && s.connected);

before(async () => {
  hub = await hubClient();
  spoke = await managedClient('cluster1');
  const cluster1 = new URL(environmentState().managed.find((c) => c.name === 'cluster1')!.server);
  socks = await startSocks5Server({
    users: { [user]: password },
    // The proxy resolves the name; anything else is a host it cannot reach.
    resolve: (host) =>
      host === onlyTheProxyKnows ? { host: cluster1.hostname, port: Number(cluster1.port) } : 4,
  });
  const { endpoint, 'ca.crt': ca } = clusterEndpoint('cluster1');
  const behindProxy = (pass: string) => ({
    endpoint: `https://${onlyTheProxyKnows}:${new URL(endpoint).port}`,
    'ca.crt': ca,
    'proxy-url': `socks5://${user}:${pass}@127.0.0.1:${socks.port}`,
  });
  const token = await gatewayToken(hub, 'cluster1');
  await applyClusterSecret(hub, reached, 'ServiceAccountToken', { ...behindProxy(password), token });
  await applyClusterSecret(hub, refused, 'ServiceAccountToken', { ...behindProxy(wrongPassword), token });
});

after(async () => {
  await hub.delete(secretPath(reached));
  await hub.delete(secretPath(refused));
  await socks.close();
  hub.close();
  spoke.close();
});

test('a GET through the aggregator reaches the cluster through the SOCKS5 proxy, the name unresolved', async () => {
  const bytesBefore = socks.bytes.down;
  const namespace = await waitFor(
    'the SOCKS5 cluster to serve',
    () =>
      hub
        .get<{ metadata: { name: string } }>(`${proxyPrefix}/${reached}/proxy/api/v1/namespaces/default`)
        .catch(() => undefined),
    { timeoutMs: 20_000 },
  );
  assert.equal(namespace.metadata.name, 'default');
  const sessions = connectedWith(password);
  assert.ok(sessions.length > 0, 'the proxy opened a connection for the gateway');
  assert.ok(
    sessions.every((s) => s.addressType === 'domain' && s.host === onlyTheProxyKnows),
    'the host name went to the proxy unresolved',
  );
  assert.ok(socks.bytes.down > bytesBefore, 'the answer came back through the proxy');
});

test('a watch through the aggregator delivers events through the SOCKS5 proxy', async () => {
  const name = `socks5-watched-${Date.now()}`;
  const abort = new AbortController();
  const seen: string[] = [];
  const watching = (async () => {
    for await (const e of hub.watch<{ metadata: { name: string } }>(
      `${proxyPrefix}/${reached}/proxy/api/v1/namespaces/default/configmaps?resourceVersion=0`,
      abort.signal,
    )) {
      seen.push(`${e.type}:${e.object.metadata.name}`);
    }
  })();
  try {
    await waitFor('the initial events', () => seen.includes('ADDED:kube-root-ca.crt'), { timeoutMs: 10_000 });
    const bytesBefore = socks.bytes.down;
    await spoke.create('/api/v1/namespaces/default/configmaps', {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name },
    });
    await waitFor('the ADDED event', () => seen.includes(`ADDED:${name}`), {
      intervalMs: 20,
      timeoutMs: 10_000,
    });
    assert.ok(socks.bytes.down > bytesBefore, 'the event came through the proxy');
  } finally {
    abort.abort();
    await watching;
    await spoke.delete(`/api/v1/namespaces/default/configmaps/${name}`);
  }
});

test('a wrong password: a 503 Status saying the proxy refused it, and no connection to the cluster', async () => {
  const err = await waitFor('the wrong-password cluster to be known', () =>
    hub.get(`${proxyPrefix}/${refused}/proxy/api/v1/namespaces/default`).then(
      () => assert.fail('a wrong SOCKS5 password must not reach the cluster'),
      (e: unknown) => (e instanceof StatusError && e.code !== 404 ? e : undefined),
    ),
  );
  assert.equal(err.code, 503);
  assert.match(
    err.message,
    new RegExp(
      `cluster "${refused}" is unreachable: SOCKS5 proxy 127\\.0\\.0\\.1:${socks.port}: refused the user name and password of user "${user}"`,
    ),
  );
  assert.ok(!err.message.includes(wrongPassword), 'the password is not in the Status');
  assert.ok(
    socks.sessions.some((s) => s.password === wrongPassword && !s.authenticated),
    'the gateway did ask the proxy',
  );
  assert.equal(connectedWith(wrongPassword).length, 0, 'nothing was opened to the cluster');
});

test('the passwords are never shown: xxxxx in the ClusterGateway, absent from the gateway log', async () => {
  const yaml = await kubectl(
    environmentState().hub.kubeconfig,
    'get',
    'clustergateway',
    reached,
    refused,
    '-o',
    'yaml',
  );
  assert.match(yaml, new RegExp(`proxy-url: socks5://${user}:xxxxx@127\\.0\\.0\\.1:${socks.port}`));
  // The log lines that carry the proxy's answer are there, and they too hold no password.
  const logFile = path.join(environmentState().stateDir, 'logs', 'hub-cluster-gateway.log');
  const refusal = `"cluster":"${refused}","err":"SOCKS5 proxy 127.0.0.1:${socks.port}: refused the user name and password`;
  const log = await waitFor(
    'the refusal in the gateway log',
    () => {
      const text = readFileSync(logFile, 'utf8');
      return text.includes(refusal) ? text : undefined;
    },
    { timeoutMs: 5000 },
  );
  for (const [where, text] of [
    ['the ClusterGateways', yaml],
    ['the gateway log', log],
  ] as const) {
    assert.ok(!text.includes(password), `the password is not in ${where}`);
    assert.ok(!text.includes(wrongPassword), `the wrong password is not in ${where}`);
  }
});

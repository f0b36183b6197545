/**
 * Request smuggling, against the real gateway and the real managed
 * kube-apiserver. The attacker may only `get clustergateways/cluster1/proxy`
 * (read-only GETs such as /version). It sends GETs whose body is the start of
 * a second request, and names the framing header in `Connection` so that a
 * proxy treating it as hop-by-hop would drop it: the body would then reach
 * the cluster unframed on a pooled connection, and the cluster would read it
 * as a POST that swallows the headers (the gateway's credential) of the next
 * request. The test passes when the cluster received exactly the GETs the
 * gateway authorized, with their bodies, and no ConfigMap was created.
 *
 * Directly on the gateway's port (any pod on the hub network can reach it) and
 * through the kube-aggregator.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { KubeClient } from '../shared/kube/client.ts';
import { auditEvents } from './support/audit.ts';
import { environmentState, hubClient, managedClient } from './support/environment.ts';
import { statusCodes, type TlsTarget, tlsExchange } from './support/raw-tls.ts';
import { grantOnHub, hubUser, revokeOnHub } from './support/rbac.ts';
import { hubUserCertificate, proxyPrefix } from './support/users.ts';

const user = 'smuggler';
const role = `${user}-version-only`;
let hub: KubeClient;
let spoke: KubeClient;
let client: { cert: string; key: string };

before(async () => {
  hub = await hubClient();
  spoke = await managedClient('cluster1');
  client = await hubUserCertificate(user);
  await grantOnHub(
    hub,
    role,
    [hubUser(user)],
    [
      {
        apiGroups: ['cluster.core.oam.dev'],
        resources: ['clustergateways/proxy'],
        resourceNames: ['cluster1'],
        verbs: ['get'],
      },
    ],
  );
});

after(async () => {
  await revokeOnHub(hub, role);
  hub.close();
  spoke.close();
});

const version = `${proxyPrefix}/cluster1/proxy/version`;

/** The start of a request that, read unframed, would swallow the next request's headers. */
function smuggledPost(bodyLength: number): string {
  return (
    'POST /api/v1/namespaces/kube-system/configmaps HTTP/1.1\r\n' +
    'Content-Type: application/json\r\n' +
    `Content-Length: ${bodyLength}\r\n` +
    'X-Swallow: '
  );
}

function configMapJson(name: string): string {
  return JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data: { owned: 'yes' } });
}

/** `marker` tags the request (a query the cluster ignores), so the audit log tells this test's GETs apart. */
function framedGet(connection: string, body: string, marker: string, close = true): string {
  return (
    `GET ${version}?attempt=${marker} HTTP/1.1\r\nHost: gateway\r\n` +
    `Connection: ${connection}${close ? ', close' : ''}\r\n` +
    (connection.includes('Transfer-Encoding')
      ? `Transfer-Encoding: chunked\r\n\r\n${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`
      : `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
  );
}

async function attack(target: TlsTarget, framing: 'Content-Length' | 'Transfer-Encoding', name: string) {
  const body = configMapJson(name);
  // First GET: its body is the smuggled request head; second GET: its body is the ConfigMap.
  const first = await tlsExchange(target, framedGet(framing, smuggledPost(Buffer.byteLength(body)), name));
  const second = await tlsExchange(target, framedGet(framing, body, name));
  return { first, second };
}

for (const via of ['gateway', 'aggregator'] as const) {
  for (const framing of ['Content-Length', 'Transfer-Encoding'] as const) {
    test(`via the ${via}: a GET whose ${framing} is listed in Connection cannot smuggle a request`, async () => {
      const env = environmentState();
      const target = { url: via === 'gateway' ? env.gateway!.url : env.hub.server, client };
      const name = `smuggled-${via}-${framing.toLowerCase()}-${Date.now()}`;
      const since = auditEvents('cluster1').length;
      const startedAt = Date.now();

      const { first, second } = await attack(target, framing, name);

      // Each GET got the cluster's /version, and nothing else came back on the connection.
      for (const answer of [first, second]) {
        assert.deepEqual(statusCodes(answer), [200], answer.slice(0, 300));
        assert.match(answer, /"gitVersion"/);
      }
      // The cluster saw the two GETs and nothing that touched ConfigMaps. Only
      // requests received during the attack count: a watch other components
      // opened minutes earlier (the work agent's on kube-system ConfigMaps)
      // may complete in this window and is no smuggled request.
      await new Promise((r) => setTimeout(r, 1000));
      const received = auditEvents('cluster1')
        .slice(since)
        .filter(
          (e) =>
            e.stage === 'ResponseComplete' &&
            Date.parse(e.requestReceivedTimestamp) >= startedAt &&
            !e.user.username.startsWith('system:apiserver'),
        );
      assert.equal(received.filter((e) => e.requestURI === `/version?attempt=${name}`).length, 2);
      assert.deepEqual(
        received.filter(
          (e) => e.objectRef?.resource === 'configmaps' && e.objectRef.namespace === 'kube-system',
        ),
        [],
      );
      assert.equal(await spoke.getOptional(`/api/v1/namespaces/kube-system/configmaps/${name}`), undefined);

      // Legitimate traffic on the same pool still works, with the gateway's credential.
      const again = await tlsExchange(
        target,
        `GET ${version} HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n`,
      );
      assert.deepEqual(statusCodes(again), [200]);
    });
  }
}

test('the gateway refuses a Transfer-Encoding it cannot forward faithfully with 501', async () => {
  const env = environmentState();
  const answer = await tlsExchange(
    { url: env.gateway!.url, client },
    `GET ${version} HTTP/1.1\r\nHost: gateway\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n1\r\nx\r\n0\r\n\r\n`,
  );
  assert.deepEqual(statusCodes(answer), [501]);
  assert.match(answer, /"kind":"Status".*unsupported Transfer-Encoding/s);
});

// The gateway talks HTTP/2 to cluster1 (shared/transport/http2-sessions.ts), where these fields are forbidden
// (RFC 9113 §8.2.2): forwarded, Node would refuse the whole header block, and before they were dropped a
// caller could make the gateway throw with one header. Each is dropped; the request is served.
for (const via of ['gateway', 'aggregator'] as const) {
  test(`via the ${via}: HTTP/1.1-only fields (HTTP2-Settings, TE, Keep-Alive, Proxy-Connection) are dropped on the way to HTTP/2`, async () => {
    const env = environmentState();
    const target = { url: via === 'gateway' ? env.gateway!.url : env.hub.server, client };
    for (const field of [
      'HTTP2-Settings: AAMAAABkAAQAAP__',
      'TE: gzip',
      'Keep-Alive: timeout=5',
      'Proxy-Connection: keep-alive',
    ]) {
      const answer = await tlsExchange(
        target,
        `GET ${version} HTTP/1.1\r\nHost: gateway\r\n${field}\r\nConnection: close\r\n\r\n`,
      );
      assert.deepEqual(statusCodes(answer), [200], `${field}: ${answer.slice(0, 300)}`);
      assert.match(answer, /"gitVersion"/);
    }
  });
}

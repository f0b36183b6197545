/**
 * Upgrade requests (exec, attach, port-forward) as an attacker sends them,
 * against the real gateway and managed kube-apiserver: a declared body is
 * refused instead of leaving the cluster waiting for it, and a refused
 * upgrade never hands its connection back to the pool, where the next
 * request would hang.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { environmentState } from './support/environment.ts';
import { statusCodes, tlsExchange } from './support/raw-tls.ts';
import { frontProxyClient, proxyPrefix } from './support/users.ts';

const fp = frontProxyClient();
const asAdmin = 'X-Remote-User: admin\r\nX-Remote-Group: system:masters\r\n';
const gateway = () => ({ url: environmentState().gateway!.url, client: { cert: fp.cert, key: fp.key } });
const exec = `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/default/pods/no-such-pod/exec?command=ls&stdout=true`;
const websocket =
  'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n' +
  'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n';

test('an upgrade request that declares a body is refused with 400 before reaching the cluster', async () => {
  for (const framing of [
    'Content-Length: 5\r\n\r\nhello',
    'Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n',
  ]) {
    const started = Date.now();
    const answer = await tlsExchange(
      gateway(),
      `POST ${exec} HTTP/1.1\r\nHost: gateway\r\n${asAdmin}Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n${framing}`,
    );
    assert.deepEqual(statusCodes(answer), [400], answer.slice(0, 300));
    assert.match(answer, /upgrade requests must not carry a body/);
    assert.ok(Date.now() - started < 5000, 'answered at once, not after a timeout');
  }
});

test('refused upgrades leave the connection pool healthy: the next requests answer at once', async () => {
  for (let i = 0; i < 3; i++) {
    const refused = await tlsExchange(
      gateway(),
      `GET ${exec} HTTP/1.1\r\nHost: gateway\r\n${asAdmin}${websocket}\r\n`,
    );
    assert.deepEqual(statusCodes(refused), [404], refused.slice(0, 300));
    assert.match(refused, /pods \\?"no-such-pod\\?" not found/);
    const started = Date.now();
    const next = await tlsExchange(
      gateway(),
      `GET ${proxyPrefix}/cluster1/proxy/api/v1/namespaces/default HTTP/1.1\r\nHost: gateway\r\n${asAdmin}Connection: close\r\n\r\n`,
      5000,
    );
    assert.deepEqual(statusCodes(next), [200]);
    assert.ok(Date.now() - started < 2000, `answered in ${Date.now() - started} ms`);
  }
});

test('a caller cannot smuggle an upgrade past the gateway with Connection tokens', async () => {
  // `Connection: Upgrade` without an `Upgrade` header is a plain request: the gateway must not
  // send an upgrade the hub did not see, and the cluster answers it as an ordinary GET.
  const answer = await tlsExchange(
    gateway(),
    `GET ${proxyPrefix}/cluster1/proxy/version HTTP/1.1\r\nHost: gateway\r\n${asAdmin}Connection: Upgrade, close\r\n\r\n`,
  );
  assert.deepEqual(statusCodes(answer), [200]);
  assert.match(answer, /"gitVersion"/);
});

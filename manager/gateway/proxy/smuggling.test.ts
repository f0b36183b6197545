/**
 * Message framing survives the gateway: whatever a caller puts in its headers,
 * the cluster reads exactly the requests the gateway meant to send, so a body
 * can never become a request of its own that swallows the next caller's
 * headers (and with them the gateway's cluster credential).
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import { after, before, beforeEach, describe, it } from 'node:test';
import {
  headerValues,
  PROXY_PREFIX,
  type ProxyFixture,
  proxyTo,
  send,
  startUpstream,
  type TestServer,
} from './test-kit.ts';

interface Seen {
  method: string;
  url: string;
  authorization: string[];
  body: string;
}

/** Writes raw bytes to the front server and resolves with everything it answers until it closes. */
function rawExchange(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes));
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString()));
    socket.setTimeout(3000, () => socket.destroy());
  });
}

describe('request smuggling through the proxy', { timeout: 10_000 }, () => {
  const seen: Seen[] = [];
  let upstream: TestServer;
  let gateway: ProxyFixture;

  before(async () => {
    upstream = await startUpstream((req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({
          method: req.method!,
          url: req.url!,
          authorization: headerValues(req.rawHeaders, 'authorization'),
          body: Buffer.concat(chunks).toString(),
        });
        res.writeHead(200, { 'Content-Type': 'text/plain' });
        res.end('ok');
      });
    });
    // One connection to the cluster, so every request shares it as on a busy pool.
    gateway = await proxyTo(upstream);
  });
  after(() => gateway.close());
  beforeEach(() => {
    seen.length = 0;
  });

  const smuggled = 'POST /api/v1/namespaces/kube-system/configmaps HTTP/1.1\r\nX-Swallow: ';

  for (const [method, framing] of [
    // `close` ends each exchange promptly; the attack is the other token.
    ['GET', `Connection: Content-Length, close\r\nContent-Length: ${smuggled.length}\r\n`],
    ['DELETE', `Connection: close, Content-Length\r\nContent-Length: ${smuggled.length}\r\n`],
    ['HEAD', `Connection: Content-Length, close\r\nContent-Length: ${smuggled.length}\r\n`],
    ['OPTIONS', 'Connection: Transfer-Encoding, close\r\nTransfer-Encoding: chunked\r\n'],
    ['GET', 'Connection: Transfer-Encoding, close\r\nTransfer-Encoding: chunked\r\n'],
  ] as const) {
    const name = framing.includes('chunked') ? 'Transfer-Encoding' : 'Content-Length';
    it(`a ${method} whose ${name} is named in Connection reaches the cluster as one framed request`, async () => {
      const body =
        name === 'Transfer-Encoding'
          ? `${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`
          : smuggled;
      const answer = await rawExchange(
        gateway.front.port,
        `${method} ${PROXY_PREFIX}c1/proxy/version HTTP/1.1\r\nHost: gw\r\n${framing}\r\n${body}`,
      );
      assert.match(answer, /^HTTP\/1\.1 200/);
      // The next request on the same pooled connection arrives intact, with the credential.
      const next = await send(gateway.front.port, `${PROXY_PREFIX}c1/proxy/api/v1/namespaces`);
      assert.equal(next.status, 200);
      assert.deepEqual(
        seen.map((s) => `${s.method} ${s.url}`),
        [`${method} /version`, 'GET /api/v1/namespaces'],
      );
      assert.equal(seen[0]!.body, smuggled);
      assert.deepEqual(seen[1]!.authorization, ['Bearer cluster-token']);
    });
  }

  it('refuses a Transfer-Encoding other than chunked with 501 and sends nothing', async () => {
    const answer = await rawExchange(
      gateway.front.port,
      `POST ${PROXY_PREFIX}c1/proxy/api/v1/namespaces HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n1\r\nx\r\n0\r\n\r\n`,
    );
    assert.match(answer, /^HTTP\/1\.1 501/);
    assert.match(answer, /unsupported Transfer-Encoding/);
    assert.deepEqual(seen, []);
  });
});

describe('upgrade requests and the connection pool', { timeout: 10_000 }, () => {
  let upstream: TestServer;
  let gateway: ProxyFixture;
  let upgradesSeen = 0;

  before(async () => {
    upstream = await startUpstream((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.end('plain');
    });
    // Like a cluster that refuses an upgrade but keeps the connection: its HTTP parser is gone,
    // so a request written on it afterwards is never answered.
    upstream.server.on('upgrade', (_req: IncomingMessage, socket: net.Socket) => {
      upgradesSeen++;
      socket.write('HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nno');
    });
    gateway = await proxyTo(upstream);
  });
  after(() => gateway.close());

  it('does not pool the connection of a refused upgrade', async () => {
    const refused = await rawExchange(
      gateway.front.port,
      `GET ${PROXY_PREFIX}c1/proxy/api/v1/namespaces/default/pods/p/exec HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`,
    );
    assert.match(refused, /^HTTP\/1\.1 403/);
    const next = await send(gateway.front.port, `${PROXY_PREFIX}c1/proxy/version`);
    assert.equal(next.status, 200);
    assert.equal(next.body, 'plain');
  });

  it('refuses an upgrade that declares a body, without contacting the cluster', async () => {
    const before = upgradesSeen;
    const answer = await rawExchange(
      gateway.front.port,
      `POST ${PROXY_PREFIX}c1/proxy/api/v1/namespaces/default/pods/p/exec HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nContent-Length: 5\r\n\r\nhello`,
    );
    assert.match(answer, /^HTTP\/1\.1 400/);
    assert.match(answer, /must not carry a body/);
    assert.equal(upgradesSeen, before);
  });
});

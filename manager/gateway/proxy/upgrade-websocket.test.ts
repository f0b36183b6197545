import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { Duplex } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import {
  eventually,
  headerValues,
  PROXY_PREFIX,
  type ProxyFixture,
  proxyTo,
  startUpstream,
  type TestServer,
} from './test-kit.ts';

// ws ships no types and @types/ws is not a dependency: describe the little used here.
interface WsSocket {
  protocol: string;
  on(event: 'message', listener: (data: Buffer, isBinary: boolean) => void): void;
  on(event: 'close' | 'open', listener: () => void): void;
  on(event: 'error', listener: (err: Error) => void): void;
  send(data: Buffer | string, options?: { binary?: boolean }): void;
  close(): void;
}
interface WsModule {
  WebSocket: new (
    url: string,
    protocols: string[],
    options?: { headers?: Record<string, string> },
  ) => WsSocket;
  WebSocketServer: new (options: {
    noServer: true;
    handleProtocols?: (protocols: Set<string>) => string | false;
  }) => {
    handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer, cb: (ws: WsSocket) => void): void;
    close(): void;
  };
}
const { WebSocket, WebSocketServer } = createRequire(import.meta.url)('ws') as WsModule;

describe('WebSocket upgrades', { timeout: 5000 }, () => {
  let upstream: TestServer;
  let gateway: ProxyFixture;
  let lastUpgrade: http.IncomingMessage | undefined;
  let upstreamClosed = 0;
  const wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (protocols) => (protocols.has('v5.channel.k8s.io') ? 'v5.channel.k8s.io' : false),
  });

  before(async () => {
    upstream = await startUpstream((_req, res) => res.writeHead(404).end());
    upstream.server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
      lastUpgrade = req;
      if (req.url!.includes('/forbidden/')) {
        // A 1.29 API server refusing WebSocket exec: chunked, so the gateway must re-frame it.
        const body = '{"kind":"Status","apiVersion":"v1","status":"Failure","code":403,"reason":"Forbidden"}';
        socket.end(
          'HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nAudit-Id: a-403\r\n' +
            `Transfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
        );
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => {
        // Echo with the channel byte incremented, like a tiny exec.
        ws.on('message', (data) => ws.send(Buffer.concat([Buffer.from([data[0]! + 1]), data.subarray(1)])));
        ws.on('close', () => upstreamClosed++);
      });
    });
    gateway = await proxyTo(upstream);
  });

  after(async () => {
    wss.close();
    await gateway.close();
  });

  it('round-trips a kubectl exec WebSocket with its subprotocol', async () => {
    const path =
      '/api/v1/namespaces/default/pods/p/exec?command=sh&command=-c&stdin=true&stdout=true&tty=false';
    const ws = new WebSocket(
      `ws://127.0.0.1:${gateway.front.port}${PROXY_PREFIX}c1/proxy${path}`,
      ['v5.channel.k8s.io', 'v4.channel.k8s.io'],
      { headers: { Authorization: 'Bearer hub-token', 'Impersonate-User': 'evil' } },
    );
    await once(ws as never, 'open');
    assert.equal(ws.protocol, 'v5.channel.k8s.io');

    const h = lastUpgrade!.rawHeaders;
    assert.equal(lastUpgrade!.method, 'GET');
    assert.equal(lastUpgrade!.url, path);
    assert.deepEqual(headerValues(h, 'upgrade'), ['websocket']);
    assert.deepEqual(headerValues(h, 'connection'), ['Upgrade']);
    assert.deepEqual(headerValues(h, 'sec-websocket-protocol'), ['v5.channel.k8s.io,v4.channel.k8s.io']);
    assert.deepEqual(headerValues(h, 'authorization'), ['Bearer cluster-token']);
    assert.deepEqual(headerValues(h, 'impersonate-user'), []);

    const replies: Buffer[] = [];
    ws.on('message', (data) => replies.push(data));
    ws.send(Buffer.from([0, ...Buffer.from('echo hi\n')]), { binary: true });
    ws.send(Buffer.alloc(100_000, 7), { binary: true });
    await eventually(() => replies.length === 2);
    assert.deepEqual(replies[0], Buffer.from([1, ...Buffer.from('echo hi\n')]));
    assert.equal(replies[1]!.length, 100_000);
    assert.equal(gateway.proxy.stats().openUpgrades, 1);

    ws.close();
    await eventually(() => upstreamClosed === 1 && gateway.proxy.stats().openUpgrades === 0);
  });

  it('relays a refused upgrade verbatim so kubectl can fall back to SPDY', async () => {
    const req = http.request({
      host: '127.0.0.1',
      port: gateway.front.port,
      path: `${PROXY_PREFIX}c1/proxy/api/v1/namespaces/forbidden/pods/p/exec?command=ls`,
      headers: {
        Connection: 'Upgrade',
        Upgrade: 'websocket',
        'Sec-WebSocket-Version': '13',
        'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==',
        'Sec-WebSocket-Protocol': 'v5.channel.k8s.io',
      },
    });
    req.end();
    const [res] = (await once(req, 'response')) as [http.IncomingMessage];
    const chunks: Buffer[] = [];
    for await (const chunk of res) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString();
    assert.equal(res.statusCode, 403);
    assert.equal(res.statusMessage, 'Forbidden');
    assert.equal(res.headers['audit-id'], 'a-403');
    assert.equal(res.headers['content-length'], String(body.length));
    assert.equal(res.headers['transfer-encoding'], undefined);
    assert.deepEqual(JSON.parse(body), {
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      code: 403,
      reason: 'Forbidden',
    });
  });
});

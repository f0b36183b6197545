import assert from 'node:assert/strict';
import type http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { type ClusterProxy, createClusterProxy } from './cluster-proxy.ts';
import {
  clusterTarget,
  constEndpoint,
  eventually,
  headerValues,
  PROXY_PREFIX,
  startFront,
  startUpstream,
  type TestServer,
} from './test-kit.ts';

/** A raw client connection that collects everything it receives. */
function connect(port: number): { socket: net.Socket; received: () => Buffer; ended: () => boolean } {
  const socket = net.connect(port, '127.0.0.1');
  const chunks: Buffer[] = [];
  let ended = false;
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.on('end', () => (ended = true));
  socket.on('error', () => {});
  return { socket, received: () => Buffer.concat(chunks), ended: () => ended };
}

function spdyRequest(port: number, path: string, method = 'POST', cluster = 'c1'): string {
  return (
    `${method} ${PROXY_PREFIX}${cluster}/proxy${path} HTTP/1.1\r\n` +
    `Host: 127.0.0.1:${port}\r\n` +
    'Connection: Upgrade\r\n' +
    'Upgrade: SPDY/3.1\r\n' +
    'X-Stream-Protocol-Version: v4.channel.k8s.io\r\n' +
    'X-Stream-Protocol-Version: v3.channel.k8s.io\r\n' +
    'X-Stream-Protocol-Version: v2.channel.k8s.io\r\n' +
    'Authorization: Bearer hub-token\r\n' +
    'Content-Length: 0\r\n\r\n'
  );
}

describe('SPDY upgrades', { timeout: 5000 }, () => {
  let upstream: TestServer;
  let front: TestServer;
  let proxy: ClusterProxy;
  let lastUpgrade: http.IncomingMessage | undefined;
  let upstreamReceived: Buffer[] = [];
  let upstreamEnded = false;

  before(async () => {
    upstream = await startUpstream((_req, res) => res.writeHead(404).end());
    upstream.server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
      lastUpgrade = req;
      upstreamReceived = head.length > 0 ? [head] : [];
      upstreamEnded = false;
      // The 101 and the server's first frame in one packet: the gateway must pass both on.
      socket.write(
        'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n' +
          'X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\nSRV-HELLO|',
      );
      if (req.url!.includes('goodbye')) {
        socket.end('bye');
        return;
      }
      socket.on('data', (chunk: Buffer) => {
        upstreamReceived.push(chunk);
        socket.write(Buffer.concat([Buffer.from('echo:'), chunk]));
      });
      socket.on('end', () => {
        upstreamEnded = true;
        socket.end();
      });
    });
    const target = clusterTarget('c1', await constEndpoint(upstream.port));
    // Port 1 on loopback: nothing listens there.
    const dead = clusterTarget('dead', { type: 'Const', address: 'https://127.0.0.1:1', insecure: true });
    proxy = createClusterProxy();
    front = await startFront(proxy, (name) => (name === 'dead' ? dead : target));
  });

  after(async () => {
    await front.close();
    proxy.close();
    await upstream.close();
  });

  it('upgrades POST + SPDY/3.1 and pipes raw bytes both ways', async () => {
    const path = '/api/v1/namespaces/default/pods/p/exec?command=sh&stdin=true&stdout=true';
    const client = connect(front.port);
    // Bytes right behind the request reach the gateway in the upgrade 'head'.
    client.socket.write(spdyRequest(front.port, path) + 'EARLY|');
    await eventually(() => client.received().includes('echo:EARLY|'));

    const text = client.received().toString('latin1');
    assert.match(text, /^HTTP\/1\.1 101 Switching Protocols\r\n/);
    assert.match(text, /\r\nUpgrade: SPDY\/3\.1\r\n/);
    assert.match(text, /\r\nX-Stream-Protocol-Version: v4\.channel\.k8s\.io\r\n/);
    assert.ok(text.endsWith('\r\n\r\nSRV-HELLO|echo:EARLY|'), text);

    assert.equal(lastUpgrade!.method, 'POST');
    assert.equal(lastUpgrade!.url, path);
    const h = lastUpgrade!.rawHeaders;
    assert.deepEqual(headerValues(h, 'upgrade'), ['SPDY/3.1']);
    assert.deepEqual(headerValues(h, 'x-stream-protocol-version'), [
      'v4.channel.k8s.io',
      'v3.channel.k8s.io',
      'v2.channel.k8s.io',
    ]);
    assert.deepEqual(headerValues(h, 'authorization'), ['Bearer cluster-token']);

    // Every byte value survives, in both directions.
    const binary = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const before = client.received().length;
    client.socket.write(binary);
    await eventually(() => client.received().length >= before + 5 + 256);
    assert.deepEqual(client.received().subarray(before), Buffer.concat([Buffer.from('echo:'), binary]));
    assert.equal(proxy.stats().openUpgrades, 1);

    // The caller hangs up: the cluster side ends too, and the gauge drops.
    client.socket.end();
    await eventually(() => upstreamEnded && client.ended() && proxy.stats().openUpgrades === 0);
    assert.deepEqual(Buffer.concat(upstreamReceived), Buffer.concat([Buffer.from('EARLY|'), binary]));
  });

  it('passes on a close from the cluster side', async () => {
    const client = connect(front.port);
    client.socket.write(spdyRequest(front.port, '/api/v1/namespaces/default/pods/p/attach/goodbye', 'GET'));
    await eventually(() => client.ended());
    assert.ok(client.received().toString().endsWith('\r\n\r\nSRV-HELLO|bye'));
    assert.equal(lastUpgrade!.method, 'GET');
    await eventually(() => proxy.stats().openUpgrades === 0);
  });

  it('answers 503 Status on the socket when the cluster cannot be reached', async () => {
    const client = connect(front.port);
    client.socket.write(spdyRequest(front.port, '/api/v1/namespaces/default/pods/p/exec', 'POST', 'dead'));
    await eventually(() => client.ended());
    const [head, body] = client.received().toString().split('\r\n\r\n') as [string, string];
    assert.match(head, /^HTTP\/1\.1 503 Service Unavailable\r\n/);
    assert.match(head, /\r\nContent-Type: application\/json\r\n/);
    assert.match(head, new RegExp(`\\r\\nContent-Length: ${Buffer.byteLength(body)}\\r\\n`));
    const status = JSON.parse(body);
    assert.equal(status.code, 503);
    assert.equal(status.message, 'cluster "dead" is unreachable: connect ECONNREFUSED 127.0.0.1:1');
  });
});

import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import type { ClusterTarget } from '../clusters/cluster.ts';
import { type ClusterProxy, createClusterProxy } from './cluster-proxy.ts';
import {
  clusterTarget,
  constEndpoint,
  listen,
  PROXY_PREFIX,
  send,
  startFront,
  startUpstream,
  type TestServer,
} from './test-kit.ts';

describe('egress through an HTTP CONNECT proxy (proxy-url)', { timeout: 5000 }, () => {
  let upstream: TestServer;
  let forwardProxy: TestServer;
  let front: TestServer;
  let proxy: ClusterProxy;
  const connects: { authority: string; authorization?: string }[] = [];

  before(async () => {
    upstream = await startUpstream((req, res) => res.end(`reached ${req.url}`));
    const server = http.createServer((_req, res) => res.writeHead(405).end());
    server.on('connect', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
      connects.push({ authority: req.url!, authorization: req.headers['proxy-authorization'] });
      if (req.headers['proxy-authorization'] !== `Basic ${Buffer.from('egress:p@ss').toString('base64')}`) {
        socket.end('HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      const [host, port] = req.url!.split(':') as [string, string];
      const out = net.connect(Number(port), host, () => {
        socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (head.length) out.write(head);
        out.pipe(socket).pipe(out);
      });
      out.on('error', () => socket.destroy());
      socket.on('error', () => out.destroy());
    });
    forwardProxy = await listen(server);

    const endpoint = await constEndpoint(upstream.port);
    const clusters: Record<string, ClusterTarget> = {
      egress: clusterTarget('egress', {
        ...endpoint,
        proxyUrl: `http://egress:p%40ss@127.0.0.1:${forwardProxy.port}`,
      }),
      denied: clusterTarget('denied', { ...endpoint, proxyUrl: `http://127.0.0.1:${forwardProxy.port}` }),
    };
    proxy = createClusterProxy();
    front = await startFront(proxy, (name) => clusters[name]);
  });

  after(async () => {
    await front.close();
    proxy.close();
    await forwardProxy.close();
    await upstream.close();
  });

  it('tunnels through the proxy with its credentials, TLS end to end', async () => {
    const reply = await send(front.port, `${PROXY_PREFIX}egress/proxy/api/v1/nodes?limit=1`);
    assert.equal(reply.status, 200);
    assert.equal(reply.body, 'reached /api/v1/nodes?limit=1');
    assert.deepEqual(connects.at(-1), {
      authority: `127.0.0.1:${upstream.port}`,
      authorization: `Basic ${Buffer.from('egress:p@ss').toString('base64')}`,
    });
  });

  it('answers 503 when the proxy refuses the CONNECT', async () => {
    const reply = await send(front.port, `${PROXY_PREFIX}denied/proxy/api`);
    assert.equal(reply.status, 503);
    assert.equal(
      JSON.parse(reply.body).message,
      `cluster "denied" is unreachable: egress proxy 127.0.0.1:${forwardProxy.port} refused CONNECT 127.0.0.1:${upstream.port}: 407`,
    );
  });
});

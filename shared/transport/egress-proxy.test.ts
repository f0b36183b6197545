import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { type ForwardFront, send, startForwardFront } from '../forward/test-kit.ts';
import type { TransportTarget } from './target.ts';
import { directTarget, listen, startUpstream, type TestServer } from './test-kit.ts';

describe('egress through an HTTP CONNECT proxy (proxy-url)', { timeout: 5000 }, () => {
  let upstream: TestServer;
  let forwardProxy: TestServer;
  let forwarding: ForwardFront;
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

    /** The upstream's direct target, through the forward proxy at `proxyUrl`. */
    const through = async (name: string, proxyUrl: string): Promise<TransportTarget> => {
      const direct = await directTarget(name, upstream.port);
      if (direct.endpoint.kind !== 'direct') throw new Error('a direct endpoint');
      return { ...direct, endpoint: { ...direct.endpoint, kind: 'egress', proxyUrl } };
    };
    const clusters: Record<string, TransportTarget> = {
      egress: await through('egress', `http://egress:p%40ss@127.0.0.1:${forwardProxy.port}`),
      denied: await through('denied', `http://127.0.0.1:${forwardProxy.port}`),
    };
    forwarding = await startForwardFront((name) => clusters[name]);
  });

  after(async () => {
    await forwarding.close();
    await forwardProxy.close();
    await upstream.close();
  });

  it('tunnels through the proxy with its credentials, TLS end to end', async () => {
    const reply = await send(forwarding.front.port, '/egress/api/v1/nodes?limit=1');
    assert.equal(reply.status, 200);
    assert.equal(reply.body, 'reached /api/v1/nodes?limit=1');
    assert.deepEqual(connects.at(-1), {
      authority: `127.0.0.1:${upstream.port}`,
      authorization: `Basic ${Buffer.from('egress:p@ss').toString('base64')}`,
    });
  });

  it('answers 503 when the proxy refuses the CONNECT', async () => {
    const reply = await send(forwarding.front.port, '/denied/api');
    assert.equal(reply.status, 503);
    assert.equal(
      JSON.parse(reply.body).message,
      `cluster "denied" is unreachable: egress proxy 127.0.0.1:${forwardProxy.port} refused CONNECT 127.0.0.1:${upstream.port}: 407`,
    );
  });
});

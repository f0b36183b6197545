import assert from 'node:assert/strict';
import http from 'node:http';
import http2 from 'node:http2';
import { after, before, describe, it } from 'node:test';
import { type ForwardFront, send, startForwardFront } from '../forward/test-kit.ts';
import type { TransportTarget } from './target.ts';
import { directTarget, eventually, listen, startUpstream, type TestServer, testPki } from './test-kit.ts';

describe('HTTP/2 to the cluster', { timeout: 10_000 }, () => {
  let h2: TestServer;
  let h1: TestServer;
  let forwarding: ForwardFront;
  let connections = 0;
  /** For each connection the server accepted, whether it resumed a TLS session. */
  const resumed: boolean[] = [];
  let goaway: (() => void) | undefined;
  const clusters = new Map<string, TransportTarget>();

  before(async () => {
    const { ca, server } = await testPki();
    // kube-apiserver's shape: h2 and HTTP/1.1 on one port, a small stream limit to exceed.
    const both = http2.createSecureServer({
      cert: server.cert,
      key: server.key,
      ca,
      allowHTTP1: true,
      settings: { maxConcurrentStreams: 2 },
    });
    both.on('secureConnection', (socket) => {
      connections++;
      resumed.push(socket.isSessionReused());
    });
    both.on('session', (session) => {
      goaway = () => session.goaway();
    });
    both.on('request', (req, res) => {
      if (req.url.includes('watch=true')) {
        res.writeHead(200, { 'content-type': 'application/json;stream=watch' });
        res.write('{"type":"ADDED"}\n');
        return; // held until the caller leaves
      }
      res.end(`${req.httpVersion} ${req.url}`);
    });
    h2 = await listen(both as unknown as http.Server);
    h1 = await startUpstream((req, res) => res.end(`${req.httpVersion} ${req.url}`), { http1Only: true });
    clusters.set('h2', await directTarget('h2', h2.port));
    clusters.set('h1', await directTarget('h1', h1.port));
    forwarding = await startForwardFront((name) => clusters.get(name), {
      idleTimeoutMs: 300,
      // An identity no header can carry (a newline in a group, as a webhook authenticator could return).
      identity: (req) =>
        req.url?.includes('bad-identity') ? { name: 'alice', groups: ['a\nb'], extra: {} } : undefined,
    });
  });

  after(async () => {
    await forwarding.close();
    await h2.close();
    await h1.close();
  });

  /** Opens a watch through the gateway; resolves with its response once the first event arrived. */
  async function watch(): Promise<{ req: http.ClientRequest; res: http.IncomingMessage }> {
    const req = http.get({
      host: '127.0.0.1',
      port: forwarding.front.port,
      path: '/h2/api/v1/pods?watch=true',
      agent: false,
    });
    req.on('error', () => {});
    const res = await new Promise<http.IncomingMessage>((resolve) => req.once('response', resolve));
    await new Promise((resolve) => res.once('data', resolve));
    return { req, res };
  }

  it('speaks HTTP/2 to a cluster that offers it, one connection for many requests', async () => {
    const before = connections;
    for (let i = 0; i < 5; i++) {
      const reply = await send(forwarding.front.port, `/h2/version?i=${i}`);
      assert.equal(reply.body, `2.0 /version?i=${i}`);
    }
    assert.equal(connections - before, 1);
  });

  it('ends a watch its caller left with a stream reset, keeping the connection', async () => {
    const before = connections;
    for (let i = 0; i < 5; i++) {
      const { req } = await watch();
      req.destroy();
      await eventually(() => forwarding.pools.stats().http2Streams === 0);
    }
    assert.equal(connections - before, 0, 'no new connection per watch (HTTP/1.1 needs one each)');
  });

  it("opens another session when every open one is at the server's stream limit", async () => {
    const watches = await Promise.all([watch(), watch(), watch()]);
    const stats = forwarding.pools.stats();
    assert.equal(stats.http2Streams, 3);
    assert.equal(
      stats.perCluster.find(([name]) => name === 'h2')?.[1],
      2,
      'two sessions of at most 2 streams',
    );
    for (const { req } of watches) req.destroy();
    await eventually(() => forwarding.pools.stats().http2Streams === 0);
  });

  it('a new session after the last one idled out resumes its TLS session', async () => {
    await eventually(() => forwarding.pools.stats().http2Sessions === 0, 2000); // idleTimeoutMs: 300
    const before = resumed.length;
    assert.equal((await send(forwarding.front.port, '/h2/c')).status, 200);
    await eventually(() => forwarding.pools.stats().http2Sessions === 0, 2000);
    assert.equal((await send(forwarding.front.port, '/h2/d')).status, 200);
    assert.deepEqual(resumed.slice(before), [true, true]);
  });

  it('moves to a new session after a GOAWAY, and closes idle sessions', async () => {
    await eventually(() => forwarding.pools.stats().http2Sessions === 0, 2000); // idleTimeoutMs: 300
    assert.equal((await send(forwarding.front.port, '/h2/a')).status, 200);
    goaway!();
    await new Promise((r) => setTimeout(r, 50));
    const before = connections;
    const reply = await send(forwarding.front.port, '/h2/b');
    assert.equal(reply.body, '2.0 /b');
    assert.equal(connections - before, 1);
    // Node's server never closes the connection it sent GOAWAY on: the gateway closes it (after a
    // 2 s linger), and the new session after its idle timeout, so none is left.
    await eventually(() => forwarding.pools.stats().http2Sessions === 0, 4000);
  });

  it('drops HTTP2-Settings and the other fields HTTP/2 forbids, instead of failing the request', async () => {
    const reply = await send(forwarding.front.port, '/h2/settings', {
      headers: ['HTTP2-Settings', 'AAMAAABkAAQAAP__', 'TE', 'gzip', 'Keep-Alive', 'timeout=5'],
    });
    assert.equal(reply.status, 200);
    assert.equal(reply.body, '2.0 /settings');
  });

  it('refuses an identity Node cannot send with a 400, on HTTP/2 as on HTTP/1.1', async () => {
    for (const cluster of ['h2', 'h1']) {
      const reply = await send(forwarding.front.port, `/${cluster}/bad-identity`);
      assert.equal(reply.status, 400, `${cluster}: ${reply.body}`);
      assert.match(
        JSON.parse(reply.body).message,
        /Invalid character in header content \["impersonate-group"\]/i,
      );
    }
    assert.equal((await send(forwarding.front.port, '/h2/after')).body, '2.0 /after');
  });

  it('uses HTTP/1.1 with a cluster that answers ALPN without h2', async () => {
    for (const path of ['one', 'two']) {
      const reply = await send(forwarding.front.port, `/h1/${path}`);
      assert.equal(reply.body, `1.1 /${path}`);
    }
    const h1Stats = forwarding.pools.stats().perCluster.find(([name]) => name === 'h1');
    assert.equal(h1Stats?.[1], 1, 'one pooled HTTP/1.1 socket, no session');
  });
});

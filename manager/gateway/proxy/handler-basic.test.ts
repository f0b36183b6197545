import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { after, before, describe, it } from 'node:test';
import type { ClusterTarget } from '../clusters/cluster.ts';
import { type ClusterProxy, createClusterProxy } from './cluster-proxy.ts';
import {
  clusterTarget,
  constEndpoint,
  headerValues,
  PROXY_PREFIX,
  send,
  startFront,
  startUpstream,
  type TestServer,
} from './test-kit.ts';

interface Seen {
  method: string;
  url: string;
  rawHeaders: string[];
  body: string;
  remotePort: number;
}

// kube-apiserver speaks HTTP/2 and HTTP/1.1; the proxy takes HTTP/2 when offered (http2-sessions.ts).
// 'passthrough': the cluster speaks both, and reads go the gateway's way (shared/forward/passthrough.ts).
for (const protocol of ['h2', 'http/1.1', 'passthrough'] as const)
  describe(`proxying plain requests (the cluster speaks ${protocol})`, { timeout: 5000 }, () => {
    const seen: Seen[] = [];
    const clusters = new Map<string, ClusterTarget>();
    let upstream: TestServer;
    let front: TestServer;
    let proxy: ClusterProxy;
    const last = () => seen.at(-1)!;

    before(async () => {
      upstream = await startUpstream(
        (req: IncomingMessage, res) => {
          const chunks: Buffer[] = [];
          req.on('data', (c: Buffer) => chunks.push(c));
          req.on('end', () => {
            const body = Buffer.concat(chunks).toString();
            seen.push({
              method: req.method!,
              url: req.url!,
              rawHeaders: req.rawHeaders,
              body,
              remotePort: req.socket.remotePort!,
            });
            if (req.url!.includes('/forbidden')) {
              res.writeHead(403, 'Forbidden', ['Content-Type', 'application/json', 'Audit-Id', 'a-1']);
              res.end('{"kind":"Status","code":403,"reason":"Forbidden"}');
              return;
            }
            res.writeHead(200, 'Fine', [
              'Content-Type',
              'text/plain',
              'Set-Cookie',
              'a=1',
              'Set-Cookie',
              'b=2',
              'Warning',
              '299 - "first"',
              'Warning',
              '299 - "second"',
            ]);
            res.end(`${req.method} ${body.length}`);
          });
        },
        { http1Only: protocol === 'http/1.1' },
      );
      const endpoint = await constEndpoint(upstream.port);
      clusters.set('c1', clusterTarget('c1', endpoint));
      clusters.set('prod.eu.example.com', clusterTarget('prod.eu.example.com', endpoint));
      clusters.set('sub', clusterTarget('sub', await constEndpoint(upstream.port, '/prefix/')));
      proxy = createClusterProxy({ passThrough: protocol === 'passthrough' });
      front = await startFront(
        proxy,
        (name) => clusters.get(name),
        (req) =>
          req.headers['x-test-impersonate']
            ? { name: 'alice', uid: 'u1', groups: ['g1', 'g2'], extra: { 'example.com/team': ['t1', 't2'] } }
            : undefined,
      );
    });

    after(async () => {
      await front.close();
      proxy.close();
      await upstream.close();
    });

    it('forwards GET with the raw query untouched', async () => {
      const query =
        '?dryRun=All&fieldSelector=metadata.name%3Dx&labelSelector=a+in+(b,c)&a=1&a=2&impersonate=true';
      const reply = await send(front.port, `${PROXY_PREFIX}c1/proxy/api/v1/namespaces/default/pods${query}`);
      assert.equal(reply.status, 200);
      assert.equal(last().method, 'GET');
      assert.equal(last().url, `/api/v1/namespaces/default/pods${query}`);
    });

    it('sets Host and the cluster token, and strips the caller credentials', async () => {
      const reply = await send(front.port, `${PROXY_PREFIX}c1/proxy/api`, {
        headers: [
          'Authorization',
          'Bearer hub-token',
          'Impersonate-User',
          'evil',
          'X-Remote-User',
          'evil',
          'Accept',
          'application/json',
          'Accept',
          'application/yaml',
        ],
      });
      assert.equal(reply.status, 200);
      const h = last().rawHeaders;
      // HTTP/2 carries Host as :authority (RFC 9113 §8.3.1).
      assert.deepEqual(headerValues(h, protocol === 'h2' ? ':authority' : 'host'), [
        `127.0.0.1:${upstream.port}`,
      ]);
      assert.deepEqual(headerValues(h, 'authorization'), ['Bearer cluster-token']);
      assert.deepEqual(headerValues(h, 'impersonate-user'), []);
      assert.deepEqual(headerValues(h, 'x-remote-user'), []);
      assert.deepEqual(headerValues(h, 'accept'), ['application/json', 'application/yaml']);
      assert.deepEqual(headerValues(h, 'x-forwarded-for'), ['127.0.0.1']);
    });

    it('impersonates the caller when an identity is given', async () => {
      await send(front.port, `${PROXY_PREFIX}c1/proxy/api`, {
        headers: { 'x-test-impersonate': '1', 'Impersonate-Group': 'system:masters' },
      });
      const h = last().rawHeaders;
      assert.deepEqual(headerValues(h, 'impersonate-user'), ['alice']);
      assert.deepEqual(headerValues(h, 'impersonate-uid'), ['u1']);
      assert.deepEqual(headerValues(h, 'impersonate-group'), ['g1', 'g2']);
      assert.deepEqual(headerValues(h, 'impersonate-extra-example.com%2fteam'), ['t1', 't2']);
    });

    it('streams request bodies up, with Content-Length or chunked', async () => {
      const big = 'x'.repeat(300_000);
      const sized = await send(front.port, `${PROXY_PREFIX}c1/proxy/api/v1/namespaces/default/configmaps`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'Content-Length': String(big.length) },
        body: big,
      });
      assert.equal(sized.body, `POST ${big.length}`);
      assert.deepEqual(headerValues(last().rawHeaders, 'content-length'), [String(big.length)]);

      const chunked = await send(
        front.port,
        `${PROXY_PREFIX}c1/proxy/api/v1/namespaces/default/configmaps/x`,
        {
          method: 'DELETE',
          headers: { 'Transfer-Encoding': 'chunked' },
          body: '{"propagationPolicy":"Foreground"}',
        },
      );
      assert.equal(chunked.body, 'DELETE 34');
      assert.equal(last().body, '{"propagationPolicy":"Foreground"}');
    });

    it('supports every method', async () => {
      for (const method of ['PUT', 'PATCH', 'OPTIONS']) {
        const reply = await send(front.port, `${PROXY_PREFIX}c1/proxy/api/v1/x`, {
          method,
          headers: { 'Content-Length': '3' },
          body: 'abc',
        });
        assert.equal(reply.body, `${method} 3`);
        assert.equal(last().method, method);
      }
      const head = await send(front.port, `${PROXY_PREFIX}c1/proxy/api/v1/x`, { method: 'HEAD' });
      assert.equal(head.status, 200);
      assert.equal(head.body, '');
      assert.equal(last().method, 'HEAD');
    });

    it('passes the response through with repeated headers and reason phrase', async () => {
      const reply = await send(front.port, `${PROXY_PREFIX}c1/proxy/api`);
      // HTTP/2 has no reason phrase: the caller gets the standard one, as from Go's proxy.
      assert.equal(reply.statusMessage, protocol === 'h2' ? 'OK' : 'Fine');
      assert.deepEqual(headerValues(reply.rawHeaders, 'set-cookie'), ['a=1', 'b=2']);
      assert.deepEqual(headerValues(reply.rawHeaders, 'warning'), ['299 - "first"', '299 - "second"']);
      assert.equal(headerValues(reply.rawHeaders, 'date').length, 1);
    });

    it('passes upstream errors through untouched', async () => {
      const reply = await send(front.port, `${PROXY_PREFIX}c1/proxy/api/v1/secrets/forbidden`);
      assert.equal(reply.status, 403);
      assert.equal(reply.statusMessage, 'Forbidden');
      assert.equal(reply.headers['audit-id'], 'a-1');
      assert.equal(reply.body, '{"kind":"Status","code":403,"reason":"Forbidden"}');
    });

    it('joins onto an endpoint sub-path', async () => {
      await send(front.port, `${PROXY_PREFIX}sub/proxy/api/v1/pods?limit=1`);
      assert.equal(last().url, '/prefix/api/v1/pods?limit=1');
      await send(front.port, `${PROXY_PREFIX}sub/proxy/../../other/api`);
      assert.equal(last().url, '/prefix/other/api');
    });

    it('serves cluster names with dots', async () => {
      const reply = await send(front.port, `${PROXY_PREFIX}prod.eu.example.com/proxy/healthz?dryRun=All`);
      assert.equal(reply.status, 200);
      assert.equal(last().url, '/healthz?dryRun=All');
    });

    it('reuses upstream connections', async () => {
      await send(front.port, `${PROXY_PREFIX}c1/proxy/a`);
      const first = last().remotePort;
      await send(front.port, `${PROXY_PREFIX}c1/proxy/b`);
      assert.equal(last().remotePort, first);
      assert.equal(proxy.stats().pools, 3);
      // Passed through, reads open no session: c1's one is from the HEAD and the writes above.
      assert.equal(proxy.stats().http2Sessions, protocol === 'h2' ? 3 : protocol === 'passthrough' ? 1 : 0);
    });
  });

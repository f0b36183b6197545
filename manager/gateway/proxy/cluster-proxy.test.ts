import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import type { TLSSocket } from 'node:tls';
import type { ProxyEvent } from '../../../shared/forward/context.ts';
import type { ClusterTarget } from '../clusters/cluster.ts';
import { type ClusterProxy, createClusterProxy } from './cluster-proxy.ts';
import {
  clusterTarget,
  constEndpoint,
  eventually,
  PROXY_PREFIX,
  send,
  startFront,
  startUpstream,
  type TestServer,
  testPki,
} from './test-kit.ts';

describe('createClusterProxy', { timeout: 5000 }, () => {
  let upstream: TestServer;
  let mtlsUpstream: TestServer;
  let front: TestServer;
  let proxy: ClusterProxy;
  const clusters = new Map<string, ClusterTarget>();
  const events: ProxyEvent[] = [];
  const seen: { authorization?: string; port: number }[] = [];
  const closedPorts = new Set<number>();
  let releaseWatch: (() => void) | undefined;

  before(async () => {
    upstream = await startUpstream((req, res) => {
      const port = req.socket.remotePort!;
      seen.push({ authorization: req.headers.authorization, port });
      req.socket.once('close', () => closedPorts.add(port));
      if (req.url!.includes('watch=true')) {
        res.writeHead(200).flushHeaders();
        releaseWatch = () => res.end('{"type":"DONE"}\n');
        return;
      }
      res.end('ok');
    });
    mtlsUpstream = await startUpstream(
      (req, res) => res.end(`client ${(req.socket as TLSSocket).getPeerCertificate().subject.CN}`),
      { requestCert: true },
    );
    clusters.set('c1', clusterTarget('c1', await constEndpoint(upstream.port)));
    const { client } = await testPki();
    clusters.set(
      'mtls',
      clusterTarget('mtls', await constEndpoint(mtlsUpstream.port), {
        type: 'X509Certificate',
        certificate: client.cert,
        privateKey: client.key,
      }),
    );
    proxy = createClusterProxy({ onComplete: (e) => events.push(e) });
    front = await startFront(proxy, (name) => clusters.get(name));
  });

  after(async () => {
    await front.close();
    proxy.close();
    await upstream.close();
    await mtlsUpstream.close();
  });

  it('reports each finished request', async () => {
    await send(front.port, `${PROXY_PREFIX}c1/proxy/api/v1/pods?limit=1`, { method: 'GET' });
    await eventually(() => events.length > 0);
    const event = events.at(-1)!;
    assert.equal(event.cluster, 'c1');
    assert.equal(event.method, 'GET');
    assert.equal(event.upstreamPath, '/api/v1/pods?limit=1');
    assert.equal(event.code, 200);
    assert.equal(event.upgrade, false);
    assert.equal(event.error, undefined);
    assert.ok(event.durationMs >= 0);
  });

  it('authenticates with a client certificate credential', async () => {
    const reply = await send(front.port, `${PROXY_PREFIX}mtls/proxy/version`);
    assert.equal(reply.status, 200);
    assert.equal(reply.body, 'client gateway');
  });

  it('switches to a new pool when the credential rotates, letting in-flight requests finish', async () => {
    const before = await send(front.port, `${PROXY_PREFIX}c1/proxy/api`);
    assert.equal(before.status, 200);
    assert.equal(seen.at(-1)!.authorization, 'Bearer cluster-token');

    // A watch holds one socket of the old pool.
    const watch = http.get({
      host: '127.0.0.1',
      port: front.port,
      path: `${PROXY_PREFIX}c1/proxy/api/v1/pods?watch=true`,
    });
    const [watchRes] = (await new Promise((resolve) => watch.once('response', (r) => resolve([r])))) as [
      http.IncomingMessage,
    ];
    const oldPorts = new Set(seen.map((s) => s.port));
    const watchPort = seen.at(-1)!.port;

    clusters.set(
      'c1',
      clusterTarget(
        'c1',
        await constEndpoint(upstream.port),
        { type: 'ServiceAccountToken', token: 'rotated' },
        'key-2',
      ),
    );
    const after = await send(front.port, `${PROXY_PREFIX}c1/proxy/api`);
    assert.equal(after.status, 200);
    assert.equal(seen.at(-1)!.authorization, 'Bearer rotated');
    assert.ok(!oldPorts.has(seen.at(-1)!.port), 'the rotated credential uses a new connection');

    let stats = proxy.stats();
    assert.equal(stats.pools, 2); // c1 (new) and mtls
    assert.equal(stats.retired, 1); // the old c1 pool, still serving the watch
    // The watch is a stream of the old pool's HTTP/2 session (the stand-in apiserver offers h2).
    assert.equal(stats.http2Streams, 1);
    assert.equal(stats.inflightRequests, 1);

    // The watch ends: the old session closes (GOAWAY once its last stream is done), and the old pool goes away.
    const body: Buffer[] = [];
    watchRes.on('data', (c: Buffer) => body.push(c));
    releaseWatch!();
    await new Promise((r) => watchRes.once('end', r));
    assert.equal(Buffer.concat(body).toString(), '{"type":"DONE"}\n');
    await eventually(() => closedPorts.has(watchPort));
    await eventually(() => proxy.stats().retired === 0);
    stats = proxy.stats();
    assert.equal(stats.http2Streams, 0);
    assert.equal(stats.http2Sessions, 2); // the new c1 pool's and mtls's
    assert.equal(stats.inflightRequests, 0);
  });

  it('forgets deleted clusters and closes everything', async () => {
    proxy.forget('mtls');
    assert.equal(proxy.stats().pools, 1);
    proxy.close();
    assert.deepEqual(proxy.stats(), {
      pools: 0,
      retired: 0,
      activeSockets: 0,
      idleSockets: 0,
      queuedRequests: 0,
      http2Sessions: 0,
      http2Streams: 0,
      perCluster: [],
      inflightRequests: 0,
      openUpgrades: 0,
    });
  });
});

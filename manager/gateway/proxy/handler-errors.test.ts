import assert from 'node:assert/strict';
import net from 'node:net';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import type { ProxyEvent } from '../../../shared/forward/context.ts';
import type { ClusterTarget } from '../clusters/cluster.ts';
import { type ClusterProxy, createClusterProxy } from './cluster-proxy.ts';
import {
  clusterTarget,
  constEndpoint,
  PROXY_PREFIX,
  send,
  startFront,
  startUpstream,
  type TestServer,
} from './test-kit.ts';

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

describe('errors reaching a cluster', { timeout: 5000 }, () => {
  const clusters = new Map<string, ClusterTarget>();
  const events: ProxyEvent[] = [];
  let upstream: TestServer;
  let front: TestServer;
  /** Streams the slow tunnel handed over, each after the connect deadline had passed. */
  const lateStreams: PassThrough[] = [];
  let proxy: ClusterProxy;
  let deadPort: number;

  before(async () => {
    upstream = await startUpstream((req, res) => {
      // Dies half way through its body.
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write('{"items":[');
      // Its connection goes: on HTTP/2 the session's socket, not only this stream.
      const h2 = (req as unknown as { stream?: { session?: { socket: { destroy(): void } } } }).stream;
      setTimeout(() => (h2?.session?.socket ?? req.socket).destroy(), 10);
    });
    deadPort = await closedPort();
    clusters.set('refused', clusterTarget('refused', await constEndpoint(deadPort)));
    clusters.set('broken', {
      ...clusterTarget('broken', await constEndpoint(upstream.port)),
      endpoint: undefined,
      problem: 'secret open-cluster-management-credentials/broken has no endpoint',
    });
    clusters.set('socks', {
      ...clusterTarget('socks', {
        ...(await constEndpoint(upstream.port)),
        proxyUrl: `socks5://user:secret@127.0.0.1:${deadPort}`,
      }),
    });
    clusters.set(
      'untrusted',
      clusterTarget('untrusted', {
        type: 'Const',
        address: `https://127.0.0.1:${upstream.port}`,
        insecure: false,
      }),
    );
    clusters.set('dying', clusterTarget('dying', await constEndpoint(upstream.port)));
    clusters.set(
      'black-hole',
      clusterTarget('black-hole', {
        type: 'ClusterProxy',
        serverName: 'kubernetes.default.svc',
        insecure: true,
        dial: () => new Promise(() => {}),
      }),
    );
    clusters.set(
      'slow-tunnel',
      clusterTarget('slow-tunnel', {
        type: 'ClusterProxy',
        serverName: 'kubernetes.default.svc',
        insecure: true,
        dial: () =>
          new Promise((resolve) =>
            setTimeout(() => {
              const stream = new PassThrough();
              lateStreams.push(stream);
              resolve(stream);
            }, 300),
          ),
      }),
    );
    proxy = createClusterProxy({ connectTimeoutMs: 200, onComplete: (e) => events.push(e) });
    front = await startFront(proxy, (name) => clusters.get(name));
  });

  after(async () => {
    await front.close();
    proxy.close();
    await upstream.close();
  });

  async function status(cluster: string) {
    const reply = await send(front.port, `${PROXY_PREFIX}${cluster}/proxy/api/v1/pods`);
    assert.equal(reply.status, 503);
    assert.equal(reply.headers['content-type'], 'application/json');
    const body = JSON.parse(reply.body);
    assert.equal(body.kind, 'Status');
    assert.equal(body.apiVersion, 'v1');
    assert.equal(body.status, 'Failure');
    assert.equal(body.reason, 'ServiceUnavailable');
    assert.equal(body.code, 503);
    assert.deepEqual(body.details, { name: cluster, group: 'cluster.core.oam.dev', kind: 'clustergateways' });
    return body.message as string;
  }

  it('answers 503 naming the cluster when the connection is refused', async () => {
    assert.equal(
      await status('refused'),
      `cluster "refused" is unreachable: connect ECONNREFUSED 127.0.0.1:${deadPort}`,
    );
    const event = events.at(-1)!;
    assert.equal(event.cluster, 'refused');
    assert.equal(event.code, 503);
    assert.match(event.error ?? '', /ECONNREFUSED/);
  });

  it('answers 503 with the problem when endpoint or credential is missing', async () => {
    assert.equal(
      await status('broken'),
      'cluster "broken" is unreachable: secret open-cluster-management-credentials/broken has no endpoint',
    );
  });

  it('goes through a socks5 proxy-url, not directly, and names the proxy without its password', async () => {
    const message = await status('socks');
    assert.equal(
      message,
      `cluster "socks" is unreachable: SOCKS5 proxy 127.0.0.1:${deadPort}: connect ECONNREFUSED 127.0.0.1:${deadPort}`,
    );
    assert.doesNotMatch(message, /secret/);
  });

  it('reports TLS verification failures', async () => {
    assert.match(await status('untrusted'), /^cluster "untrusted" is unreachable: .*certificate/);
  });

  it('gives up on a connection that never opens', async () => {
    assert.equal(
      await status('black-hole'),
      'cluster "black-hole" is unreachable: timed out after 200 ms opening a connection',
    );
  });

  it('closes a tunnel stream that opens after the deadline, unused', async () => {
    assert.equal(
      await status('slow-tunnel'),
      'cluster "slow-tunnel" is unreachable: timed out after 200 ms opening a connection',
    );
    await new Promise((r) => setTimeout(r, 200));
    assert.ok(lateStreams.length > 0, 'the dial finished');
    for (const stream of lateStreams) {
      assert.equal(stream.destroyed, true);
      assert.equal(stream.readableLength + stream.writableLength, 0, 'nothing was written to it');
    }
  });

  it('truncates the response when the cluster dies mid-body', async () => {
    await assert.rejects(send(front.port, `${PROXY_PREFIX}dying/proxy/api/v1/pods`));
  });
});

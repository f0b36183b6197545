import assert from 'node:assert/strict';
import type http from 'node:http';
import net from 'node:net';
import { type Duplex, duplexPair } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import type { ClusterTarget, TunnelEndpoint } from '../clusters/cluster.ts';
import { type ClusterProxy, createClusterProxy } from './cluster-proxy.ts';
import {
  clusterTarget,
  eventually,
  headerValues,
  PROXY_PREFIX,
  send,
  startFront,
  startUpstream,
  type TestServer,
  testPki,
} from './test-kit.ts';

describe('clusters behind a tunnel (ClusterProxy endpoints)', { timeout: 5000 }, () => {
  let upstream: TestServer;
  let front: TestServer;
  let proxy: ClusterProxy;
  let target: ClusterTarget;
  let lastRequest: http.IncomingMessage | undefined;
  const dials = { a: 0, b: 0 };

  /** The agent tunnel stand-in: one raw byte stream to the apiserver per call. */
  const dialer = (name: keyof typeof dials) => (): Promise<Duplex> => {
    dials[name]++;
    const socket = net.connect(upstream.port, '127.0.0.1');
    return new Promise((resolve, reject) => {
      socket.once('connect', () => resolve(socket));
      socket.once('error', reject);
    });
  };

  async function tunnelEndpoint(dial: () => Promise<Duplex>): Promise<TunnelEndpoint> {
    return {
      type: 'ClusterProxy',
      serverName: 'kubernetes.default.svc',
      caBundle: (await testPki()).ca,
      insecure: false,
      dial,
    };
  }

  before(async () => {
    upstream = await startUpstream((req, res) => {
      lastRequest = req;
      res.end(`hello over ${req.socket.constructor.name}`);
    });
    upstream.server.on('upgrade', (_req: http.IncomingMessage, socket: Duplex) => {
      socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n');
      socket.pipe(socket);
    });
    target = clusterTarget('tunnelled', await tunnelEndpoint(dialer('a')));
    const failing = clusterTarget(
      'gone',
      await tunnelEndpoint(() => Promise.reject(new Error('no tunnel from agent of cluster "gone"'))),
    );
    proxy = createClusterProxy();
    front = await startFront(proxy, (name) => (name === 'gone' ? failing : target));
  });

  after(async () => {
    await front.close();
    proxy.close();
    await upstream.close();
  });

  it('runs TLS to the apiserver inside the dialled stream, and reuses it', async () => {
    const first = await send(front.port, `${PROXY_PREFIX}tunnelled/proxy/api/v1/namespaces?limit=5`);
    assert.equal(first.status, 200);
    assert.equal(lastRequest!.url, '/api/v1/namespaces?limit=5');
    // HTTP/2 inside the tunnel (the stand-in apiserver offers it, as kube-apiserver does): Host is :authority.
    assert.deepEqual(headerValues(lastRequest!.rawHeaders, ':authority'), ['kubernetes.default.svc']);
    assert.deepEqual(headerValues(lastRequest!.rawHeaders, 'authorization'), ['Bearer cluster-token']);
    await send(front.port, `${PROXY_PREFIX}tunnelled/proxy/healthz`);
    assert.equal(dials.a, 1);
  });

  it('upgrades through the tunnel', async () => {
    const client = net.connect(front.port, '127.0.0.1');
    const chunks: Buffer[] = [];
    client.on('data', (c: Buffer) => chunks.push(c));
    client.write(
      `POST ${PROXY_PREFIX}tunnelled/proxy/api/v1/namespaces/d/pods/p/portforward HTTP/1.1\r\n` +
        'Host: gw\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n' +
        'X-Stream-Protocol-Version: portforward.k8s.io\r\nContent-Length: 0\r\n\r\n',
    );
    await eventually(() => Buffer.concat(chunks).includes('\r\n\r\n'));
    client.write('tunnelled bytes');
    await eventually(() => Buffer.concat(chunks).toString().endsWith('tunnelled bytes'));
    assert.match(Buffer.concat(chunks).toString(), /^HTTP\/1\.1 101 /);
    client.destroy();
    await eventually(() => proxy.stats().openUpgrades === 0);
  });

  it("uses the latest dial() after the agent's tunnel reconnects", async () => {
    upstream.dropConnections();
    await eventually(() => proxy.stats().idleSockets === 0 && proxy.stats().http2Sessions === 0);
    target = { ...target, endpoint: await tunnelEndpoint(dialer('b')) }; // same connectionKey
    assert.equal((await send(front.port, `${PROXY_PREFIX}tunnelled/proxy/healthz`)).status, 200);
    assert.equal(dials.b, 1);
  });

  it('works over any Duplex, not only sockets (an HTTP/2 CONNECT stream in production)', async () => {
    let wrapped = 0;
    const viaPair = clusterTarget(
      'paired',
      await tunnelEndpoint(async () => {
        wrapped++;
        const [ours, theirs] = duplexPair();
        const socket = await dialer('a')();
        theirs.pipe(socket).pipe(theirs);
        return ours;
      }),
    );
    const saved = target;
    target = viaPair;
    try {
      const reply = await send(front.port, `${PROXY_PREFIX}paired/proxy/version`);
      assert.equal(reply.status, 200);
      assert.equal(wrapped, 1);
    } finally {
      target = saved;
    }
  });

  it('answers 503 when the tunnel cannot be opened', async () => {
    const reply = await send(front.port, `${PROXY_PREFIX}gone/proxy/healthz`);
    assert.equal(reply.status, 503);
    assert.equal(
      JSON.parse(reply.body).message,
      'cluster "gone" is unreachable: no tunnel from agent of cluster "gone"',
    );
  });
});

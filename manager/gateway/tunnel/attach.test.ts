import assert from 'node:assert/strict';
import type http from 'node:http';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { AttachRefusedError, requestAttach } from '../../../agent/tunnel/attach-request.ts';
import { TunnelMetrics } from '../../../agent/tunnel/metrics.ts';
import { Relay } from '../../../agent/tunnel/relay.ts';
import type { ClusterTarget } from '../clusters/cluster.ts';
import { type ClusterProxy, createClusterProxy } from '../proxy/cluster-proxy.ts';
import {
  clusterTarget,
  eventually,
  PROXY_PREFIX,
  send,
  startFront,
  startUpstream,
  type TestServer,
  testPki,
} from '../proxy/test-kit.ts';
import { matchAttachPath } from './attach.ts';
import { agentUser, recordingAuthorizer, startTestGateway, type TestGateway } from './test-kit.ts';

const quietLog = { debug() {}, info() {}, warn() {} };

describe('attach: the gateway end of an agent tunnel', { timeout: 15_000 }, () => {
  let gateway: TestGateway;
  let upstream: TestServer;
  let proxy: ClusterProxy;
  let front: TestServer;
  const relays: Relay[] = [];
  let bigFinished: boolean | undefined;
  /** Clusters whose agents lose their grant. */
  const revoked = new Set<string>();
  const decisions = recordingAuthorizer(
    (user, a) =>
      a.kind === 'resource' &&
      user.name !== agentUser('denied') &&
      !(a.name !== undefined && revoked.has(a.name)),
  );

  /** The real agent side: attach as `user` for `cluster`, relay streams to the test apiserver. */
  async function attachAgent(cluster: string, user = agentUser(cluster)): Promise<Relay> {
    const { socket, head } = await requestAttach(await gateway.connection(user), cluster, {
      timeoutMs: 5_000,
    });
    const relay = new Relay(socket, head, {
      target: { host: '127.0.0.1', port: upstream.port },
      metrics: new TunnelMetrics(),
      log: quietLog,
    });
    relays.push(relay);
    return relay;
  }

  let ca = '';
  const keys = new WeakMap<object, string>();
  /** The cluster as the registry would merge it: the tunnel endpoint, TLS verified with the test CA. */
  function target(name: string): ClusterTarget | undefined {
    const endpoint = gateway.endpoints.get(name);
    if (!endpoint) return undefined;
    if (!keys.has(endpoint)) keys.set(endpoint, `tunnel-${Math.random()}`);
    return clusterTarget(name, { ...endpoint, caBundle: ca }, undefined, keys.get(endpoint));
  }

  before(async () => {
    upstream = await startUpstream((req, res) => {
      if (req.url?.startsWith('/big')) {
        // 256 MiB: far more than every window and buffer on the way, so an unread response stalls.
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        bigFinished = false;
        res.once('finish', () => {
          bigFinished = true;
        });
        // Written as a Go server writes, waiting on flow control: Node's HTTP/2 server refuses new
        // streams (ENHANCE_YOUR_CALM) once a session buffers over 10 MB of unsent data.
        const chunk = Buffer.alloc(1 << 20, 1);
        let left = 256;
        const more = (): void => {
          while (left > 0) {
            left--;
            if (!res.write(chunk)) {
              res.once('drain', more);
              return;
            }
          }
          res.end();
        };
        more();
        return;
      }
      res.end(`served ${req.url} with ${req.headers.authorization}`);
    });
    upstream.server.on('upgrade', (_req: http.IncomingMessage, socket: net.Socket) => {
      socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n');
      socket.pipe(socket);
    });
    gateway = await startTestGateway({ authorizer: decisions.authorizer, reauthorizeMs: 50 });
    ca = (await testPki()).ca;
    proxy = createClusterProxy();
    front = await startFront(proxy, target);
  });

  after(async () => {
    for (const relay of relays) relay.destroy();
    await front.close();
    proxy.close();
    await gateway.close();
    await upstream.close();
  });

  it('matches only clustergateways/<name>/attach', () => {
    assert.equal(matchAttachPath('/apis/cluster.core.oam.dev/v1alpha1/clustergateways/c1/attach'), 'c1');
    assert.equal(matchAttachPath('/apis/cluster.core.oam.dev/v1alpha1/clustergateways/c1/attach?x=1'), 'c1');
    assert.equal(
      matchAttachPath('/apis/cluster.core.oam.dev/v1alpha1/clustergateways/c1/attach/more'),
      undefined,
    );
    assert.equal(
      matchAttachPath('/apis/cluster.core.oam.dev/v1alpha1/clustergateways/c1/proxy/x'),
      undefined,
    );
  });

  it("registers the agent's cluster and carries proxied requests to its apiserver, TLS inside", async () => {
    await attachAgent('c1');
    await eventually(() => gateway.endpoints.has('c1'), 2000);
    assert.deepEqual(decisions.asked.at(-1), {
      kind: 'resource',
      verb: 'create',
      group: 'cluster.core.oam.dev',
      version: 'v1alpha1',
      resource: 'clustergateways',
      subresource: 'attach',
      name: 'c1',
    });
    const reply = await send(front.port, `${PROXY_PREFIX}c1/proxy/api/v1/namespaces`);
    assert.equal(reply.status, 200);
    assert.equal(reply.body, 'served /api/v1/namespaces with Bearer cluster-token');
    assert.equal(gateway.tunnels.list()[0]?.agent, agentUser('c1'));
  });

  it('upgrades (exec, port-forward) travel through a stream as raw bytes', async () => {
    const client = net.connect(front.port, '127.0.0.1');
    const chunks: Buffer[] = [];
    client.on('data', (c: Buffer) => chunks.push(c));
    client.write(
      `POST ${PROXY_PREFIX}c1/proxy/api/v1/namespaces/d/pods/p/exec HTTP/1.1\r\n` +
        'Host: gw\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nContent-Length: 0\r\n\r\n',
    );
    await eventually(() => Buffer.concat(chunks).includes('\r\n\r\n'), 3000);
    client.write('echo me');
    await eventually(() => Buffer.concat(chunks).toString().endsWith('echo me'), 3000);
    assert.match(Buffer.concat(chunks).toString(), /^HTTP\/1\.1 101 /);
    client.destroy();
  });

  it('a stalled stream (a reader that stopped reading) does not stall the others', async () => {
    const stalled = net.connect(front.port, '127.0.0.1');
    stalled.write(`GET ${PROXY_PREFIX}c1/proxy/big HTTP/1.1\r\nHost: gw\r\n\r\n`);
    stalled.pause(); // never read: its window fills, all the way back to the agent
    await new Promise((r) => setTimeout(r, 300));
    const started = performance.now();
    for (let i = 0; i < 5; i++) {
      const reply = await send(front.port, `${PROXY_PREFIX}c1/proxy/healthz`);
      assert.equal(reply.status, 200, reply.body);
    }
    assert.ok(performance.now() - started < 2000, 'other requests were served while one stream was stalled');
    assert.equal(bigFinished, false, 'the big response is really stalled');
    stalled.destroy();
  });

  it("refuses an identity for another cluster, even when the hub's RBAC would allow it", async () => {
    // Reviews about c2 (live tunnels are reviewed again all the time, about their own names).
    const aboutC2 = () => decisions.asked.filter((a) => a.kind === 'resource' && a.name === 'c2').length;
    const before = aboutC2();
    await assert.rejects(attachAgent('c2', agentUser('c1')), (err: unknown) => {
      assert.ok(err instanceof AttachRefusedError);
      assert.equal(err.code, 403);
      assert.match(err.message, /is the agent of cluster "c1" and may only attach as "c1"/);
      return true;
    });
    assert.equal(aboutC2(), before, 'refused before any SubjectAccessReview');
    assert.equal(gateway.endpoints.has('c2'), false);
    assert.ok(
      gateway.logs.some((l) => l.level === 'warn' && l.message === 'agent tunnel attach refused'),
      'refusal logged',
    );
  });

  it("refuses users that are not an addon agent, and other addons' agents", async () => {
    await assert.rejects(attachAgent('c2', 'alice'), /403: .*"alice" is not an OCM addon agent/);
    await assert.rejects(
      attachAgent('c2', agentUser('c2', 'other-addon')),
      /403: .*agent of addon "other-addon", not "cluster-gateway"/,
    );
  });

  it('refuses when the SubjectAccessReview denies', async () => {
    await assert.rejects(
      attachAgent('denied'),
      /403: clustergateways "denied" is forbidden: User ".*" cannot create resource "clustergateways\/attach".*: no RBAC rule/,
    );
  });

  it('refuses another upgrade protocol with a 400', async () => {
    const pki = await testPki();
    const tls = await import('node:tls');
    const socket = tls.connect({
      port: gateway.server.port,
      host: '127.0.0.1',
      ca: pki.ca,
      servername: 'localhost',
    });
    let text = '';
    socket.setEncoding('utf8').on('data', (c: string) => {
      text += c;
    });
    socket.write(
      'POST /apis/cluster.core.oam.dev/v1alpha1/clustergateways/c1/attach HTTP/1.1\r\nHost: gw\r\n' +
        `x-test-user: ${agentUser('c1')}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 0\r\n\r\n`,
    );
    await eventually(() => text.includes('}'), 2000);
    assert.match(text, /^HTTP\/1\.1 400 /);
    assert.match(text, /upgrades to \\"cluster-gateway-tunnel\\" only/);
    socket.destroy();
  });

  it('a newer connection of the same cluster replaces the older, which drains', async () => {
    const first = gateway.tunnels.get('c1');
    assert.ok(first);
    const second = await attachAgent('c1');
    await eventually(() => gateway.tunnels.get('c1') !== first, 2000);
    assert.equal(await first.ended, 'replaced');
    // The agent's old relay got the gateway's GOAWAY, with the reason.
    const oldRelay = relays[0];
    assert.ok(oldRelay);
    assert.deepEqual(await oldRelay.ended, { reason: 'goaway', detail: 'replaced' });
    assert.equal((await send(front.port, `${PROXY_PREFIX}c1/proxy/healthz`)).status, 200);
    // The agent going away removes the cluster's tunnel at once.
    second.destroy();
    await eventually(() => !gateway.endpoints.has('c1'), 2000);
  });

  it('a live tunnel whose grant is revoked is closed at the next review', async () => {
    const relay = await attachAgent('c3');
    await eventually(() => gateway.endpoints.has('c3'), 2000);
    const session = gateway.tunnels.get('c3');
    revoked.add('c3');
    assert.equal(await session?.ended, 'revoked');
    assert.deepEqual(await relay.ended, { reason: 'goaway', detail: 'revoked' });
    assert.equal(gateway.endpoints.has('c3'), false);
    assert.ok(gateway.logs.some((l) => l.message === 'agent tunnel closed: its attach grant was revoked'));
  });
});

/**
 * The no-credential trust model end to end in one process: the gateway's proxy and tunnel with the
 * real agent (agent/tunnel), which serves impersonation streams with its own token.
 */
import assert from 'node:assert/strict';
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import type { Connection } from '../../../agent/connection/kubeconfig.ts';
import { ImpersonatingServer } from '../../../agent/tunnel/impersonation.ts';
import { TunnelMetrics } from '../../../agent/tunnel/metrics.ts';
import { TunnelClient } from '../../../agent/tunnel/tunnel-client.ts';
import { upgradeAndEcho } from '../../../shared/forward/test-kit.ts';
import type { UserInfo } from '../../../shared/identity/user.ts';
import type { ClusterTarget, TunnelEndpoint } from '../clusters/cluster.ts';
import { type ClusterProxy, createClusterProxy } from '../proxy/cluster-proxy.ts';
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
} from '../proxy/test-kit.ts';
import { agentUser, startTestGateway, type TestGateway } from './test-kit.ts';

const quietLog = { debug() {}, info() {}, warn() {} };

describe('no-credential trust model: the agent serves impersonation streams with its own token', {
  timeout: 20_000,
}, () => {
  let upstream: TestServer;
  let gateway: TestGateway;
  let front: TestServer;
  let proxy: ClusterProxy;
  let seen: http.IncomingMessage[] = [];
  let agentToken = 'agent-token-1';
  const metrics = { withImpersonation: new TunnelMetrics(), without: new TunnelMetrics() };
  const stops: AbortController[] = [];
  const loops: Promise<void>[] = [];
  /** The caller the gateway authenticated, from a test header (routes.ts does this for real). */
  const caller = (req: http.IncomingMessage): UserInfo | undefined =>
    req.headers['x-test-caller']
      ? { name: String(req.headers['x-test-caller']), groups: ['dev', 'system:authenticated'], extra: {} }
      : undefined;

  let caPem = '';

  before(async () => {
    caPem = (await testPki()).ca;
    upstream = await startUpstream((req, res) => {
      seen.push(req);
      res.end(`hello ${req.headers['impersonate-user'] ?? 'nobody'}`);
    });
    upstream.server.on('upgrade', (req: http.IncomingMessage, socket: Duplex) => {
      seen.push(req);
      socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n');
      socket.pipe(socket);
    });
    gateway = await startTestGateway();
    // The agent's hub connection in the test kit authenticates with a header; inject it.
    const connection = await gateway.connection(agentUser('c1'));
    const other = await gateway.connection(agentUser('c2'));
    const withUser = (c: Connection) => () => c;
    startAgentWith('c1', true, metrics.withImpersonation, withUser(connection));
    startAgentWith('c2', false, metrics.without, withUser(other));
    await eventually(() => gateway.endpoints.has('c1') && gateway.endpoints.has('c2'), 5000);
    proxy = createClusterProxy();
    const targetOf = (name: string): ClusterTarget | undefined => {
      const endpoint = gateway.endpoints.get(name);
      if (!endpoint) return undefined;
      const noCredential: TunnelEndpoint = { ...endpoint, trustModel: 'no-credential' };
      return { ...clusterTarget(name, noCredential), credential: undefined, connectionKey: `${name}-nc` };
    };
    front = await startFront(proxy, targetOf, caller);
  });

  function startAgentWith(cluster: string, impersonation: boolean, m: TunnelMetrics, hub: () => Connection) {
    const stop = new AbortController();
    stops.push(stop);
    loops.push(
      new TunnelClient({
        cluster,
        loadHub: hub,
        target: () => ({ host: '127.0.0.1', port: upstream.port }),
        metrics: m,
        log: quietLog,
        drainGraceMs: 200,
        ...(impersonation
          ? {
              impersonation: new ImpersonatingServer({
                cluster,
                spoke: () => ({
                  server: `https://127.0.0.1:${upstream.port}`,
                  options: { ca: caPem },
                  fingerprint: agentToken,
                  token: agentToken,
                }),
                log: quietLog,
                reloadMs: 50,
                onRequest: (result) => m.impersonated(result),
              }),
            }
          : {}),
      }).run(stop.signal),
    );
  }

  after(async () => {
    await front?.close();
    proxy?.close();
    for (const stop of stops) stop.abort();
    await Promise.all(loops);
    await gateway?.close();
    await upstream?.close();
  });

  it('forwards as the caller, with its own token; the caller cannot assert an identity or a credential', async () => {
    seen = [];
    const reply = await send(front.port, `${PROXY_PREFIX}c1/proxy/api/v1/namespaces?limit=1`, {
      headers: [
        'X-Test-Caller',
        'alice',
        'Authorization',
        'Bearer callers-own',
        'Impersonate-User',
        'system:admin',
        'Impersonate-Extra-Scopes',
        'all',
      ],
    });
    assert.equal(reply.status, 200, reply.body);
    assert.equal(reply.body, 'hello alice');
    const req = seen[0]!;
    assert.equal(req.url, '/api/v1/namespaces?limit=1');
    assert.deepEqual(headerValues(req.rawHeaders, 'authorization'), ['Bearer agent-token-1']);
    assert.deepEqual(headerValues(req.rawHeaders, 'impersonate-user'), ['alice']);
    assert.deepEqual(headerValues(req.rawHeaders, 'impersonate-group'), ['dev', 'system:authenticated']);
    assert.deepEqual(headerValues(req.rawHeaders, 'impersonate-extra-scopes'), []);
    assert.equal(metrics.withImpersonation.render().match(/result="forwarded"} (\d+)/)?.[1], '1');
  });

  it('refuses a request without exactly one Impersonate-User, and never reaches the apiserver', async () => {
    const endpoint = gateway.endpoints.get('c1')!;
    seen = [];
    for (const identity of ['', 'Impersonate-User: a\r\nImpersonate-User: b\r\n']) {
      const stream = await endpoint.dial('impersonate');
      const response = await new Promise<string>((resolve) => {
        let text = '';
        stream.on('data', (c: Buffer) => {
          text += c.toString();
          if (text.includes('"kind":"Status"') && text.endsWith('}')) resolve(text);
        });
        stream.write(`GET /api HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer x\r\n${identity}\r\n`);
      });
      stream.destroy();
      assert.match(response, /^HTTP\/1\.1 403 /);
      assert.match(response, /exactly one Impersonate-User header is required/);
    }
    assert.equal(seen.length, 0);
    assert.equal(metrics.withImpersonation.render().match(/result="refused"} (\d+)/)?.[1], '2');
  });

  it('an agent of the hub-credential model refuses impersonation streams (the gateway gets a 503 that says why)', async () => {
    await assert.rejects(
      gateway.endpoints.get('c2')!.dial('impersonate'),
      /refused the stream: this agent runs the hub-credential trust model/,
    );
    const reply = await send(front.port, `${PROXY_PREFIX}c2/proxy/api`, {
      headers: ['X-Test-Caller', 'alice'],
    });
    assert.equal(reply.status, 503);
    assert.match(JSON.parse(reply.body).message, /hub-credential trust model/);
  });

  it('upgrades (exec, port-forward) run as the caller too', async () => {
    seen = [];
    const received = await upgradeAndEcho(
      front.port,
      `POST ${PROXY_PREFIX}c1/proxy/api/v1/namespaces/d/pods/p/exec?command=ls HTTP/1.1\r\n` +
        'Host: gw\r\nX-Test-Caller: bob\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nContent-Length: 0\r\n\r\n',
      'through the agent',
    );
    assert.match(received, /^HTTP\/1\.1 101 /);
    assert.deepEqual(headerValues(seen[0]!.rawHeaders, 'impersonate-user'), ['bob']);
    assert.deepEqual(headerValues(seen[0]!.rawHeaders, 'authorization'), ['Bearer agent-token-1']);
  });

  it("follows the agent's rotated token", async () => {
    agentToken = 'agent-token-2';
    await new Promise((r) => setTimeout(r, 60));
    seen = [];
    const reply = await send(front.port, `${PROXY_PREFIX}c1/proxy/version`, {
      headers: ['X-Test-Caller', 'alice'],
    });
    assert.equal(reply.status, 200);
    assert.deepEqual(headerValues(seen[0]!.rawHeaders, 'authorization'), ['Bearer agent-token-2']);
  });
});

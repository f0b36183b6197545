/**
 * The agent's side of the no-credential trust model alone: requests arrive on a connection handed to
 * serve(), as the gateway's `impersonate` streams do (the whole path, gateway and tunnel included, is
 * manager/gateway/tunnel/no-credential.test.ts).
 */
import assert from 'node:assert/strict';
import type http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { headerValues, send, upgradeAndEcho } from '../../shared/forward/test-kit.ts';
import { proxyRouteFromEnvironment } from '../../shared/transport/env-proxy.ts';
import { listen, startUpstream, type TestServer, testPki } from '../../shared/transport/test-kit.ts';
import { ImpersonatingServer, spokeTarget } from './impersonation.ts';

const quietLog = { debug() {}, warn() {} };

describe('the agent serves impersonation streams with its own token', { timeout: 20_000 }, () => {
  let upstream: TestServer;
  /** Stands in for the tunnel: every connection it accepts is served as one `impersonate` stream. */
  let streams: TestServer;
  let impersonation: ImpersonatingServer;
  let seen: http.IncomingMessage[] = [];
  let agentToken = 'agent-token-1';
  const results: string[] = [];

  before(async () => {
    const { ca } = await testPki();
    upstream = await startUpstream((req, res) => {
      seen.push(req);
      res.end(`hello ${req.headers['impersonate-user'] ?? 'nobody'}`);
    });
    upstream.server.on('upgrade', (req: http.IncomingMessage, socket: Duplex) => {
      seen.push(req);
      socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n');
      socket.pipe(socket);
    });
    impersonation = new ImpersonatingServer({
      cluster: 'c1',
      spoke: () => ({
        server: `https://127.0.0.1:${upstream.port}`,
        options: { ca },
        fingerprint: agentToken,
        token: agentToken,
      }),
      log: quietLog,
      reloadMs: 50,
      onRequest: (result) => results.push(result),
    });
    const server = net.createServer((socket) => impersonation.serve(socket));
    streams = await listen(server as unknown as http.Server);
  });

  after(async () => {
    impersonation?.close();
    await streams?.close();
    await upstream?.close();
  });

  it('forwards as the caller, with its own token; the caller cannot assert a credential or extras', async () => {
    seen = [];
    const reply = await send(streams.port, '/api/v1/namespaces?limit=1', {
      headers: [
        'Impersonate-User',
        'alice',
        'Impersonate-Group',
        'dev',
        'Impersonate-Group',
        'system:authenticated',
        'Impersonate-Extra-Scopes',
        'all',
        'Authorization',
        'Bearer callers-own',
        'X-Remote-User',
        'mallory',
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
    assert.deepEqual(headerValues(req.rawHeaders, 'x-remote-user'), []);
    assert.equal(results.at(-1), 'forwarded');
  });

  it('refuses a request without exactly one Impersonate-User, and never reaches the apiserver', async () => {
    seen = [];
    for (const identity of [[], ['Impersonate-User', 'a', 'Impersonate-User', 'b']]) {
      const reply = await send(streams.port, '/api', { headers: ['Authorization', 'Bearer x', ...identity] });
      assert.equal(reply.status, 403);
      assert.match(JSON.parse(reply.body).message, /exactly one Impersonate-User header is required/);
    }
    assert.equal(seen.length, 0);
    assert.deepEqual(results.slice(-2), ['refused', 'refused']);
  });

  it('upgrades (exec, port-forward) run as the caller too', async () => {
    seen = [];
    const received = await upgradeAndEcho(
      streams.port,
      'POST /api/v1/namespaces/d/pods/p/exec?command=ls HTTP/1.1\r\n' +
        'Host: x\r\nImpersonate-User: bob\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nContent-Length: 0\r\n\r\n',
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
    const reply = await send(streams.port, '/version', { headers: ['Impersonate-User', 'alice'] });
    assert.equal(reply.status, 200);
    assert.deepEqual(headerValues(seen[0]!.rawHeaders, 'authorization'), ['Bearer agent-token-2']);
  });
});

describe('spokeTarget', () => {
  it("builds the transport target from the agent's own connection", () => {
    const target = spokeTarget('c1', {
      server: 'https://10.0.0.1:6443',
      options: { ca: 'CA', rejectUnauthorized: false },
      fingerprint: 'f',
      token: 't',
    });
    assert.deepEqual(target, {
      name: 'c1',
      key: 'f',
      endpoint: { kind: 'direct', url: 'https://10.0.0.1:6443', caBundle: 'CA', insecure: true },
      credential: { token: 't' },
    });
    assert.equal(
      spokeTarget('c1', { server: 'https://h', options: {}, fingerprint: 'f' }),
      'the agent has no credential of its own for its kube-apiserver',
    );
  });

  it('reaches the apiserver through HTTPS_PROXY unless NO_PROXY says otherwise; proxy-url wins', () => {
    const connection = { server: 'https://10.0.0.1:6443', options: {}, fingerprint: 'f', token: 't' };
    const route = proxyRouteFromEnvironment({ httpsProxy: 'http://proxy:3128', noProxy: '10.96.0.0/12' });
    const proxied = spokeTarget('c1', connection, route);
    assert.ok(typeof proxied === 'object');
    assert.deepEqual(proxied.endpoint, {
      kind: 'egress',
      proxyUrl: 'http://proxy:3128/',
      url: 'https://10.0.0.1:6443',
      insecure: false,
    });
    const inCluster = spokeTarget('c1', { ...connection, server: 'https://10.96.0.1:443' }, route);
    assert.ok(typeof inCluster === 'object');
    assert.equal(inCluster.endpoint.kind, 'direct');
    const pinned = spokeTarget(
      'c1',
      { ...connection, server: 'https://10.96.0.1:443', proxyUrl: 'http://other:8080' },
      route,
    );
    assert.ok(typeof pinned === 'object' && pinned.endpoint.kind === 'egress');
    assert.equal(pinned.endpoint.proxyUrl, 'http://other:8080/');
  });
});

import assert from 'node:assert/strict';
import https from 'node:https';
import type net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { KubeClient } from '../kube/client.ts';
import { createCertificateAuthority } from '../pki.ts';
import { type CountingProxy, startCountingProxy } from './counting-proxy.ts';
import { proxyRouteFromEnvironment } from './env-proxy.ts';
import { dialRoute } from './proxy-agent.ts';

describe('KubeClient through an HTTP CONNECT proxy', { timeout: 10_000 }, () => {
  let server: https.Server;
  let proxy: CountingProxy;
  let ca: string;
  let port: number;
  const seen: { authorization?: string; host?: string }[] = [];

  before(async () => {
    const authority = await createCertificateAuthority('hub');
    ca = authority.cert;
    // Named by host name only: TLS inside the tunnel must verify it as the server's, not the proxy's.
    const serving = await authority.issue({
      commonName: 'hub-server',
      dnsNames: ['localhost'],
      usage: 'server',
    });
    server = https.createServer(serving, (req, res) => {
      seen.push({
        ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
        ...(req.headers.host ? { host: req.headers.host } : {}),
      });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ kind: 'Status', path: req.url }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as net.AddressInfo).port;
    proxy = await startCountingProxy();
  });
  after(async () => {
    await proxy.close();
    server.close();
  });

  test('requests go through one CONNECT to the server; TLS and the credential run inside it', async () => {
    // localhost is never proxied from the environment, so the route is a proxy-url (as in a kubeconfig).
    const client = KubeClient.fromConnection(
      `https://localhost:${port}`,
      { ca, headers: { authorization: 'Bearer inside' } },
      { route: () => ({ kind: 'proxy', url: new URL(proxy.url), source: 'proxy-url' }) },
    );
    try {
      assert.equal(client.route.kind, 'proxy');
      assert.deepEqual(await client.get('/api/v1/namespaces'), {
        kind: 'Status',
        path: '/api/v1/namespaces',
      });
      assert.deepEqual(await client.get('/apis'), { kind: 'Status', path: '/apis' });
      const count = proxy.counts.get(`localhost:${port}`);
      assert.equal(count?.connects, 1, 'one tunnel, kept alive for both requests');
      assert.ok((count?.sent ?? 0) > 0 && (count?.received ?? 0) > 0);
      assert.deepEqual(proxy.authorizations, [], 'no credential of the server is shown to the proxy');
      assert.deepEqual(seen.at(-1), { authorization: 'Bearer inside', host: `localhost:${port}` });
    } finally {
      client.close();
    }
  });

  test('without a route the client stays direct, whatever HTTPS_PROXY says (opt-in per process)', async () => {
    const before = proxy.counts.get(`localhost:${port}`)?.connects ?? 0;
    const client = KubeClient.fromConnection(`https://localhost:${port}`, { ca });
    try {
      assert.equal(client.route.kind, 'direct');
      await client.get('/version');
      assert.equal(proxy.counts.get(`localhost:${port}`)?.connects ?? 0, before);
    } finally {
      client.close();
    }
  });

  test('a stopped proxy fails the request with a message naming the proxy', async () => {
    const gone = await startCountingProxy();
    await gone.close();
    const route = proxyRouteFromEnvironment({ httpsProxy: gone.url });
    const client = KubeClient.fromConnection(`https://hub.invalid:${port}`, { ca }, { route });
    try {
      await assert.rejects(
        client.get('/version'),
        new RegExp(`egress proxy 127\\.0\\.0\\.1:${gone.port}: .*ECONNREFUSED`),
      );
    } finally {
      client.close();
    }
  });

  test('dialRoute: CONNECT refused by the proxy, an invalid route, a direct dial', async () => {
    const decision = { kind: 'proxy' as const, url: new URL(proxy.url), source: 'HTTPS_PROXY' };
    await assert.rejects(dialRoute(decision, '127.0.0.1', 1), /refused CONNECT 127\.0\.0\.1:1: 502/);
    await assert.rejects(
      dialRoute({ kind: 'invalid', message: 'HTTPS_PROXY is bad' }, 'h', 1),
      /HTTPS_PROXY is bad/,
    );
    await assert.rejects(
      dialRoute({ kind: 'proxy', url: new URL('socks4://p:1'), source: 'HTTPS_PROXY' }, 'h', 1),
      /HTTPS_PROXY: proxy-url scheme "socks4"/,
    );
    const direct = await dialRoute({ kind: 'direct', reason: 'test' }, '127.0.0.1', port, {
      timeoutMs: 2000,
    });
    direct.destroy();
  });
});

import assert from 'node:assert/strict';
import https from 'node:https';
import type net from 'node:net';
import { after, before, describe, test } from 'node:test';
import type tls from 'node:tls';
import { createCertificateAuthority } from '../../shared/pki.ts';
import { type CountingProxy, startCountingProxy } from '../../shared/transport/counting-proxy.ts';
import { fixedProxyRoute, proxyRouteFromEnvironment } from '../../shared/transport/env-proxy.ts';
import { tunnelUpgradeProtocol } from '../../shared/tunnel/protocol.ts';
import type { Connection } from '../connection/kubeconfig.ts';
import { requestAttach } from './attach-request.ts';

describe('the attach request through an HTTP CONNECT proxy', { timeout: 10_000 }, () => {
  let hub: https.Server;
  let proxy: CountingProxy;
  let connection: Connection;
  /** The client certificate's CN the hub saw on each attach. */
  const attached: string[] = [];

  before(async () => {
    const ca = await createCertificateAuthority('hub-ca');
    const serving = await ca.issue({ commonName: 'hub', dnsNames: ['localhost'], usage: 'server' });
    const client = await ca.issue({ commonName: 'agent', usage: 'client' });
    hub = https.createServer({ ...serving, ca: ca.cert, requestCert: true, rejectUnauthorized: true });
    hub.on('upgrade', (req, socket: net.Socket) => {
      attached.push((req.socket as tls.TLSSocket).getPeerCertificate().subject.CN as string);
      socket.write(
        `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${tunnelUpgradeProtocol}\r\n\r\nhello`,
      );
    });
    await new Promise<void>((resolve) => hub.listen(0, '127.0.0.1', resolve));
    const port = (hub.address() as net.AddressInfo).port;
    connection = {
      server: `https://localhost:${port}`,
      options: { ca: ca.cert, cert: client.cert, key: client.key, rejectUnauthorized: true },
      fingerprint: 'f',
    };
    proxy = await startCountingProxy();
  });
  after(async () => {
    await proxy.close();
    hub.close();
  });

  test('one CONNECT to the hub, TLS with the client certificate inside it, the 101 handed over', async () => {
    const port = new URL(connection.server).port;
    const upgraded = await requestAttach(connection, 'cluster1', {
      timeoutMs: 5000,
      route: fixedProxyRoute(proxy.url),
    });
    try {
      assert.equal(proxy.counts.get(`localhost:${port}`)?.connects, 1);
      assert.deepEqual(attached, ['agent'], 'the hub saw the agent certificate, end to end');
      const head =
        upgraded.head.length > 0
          ? upgraded.head
          : await new Promise<Buffer>((r) => upgraded.socket.once('data', r));
      assert.equal(head.toString(), 'hello');
    } finally {
      upgraded.socket.destroy();
    }
  });

  test('without a route, or with the hub in NO_PROXY, the attach is direct', async () => {
    const before = proxy.counts.size;
    const direct = await requestAttach(connection, 'cluster1', { timeoutMs: 5000 });
    direct.socket.destroy();
    // localhost is never proxied (Go's rule).
    const noProxy = await requestAttach(connection, 'cluster1', {
      timeoutMs: 5000,
      route: proxyRouteFromEnvironment({ httpsProxy: proxy.url }),
    });
    noProxy.socket.destroy();
    assert.equal(proxy.counts.size, before);
    assert.equal(attached.length, 3);
  });

  test('a stopped proxy: the attach fails with a message naming it', async () => {
    const gone = await startCountingProxy();
    await gone.close();
    await assert.rejects(
      requestAttach(connection, 'cluster1', { timeoutMs: 5000, route: fixedProxyRoute(gone.url) }),
      new RegExp(`egress proxy 127\\.0\\.0\\.1:${gone.port}: connect ECONNREFUSED`),
    );
  });
});

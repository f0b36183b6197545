import assert from 'node:assert/strict';
import http2 from 'node:http2';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type CountingProxy, startCountingProxy } from '../../shared/transport/counting-proxy.ts';
import { fixedProxyRoute, proxyRouteFromEnvironment } from '../../shared/transport/env-proxy.ts';
import { tunnelErrorHeader } from '../../shared/tunnel/protocol.ts';
import { TunnelMetrics } from './metrics.ts';
import { Relay, relayTargetOf } from './relay.ts';

const quietLog = { debug() {}, warn() {} };

async function socketPair(): Promise<[net.Socket, net.Socket]> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const accepted = new Promise<net.Socket>((r) => server.once('connection', r));
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  const other = await accepted;
  server.close();
  return [client, other];
}

/** The gateway's end, reduced to what it does: CONNECT streams on the agent's HTTP/2 server. */
function gatewayEnd(socket: net.Socket) {
  const session = http2.connect('http://tunnel', { createConnection: () => socket });
  session.on('error', () => {});
  const dial = () =>
    new Promise<{ status: number; error?: string; stream: http2.ClientHttp2Stream }>((resolve, reject) => {
      const stream = session.request({ ':method': 'CONNECT', ':authority': 'kube-apiserver:443' });
      stream.once('response', (headers) =>
        resolve({
          status: Number(headers[':status']),
          ...(headers[tunnelErrorHeader] ? { error: String(headers[tunnelErrorHeader]) } : {}),
          stream,
        }),
      );
      stream.once('error', reject);
    });
  return { session, dial };
}

describe('relayed streams to an apiserver behind a proxy', { timeout: 10_000 }, () => {
  let echo: net.Server;
  let echoPort: number;
  let proxy: CountingProxy;
  before(async () => {
    echo = net.createServer((s) => s.pipe(s));
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
    echoPort = (echo.address() as net.AddressInfo).port;
    proxy = await startCountingProxy();
  });
  after(async () => {
    echo.close();
    await proxy.close();
  });

  test('relayTargetOf: the route only when it is a proxy (NO_PROXY keeps it plain TCP)', () => {
    const route = proxyRouteFromEnvironment({ httpsProxy: 'http://p:3128', noProxy: '10.96.0.0/12' });
    assert.deepEqual(relayTargetOf('https://10.96.0.1:443', route), { host: '10.96.0.1', port: 443 });
    const proxied = relayTargetOf('https://api.example:6443', route);
    assert.equal(proxied.route?.kind, 'proxy');
  });

  test('each stream is one CONNECT through the proxy to the apiserver; bytes flow and are counted', async () => {
    const [gatewaySide, agentSide] = await socketPair();
    const metrics = new TunnelMetrics();
    const relay = new Relay(agentSide, Buffer.alloc(0), {
      target: { ...relayTargetOf(`https://127.0.0.1:${echoPort}`, fixedProxyRoute(proxy.url)) },
      metrics,
      log: quietLog,
    });
    const gateway = gatewayEnd(gatewaySide);
    try {
      const { status, stream } = await gateway.dial();
      assert.equal(status, 200);
      stream.write('ping');
      const reply = await new Promise<string>((r) => stream.once('data', (c: Buffer) => r(c.toString())));
      assert.equal(reply, 'ping');
      assert.equal(proxy.counts.get(`127.0.0.1:${echoPort}`)?.connects, 1);
      stream.close();
    } finally {
      gateway.session.destroy();
      relay.destroy();
    }
  });

  test('a proxy that is down: the stream is refused with the proxy named', async () => {
    const gone = await startCountingProxy();
    await gone.close();
    const [gatewaySide, agentSide] = await socketPair();
    const relay = new Relay(agentSide, Buffer.alloc(0), {
      target: relayTargetOf(`https://127.0.0.1:${echoPort}`, fixedProxyRoute(gone.url)),
      metrics: new TunnelMetrics(),
      log: quietLog,
    });
    const gateway = gatewayEnd(gatewaySide);
    try {
      const { status, error } = await gateway.dial();
      assert.equal(status, 502);
      assert.match(
        error ?? '',
        new RegExp(`egress proxy 127\\.0\\.0\\.1:${gone.port}: connect ECONNREFUSED`),
      );
    } finally {
      gateway.session.destroy();
      relay.destroy();
    }
  });
});

import assert from 'node:assert/strict';
import net from 'node:net';
import { after, describe, it } from 'node:test';
import { TunnelMetrics } from '../../../agent/tunnel/metrics.ts';
import { Relay } from '../../../agent/tunnel/relay.ts';
import { TunnelSession } from './session.ts';

const quietLog = { debug() {}, info() {}, warn() {} };
const fastKeepalive = { intervalMs: 100, timeoutMs: 400 };

/**
 * gateway session <-> a TCP path that can freeze (drop every byte, like a partition or a stopped
 * agent) <-> agent relay -> an echo server standing in for the apiserver.
 */
async function tunnelPath() {
  const echo = net.createServer((s) => s.pipe(s));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  const echoPort = (echo.address() as net.AddressInfo).port;
  const [gatewaySide, pathIn] = await socketPair();
  const [pathOut, agentSide] = await socketPair();
  let frozen = false;
  pathIn.on('data', (c: Buffer) => frozen || pathOut.write(c));
  pathOut.on('data', (c: Buffer) => frozen || pathIn.write(c));
  const relay = new Relay(agentSide, Buffer.alloc(0), {
    target: { host: '127.0.0.1', port: echoPort },
    metrics: new TunnelMetrics(),
    log: quietLog,
    keepalive: fastKeepalive,
  });
  const session = new TunnelSession(gatewaySide, { cluster: 'c1', agent: 'a', keepalive: fastKeepalive });
  return {
    session,
    relay,
    freeze: () => {
      frozen = true;
    },
    close: () => {
      for (const s of [gatewaySide, pathIn, pathOut, agentSide]) s.destroy();
      echo.close();
    },
  };
}

async function socketPair(): Promise<[net.Socket, net.Socket]> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const accepted = new Promise<net.Socket>((r) => server.once('connection', r));
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  const other = await accepted;
  server.close();
  return [client, other];
}

describe('TunnelSession', { timeout: 10_000 }, () => {
  const cleanups: (() => void)[] = [];
  after(() => {
    for (const c of cleanups) c();
  });

  it('opens CONNECT streams that reach the apiserver and counts them', async () => {
    const path = await tunnelPath();
    cleanups.push(path.close);
    const stream = await path.session.dial();
    assert.equal(path.session.openStreams, 1);
    stream.write('hello');
    const echoed = await new Promise<string>((r) => stream.once('data', (c: Buffer) => r(c.toString())));
    assert.equal(echoed, 'hello');
    stream.destroy();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(path.session.openStreams, 0);
    assert.ok(path.session.lastRoundTripMs === undefined || path.session.lastRoundTripMs >= 0);
  });

  it('reports when the agent cannot reach its apiserver', async () => {
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as net.AddressInfo).port;
    closed.close();
    const [gatewaySide, agentSide] = await socketPair();
    const relay = new Relay(agentSide, Buffer.alloc(0), {
      target: { host: '127.0.0.1', port },
      metrics: new TunnelMetrics(),
      log: quietLog,
    });
    const session = new TunnelSession(gatewaySide, { cluster: 'c1', agent: 'a' });
    cleanups.push(() => {
      relay.destroy();
      session.destroy('shutdown');
    });
    await assert.rejects(
      session.dial(),
      /the agent of cluster "c1" could not reach its kube-apiserver: connect ECONNREFUSED/,
    );
  });

  it('detects a peer that stopped answering, on both ends, within interval + timeout', async () => {
    const path = await tunnelPath();
    cleanups.push(path.close);
    await new Promise((r) => setTimeout(r, 250)); // a few answered pings first
    assert.ok((path.session.lastRoundTripMs ?? -1) >= 0, 'pings were answered');
    const frozenAt = performance.now();
    path.freeze();
    assert.equal(await path.session.closed, 'ping-timeout');
    const gatewaySeconds = (performance.now() - frozenAt) / 1000;
    assert.ok(gatewaySeconds < 0.7, `gateway noticed after ${gatewaySeconds.toFixed(2)} s`);
    assert.equal((await path.relay.ended).reason, 'ping-timeout');
    await assert.rejects(path.session.dial(), /is closing/);
  });

  it('drain sends GOAWAY with the reason and lets open streams finish', async () => {
    const path = await tunnelPath();
    cleanups.push(path.close);
    const stream = await path.session.dial();
    path.session.drain('shutdown', 5_000);
    assert.deepEqual(await path.relay.ended, { reason: 'goaway', detail: 'shutdown' });
    await assert.rejects(path.session.dial(), /is closing/);
    stream.write('still here');
    const echoed = await new Promise<string>((r) => stream.once('data', (c: Buffer) => r(c.toString())));
    assert.equal(echoed, 'still here');
    stream.end();
    stream.resume();
    assert.equal(await path.session.closed, 'shutdown');
  });
});

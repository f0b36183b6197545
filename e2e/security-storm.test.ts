/**
 * Connection storms against a real gateway process: idle and slow clients
 * are cut off after --request-header-timeout, connections beyond
 * --max-connections are closed at accept, memory stays bounded and
 * legitimate traffic is served once the storm has passed.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import type { TLSSocket } from 'node:tls';
import { waitFor } from '../hack/localenv/wait.ts';
import { gatewayRequest } from './support/gateway-client.ts';
import { openTls } from './support/raw-tls.ts';
import { type SecondGateway, startSecondGateway } from './support/second-gateway.ts';
import { proxyPrefix } from './support/users.ts';

const maxConnections = 100;
let gateway: SecondGateway;
const admin = { frontProxy: { user: 'admin', groups: ['system:masters'] } };

before(async () => {
  gateway = await startSecondGateway('gateway-storm', [
    `--max-connections=${maxConnections}`,
    '--request-header-timeout=2',
    '--idle-connection-timeout=2',
  ]);
});
after(() => gateway?.stop());

function rssMb(): number {
  const status = readFileSync(`/proc/${gateway.process.pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

/** Opens `n` idle connections, 50 at a time; resolves with the ones the server let through. */
async function storm(n: number): Promise<TLSSocket[]> {
  const open: TLSSocket[] = [];
  for (let i = 0; i < n; i += 50) {
    const batch = await Promise.allSettled(
      Array.from({ length: Math.min(50, n - i) }, () => openTls(gateway)),
    );
    for (const r of batch) if (r.status === 'fulfilled') open.push(r.value);
  }
  for (const s of open) s.on('error', () => {});
  return open;
}

const stillOpen = (sockets: TLSSocket[]) => sockets.filter((s) => !s.destroyed && !s.readableEnded).length;

async function legitimateRequestSucceeds(): Promise<void> {
  const res = await gatewayRequest('GET', `${proxyPrefix}/cluster1/proxy/version`, admin, gateway.url);
  assert.equal(res.status, 200);
}

test('a flood of idle connections: at most --max-connections held, real requests still served, all closed after the header timeout', async () => {
  await legitimateRequestSucceeds();
  const sockets = await storm(3 * maxConnections);
  await new Promise((r) => setTimeout(r, 500));
  assert.ok(stillOpen(sockets) <= maxConnections, `${stillOpen(sockets)} connections held`);
  // Idle connections are evicted for callers that send a request: the cap is no denial of service.
  await legitimateRequestSucceeds();
  // The gateway closes each idle one 2 s after it was accepted; the client sees the last close when its
  // event loop gets to it, which on two busy cores (the CI run) took more than the 3 s this once waited.
  const closedAt = Date.now();
  await waitFor(
    `every idle connection closed by the gateway (${stillOpen(sockets)} still open)`,
    () => stillOpen(sockets) === 0,
    { timeoutMs: 15_000, intervalMs: 100 },
  );
  console.log(
    `[storm] the last idle connection closed ${Date.now() - closedAt} ms after the legitimate request`,
  );
  for (const s of sockets) s.destroy();
  await legitimateRequestSucceeds();
});

test('a client that sends its headers slowly is cut off after --request-header-timeout', async () => {
  const socket = await openTls(gateway);
  socket.on('error', () => {});
  const started = Date.now();
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.write(`GET ${proxyPrefix}/cluster1/proxy/version HTTP/1.1\r\nHost: gateway\r\n`);
  const drip = setInterval(() => socket.writable && socket.write('X'), 300);
  await closed;
  clearInterval(drip);
  const elapsed = Date.now() - started;
  assert.ok(elapsed >= 1500 && elapsed < 5000, `closed after ${elapsed} ms`);
  await legitimateRequestSucceeds();
});

test('memory stays bounded through a storm of 2,000 connections and the gateway keeps serving', async () => {
  const before = rssMb();
  let peak = before;
  for (let round = 0; round < 4; round++) {
    const sockets = await storm(500);
    peak = Math.max(peak, rssMb());
    for (const s of sockets) s.destroy();
  }
  await new Promise((r) => setTimeout(r, 3000));
  const settled = rssMb();
  // 100 held TLS connections cost about 7 MB; the rest are refused before any allocation of note.
  assert.ok(peak - before < 60, `RSS ${before.toFixed(0)} -> peak ${peak.toFixed(0)} MB`);
  assert.ok(settled - before < 60, `RSS ${before.toFixed(0)} -> ${settled.toFixed(0)} MB after the storm`);
  assert.ok(gateway.alive());
  await legitimateRequestSucceeds();
});

import assert from 'node:assert/strict';
import https from 'node:https';
import { after, before, describe, it } from 'node:test';
import tls from 'node:tls';
import { ServingEndpoint } from './serving.ts';

const quiet = { info() {} };

function connect(port: number): Promise<tls.TLSSocket | undefined> {
  return new Promise((resolve) => {
    const socket = tls.connect({ port, host: '127.0.0.1', rejectUnauthorized: false }, () => resolve(socket));
    socket.on('error', () => resolve(undefined));
  });
}

function get(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    https
      .get({ port, host: '127.0.0.1', path: '/', rejectUnauthorized: false, agent: false }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      })
      .on('error', reject);
  });
}

const open = (sockets: (tls.TLSSocket | undefined)[]) => sockets.filter((s) => s && !s.destroyed).length;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('connection guard', { timeout: 10_000 }, () => {
  let endpoint: ServingEndpoint;
  let port: number;

  before(async () => {
    endpoint = await ServingEndpoint.create(
      { limits: { maxConnections: 20, requestHeaderTimeoutMs: 400, idleConnectionTimeoutMs: 2000 } },
      quiet,
    );
    port = await endpoint.listen(0, '127.0.0.1', {
      request: (_req, res) => res.end('ok'),
      upgrade: (_req, socket) => socket.destroy(),
    });
  });
  after(() => endpoint.close());

  it('closes a connection that never sends a request after the header timeout', async () => {
    const socket = await connect(port);
    assert.ok(socket);
    await sleep(200);
    assert.equal(socket.destroyed, false);
    await sleep(500);
    assert.equal(socket.destroyed, true);
  });

  it('keeps a connection that sent a request past the header timeout (keep-alive)', async () => {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1, rejectUnauthorized: false });
    const request = () =>
      new Promise<number>((resolve, reject) =>
        https
          .get({ port, host: '127.0.0.1', path: '/', agent }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.socket?.localPort ?? 0));
          })
          .on('error', reject),
      );
    const first = await request();
    await sleep(700);
    assert.equal(await request(), first, 'same connection reused');
    agent.destroy();
  });

  it('holds at most max connections, evicting idle ones so a real request still gets in', async () => {
    const idle = await Promise.all(Array.from({ length: 40 }, () => connect(port)));
    await sleep(50);
    assert.ok(open(idle) <= 20, `${open(idle)} held`);
    assert.equal(await get(port), 200, 'a caller that sends a request is served during the flood');
    for (const s of idle) s?.destroy();
  });
});

import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { after, describe, it } from 'node:test';
import { getHealthz, type HealthzRequest } from './healthz-once.ts';

const request: HealthzRequest = {
  path: '/prefix/healthz',
  host: 'cluster.example:6443',
  userAgent: 'cluster-gateway-test',
  authorization: 'Bearer t0ken',
  timeoutMs: 2000,
};

/** A TCP server that hands each connection's first bytes (the request) to `answer`, which writes back what it likes. */
async function server(answer: (socket: net.Socket, request: string) => void) {
  const srv = net.createServer((socket) => {
    let received = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      received += chunk;
      if (received.endsWith('\r\n\r\n')) answer(socket, received);
    });
    socket.on('error', () => {});
  });
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  after(() => srv.close());
  const { port } = srv.address() as net.AddressInfo;
  return () => net.connect(port, '127.0.0.1');
}

describe('GET /healthz written and read by hand', () => {
  it('writes one request that closes its connection, and reads a Content-Length answer', async () => {
    let seen = '';
    const connect = await server((socket, req) => {
      seen = req;
      socket.end('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok');
    });
    assert.deepEqual(await getHealthz(connect(), request), { status: 200, body: 'ok' });
    assert.equal(
      seen,
      'GET /prefix/healthz HTTP/1.1\r\nHost: cluster.example:6443\r\nUser-Agent: cluster-gateway-test\r\n' +
        'Authorization: Bearer t0ken\r\nConnection: close\r\n\r\n',
    );
  });

  it('writes extra header lines (a no-credential probe asks as the prober user, with no Authorization)', async () => {
    let seen = '';
    const connect = await server((socket, req) => {
      seen = req;
      socket.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    });
    const { authorization: _, ...anonymous } = request;
    const answer = await getHealthz(connect(), {
      ...anonymous,
      extraHeaders: ['Impersonate-User', 'cluster-gateway:health-prober'],
    });
    assert.deepEqual(answer, { status: 200, body: 'ok' });
    assert.equal(
      seen,
      'GET /prefix/healthz HTTP/1.1\r\nHost: cluster.example:6443\r\nUser-Agent: cluster-gateway-test\r\n' +
        'Impersonate-User: cluster-gateway:health-prober\r\nConnection: close\r\n\r\n',
    );
  });

  it('decodes a chunked body, and skips an interim 1xx answer', async () => {
    const connect = await server((socket) =>
      socket.end(
        'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n' +
          '8\r\n[-]etcd \r\n6;ext=1\r\nfailed\r\n0\r\n\r\n',
      ),
    );
    assert.deepEqual(await getHealthz(connect(), request), { status: 500, body: '[-]etcd failed' });
  });

  it('reads a body without framing to the end of the stream, in pieces', async () => {
    const connect = await server((socket) => {
      socket.write('HTTP/1.0 503 Service Unavailable\r\n');
      setTimeout(() => socket.write('\r\nnot '), 5);
      setTimeout(() => socket.end('ready'), 10);
    });
    assert.deepEqual(await getHealthz(connect(), request), { status: 503, body: 'not ready' });
  });

  it('stops at 512 bytes of a body that goes on, and closes the connection', async () => {
    let closed: Promise<unknown> = Promise.resolve();
    const connect = await server((socket) => {
      closed = once(socket, 'close');
      socket.write(`HTTP/1.1 500 Oops\r\nContent-Length: 100000000\r\n\r\n${'x'.repeat(2000)}`);
    });
    const answer = await getHealthz(connect(), request);
    assert.equal(answer.status, 500);
    assert.equal(answer.body, 'x'.repeat(512));
    await closed; // the server sees the connection go: nothing more is read
  });

  it('refuses what is not an HTTP/1.1 answer, an answer cut short, and silence', async () => {
    const garbage = await server((socket) => socket.end('SSH-2.0-OpenSSH\r\n\r\n'));
    await assert.rejects(getHealthz(garbage(), request), /not an HTTP\/1\.1 answer: "SSH-2\.0-OpenSSH"/);
    const cut = await server((socket) => socket.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\no'));
    await assert.rejects(getHealthz(cut(), request), /closed before the answer was complete/);
    const silent = await server(() => {});
    await assert.rejects(getHealthz(silent(), { ...request, timeoutMs: 50 }), /no answer within 0\.05s/);
    const hugeHead = await server((socket) => socket.write(`HTTP/1.1 200 OK\r\nX: ${'y'.repeat(20_000)}`));
    await assert.rejects(getHealthz(hugeHead(), request), /a head over 16 KiB/);
  });

  it('writes nothing when a header value would break its line', async () => {
    let received = false;
    const connect = await server(() => {
      received = true;
    });
    const socket = connect();
    await assert.rejects(
      getHealthz(socket, { ...request, authorization: 'Bearer x\r\nImpersonate-User: admin' }),
      /line break or NUL/,
    );
    assert.equal(socket.destroyed, true);
    assert.equal(received, false);
  });
});

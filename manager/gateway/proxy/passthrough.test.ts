/**
 * Plain reads whose bodies pass through as the cluster framed them (shared/forward/passthrough.ts),
 * against a real HTTPS server: bodies intact whatever their framing, watches kept on HTTP/2,
 * connections reused and retried as Go's transport does, and a cluster that breaks the framing
 * never gets a response past the gateway that the caller would take as complete.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { eventually } from '../../../shared/transport/test-kit.ts';
import {
  PROXY_PREFIX,
  type ProxyFixture,
  proxyTo,
  send,
  startUpstream,
  type TestServer,
} from './test-kit.ts';

const PATH = `${PROXY_PREFIX}c1/proxy`;
/** 3 MB in writes of uneven sizes, so chunk boundaries fall everywhere in the pieces read. */
const pieces = Array.from({ length: 700 }, (_, i) => Buffer.alloc(1 + ((i * 7919) % 9000), 97 + (i % 26)));
const big = Buffer.concat(pieces);

describe('reads passed through', { timeout: 10_000 }, () => {
  let upstream: TestServer;
  let fixture: ProxyFixture;
  const versions: string[] = [];
  /** Upstream sockets that have answered /first, and every socket closed. */
  const answeredFirst = new WeakSet<Socket>();
  let lastSocketClosed = false;

  const raw = (req: IncomingMessage, bytes: string) => {
    req.socket.write(bytes);
    req.socket.end();
  };

  before(async () => {
    upstream = await startUpstream((req: IncomingMessage, res: ServerResponse) => {
      versions.push(req.httpVersion);
      const url = req.url ?? '';
      if (url === '/chunked') {
        let i = 0;
        const next = () => {
          while (i < pieces.length) {
            if (!res.write(pieces[i++])) return void res.once('drain', next);
            if (i % 50 === 0) return void setImmediate(next);
          }
          res.end();
        };
        next();
      } else if (url === '/length') {
        res.writeHead(200, 'Fine', { 'Content-Length': big.length, 'X-Kind': 'length' });
        res.end(big);
      } else if (url === '/empty') {
        res.writeHead(204, { 'X-Kind': 'empty' }).end();
      } else if (url.includes('watch=true')) {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end('{"type":"ADDED"}\n');
      } else if (url === '/first') {
        answeredFirst.add(req.socket);
        res.end('first');
      } else if (url === '/drop-if-reused') {
        // The server closes a kept-alive connection just as the next request arrives on it.
        if (answeredFirst.has(req.socket)) req.socket.destroy();
        else res.end('answered on a new connection');
      } else if (url === '/bad-chunk') {
        raw(
          req,
          'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\nHTTP/1.1 200 OK\r\n\r\n',
        );
      } else if (url === '/te-and-cl') {
        raw(
          req,
          'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n',
        );
      } else if (url === '/endless') {
        req.socket.once('close', () => {
          lastSocketClosed = true;
        });
        res.writeHead(200);
        const timer = setInterval(() => res.write(Buffer.alloc(16 * 1024, 120)), 5);
        res.once('close', () => clearInterval(timer));
      } else res.writeHead(404).end();
    });
    fixture = await proxyTo(upstream, { passThrough: true });
  });

  after(() => fixture.close());

  it('passes a chunked body of 3 MB through intact, over HTTP/1.1', async () => {
    versions.length = 0;
    const reply = await send(fixture.front.port, `${PATH}/chunked`);
    assert.equal(reply.status, 200);
    assert.equal(reply.headers['transfer-encoding'], 'chunked');
    assert.equal(reply.body.length, big.length);
    assert.ok(Buffer.from(reply.body).equals(big));
    assert.deepEqual(versions, ['1.1']);
  });

  it('passes a body with Content-Length through intact, with the reason phrase, and an empty one', async () => {
    const reply = await send(fixture.front.port, `${PATH}/length`);
    assert.equal(reply.statusMessage, 'Fine');
    assert.equal(reply.headers['content-length'], String(big.length));
    assert.ok(Buffer.from(reply.body).equals(big));
    const empty = await send(fixture.front.port, `${PATH}/empty`);
    assert.equal(empty.status, 204);
    assert.equal(empty.headers['x-kind'], 'empty');
  });

  it('serves many reads on one kept-alive caller connection, upstream connections reused', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (let i = 0; i < 5; i++) {
        const body = await new Promise<Buffer>((resolve, reject) => {
          http
            .get({ port: fixture.front.port, host: '127.0.0.1', path: `${PATH}/chunked`, agent }, (res) => {
              const chunks: Buffer[] = [];
              res.on('data', (c: Buffer) => chunks.push(c)).on('end', () => resolve(Buffer.concat(chunks)));
            })
            .on('error', reject);
        });
        assert.ok(body.equals(big), `read ${i}`);
      }
      assert.ok(fixture.proxy.stats().idleSockets >= 1);
    } finally {
      agent.destroy();
    }
  });

  it('keeps watches on HTTP/2', async () => {
    versions.length = 0;
    const reply = await send(fixture.front.port, `${PATH}/api/v1/pods?watch=true`);
    assert.equal(reply.body, '{"type":"ADDED"}\n');
    assert.deepEqual(versions, ['2.0']);
  });

  it('sends a read once more on a new connection when the server closed the kept one', async () => {
    assert.equal((await send(fixture.front.port, `${PATH}/first`)).body, 'first');
    const reply = await send(fixture.front.port, `${PATH}/drop-if-reused`);
    assert.equal(reply.status, 200);
    assert.equal(reply.body, 'answered on a new connection');
  });

  it('cuts a response whose chunk framing breaks, before the bytes after the break', async () => {
    const outcome = await new Promise<{ body: string; complete: boolean }>((resolve) => {
      http.get({ port: fixture.front.port, host: '127.0.0.1', path: `${PATH}/bad-chunk` }, (res) => {
        let body = '';
        res.setEncoding('latin1');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => resolve({ body, complete: true }));
        res.on('error', () => resolve({ body, complete: false }));
        res.on('aborted', () => resolve({ body, complete: false }));
      });
    });
    assert.equal(outcome.complete, false);
    // At most the valid chunk before the break (here it came in the same read, so nothing), never what follows.
    assert.ok('hello'.startsWith(outcome.body), outcome.body);
  });

  it('answers 503 for an ambiguous response head, naming the cluster and the cause', async () => {
    const reply = await send(fixture.front.port, `${PATH}/te-and-cl`);
    assert.equal(reply.status, 503);
    assert.match(
      reply.body,
      /cluster \\"c1\\" is unreachable: the cluster broke HTTP\/1.1: both Transfer-Encoding and Content-Length/,
    );
  });

  it('closes the cluster connection when the caller leaves mid-body', async () => {
    lastSocketClosed = false;
    const req = http.get({ port: fixture.front.port, host: '127.0.0.1', path: `${PATH}/endless` });
    const [res] = (await once(req, 'response')) as [IncomingMessage];
    await once(res, 'data');
    req.destroy();
    await eventually(() => lastSocketClosed, 2000);
  });
});

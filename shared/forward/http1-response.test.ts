import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  ChunkedScanner,
  MAX_HEAD_BYTES,
  parseResponseHead,
  UpstreamProtocolError,
} from './http1-response.ts';

const head = (text: string) => Buffer.from(text, 'latin1');

describe('parseResponseHead', () => {
  it('waits for the blank line, then gives status, headers, framing and where the body starts', () => {
    assert.equal(parseResponseHead(head('HTTP/1.1 200 OK\r\nContent-Type: a')), undefined);
    const text =
      'HTTP/1.1 200 OK\r\nContent-Type:  application/json \r\nTransfer-Encoding: chunked\r\n\r\n5\r\n';
    const parsed = parseResponseHead(head(text));
    assert.deepEqual(parsed, {
      status: 200,
      statusMessage: 'OK',
      rawHeaders: ['Content-Type', 'application/json', 'Transfer-Encoding', 'chunked'],
      framing: { kind: 'chunked' },
      keepAlive: true,
      headBytes: text.length - 3,
    });
  });

  it('reads Content-Length, no body for 204/304/HEAD/length 0, close-delimited otherwise', () => {
    assert.deepEqual(parseResponseHead(head('HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n'))?.framing, {
      kind: 'length',
      length: 12,
    });
    assert.deepEqual(parseResponseHead(head('HTTP/1.1 204 No Content\r\n\r\n'))?.framing, { kind: 'none' });
    assert.deepEqual(parseResponseHead(head('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'))?.framing, {
      kind: 'none',
    });
    assert.deepEqual(parseResponseHead(head('HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n'), true)?.framing, {
      kind: 'none',
    });
    const close = parseResponseHead(head('HTTP/1.1 200 OK\r\n\r\n'));
    assert.deepEqual(close?.framing, { kind: 'close' });
    assert.equal(close?.keepAlive, false);
  });

  it('keeps the connection only when the server allows it', () => {
    const at = (t: string) => parseResponseHead(head(`${t}Content-Length: 1\r\n\r\n`))?.keepAlive;
    assert.equal(at('HTTP/1.1 200 OK\r\n'), true);
    assert.equal(at('HTTP/1.1 200 OK\r\nConnection: close\r\n'), false);
    assert.equal(at('HTTP/1.0 200 OK\r\n'), false);
    assert.equal(at('HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n'), true);
  });

  it('refuses every ambiguous or malformed head', () => {
    const bad = [
      'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n',
      'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n',
      'HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n',
      'HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n',
      'HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\n\r\n',
      'HTTP/1.1 200 OK\r\nBad Name: 1\r\n\r\n',
      'HTTP/1.1 200 OK\r\nX-A: a\x00b\r\n\r\n',
      'HTTP/1.1 200 OK\r\nX-A: a\nX-B: b\r\n\r\n',
      'HTTP/2 200\r\n\r\n',
      'HTTP/1.1 20 OK\r\n\r\n',
      'HTTP/1.1 100 Continue\r\n\r\n',
    ];
    for (const text of bad)
      assert.throws(() => parseResponseHead(head(text)), UpstreamProtocolError, JSON.stringify(text));
    assert.throws(
      () => parseResponseHead(head(`HTTP/1.1 200 OK\r\nX-A: ${'a'.repeat(MAX_HEAD_BYTES)}`)),
      /too large/,
    );
  });
});

/** Scans `body` split at the given offsets; returns what would reach the caller, and whether it ended. */
function scanSplit(body: Buffer, cuts: number[]): { forwarded: Buffer; done: boolean; trailing: boolean } {
  const scanner = new ChunkedScanner();
  const out: Buffer[] = [];
  let done = false;
  let trailing = false;
  let from = 0;
  for (const to of [...cuts, body.length]) {
    const piece = body.subarray(from, to);
    from = to;
    if (piece.length === 0) continue;
    const result = scanner.scan(piece);
    out.push(...result.held, piece.subarray(0, result.forwardEnd));
    if (result.done) {
      done = true;
      trailing = result.trailing;
      break;
    }
  }
  return { forwarded: Buffer.concat(out), done, trailing };
}

describe('ChunkedScanner', () => {
  const chunks = 'a\r\n0123456789\r\n3;name=value\r\nabc\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n';
  const body = Buffer.from(`${chunks}0\r\nX-Trailer: t\r\n\r\n`, 'latin1');

  it('forwards every chunk as it came, and neither the last chunk nor the trailers, at any split', () => {
    for (let a = 0; a <= body.length; a++) {
      for (let b = a; b <= body.length; b += 7) {
        const { forwarded, done, trailing } = scanSplit(body, [a, b]);
        assert.equal(forwarded.toString('latin1'), chunks, `split at ${a},${b}`);
        assert.equal(done, true);
        assert.equal(trailing, false);
      }
    }
  });

  it('forwards a byte at a time', () => {
    const cuts = Array.from({ length: body.length }, (_, i) => i);
    assert.equal(scanSplit(body, cuts).forwarded.toString('latin1'), chunks);
  });

  it('reports bytes after the end (the connection is not reused)', () => {
    const result = scanSplit(Buffer.from('1\r\nx\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n', 'latin1'), []);
    assert.equal(result.forwarded.toString('latin1'), '1\r\nx\r\n');
    assert.equal(result.trailing, true);
  });

  it('is not done before the final CRLF', () => {
    assert.equal(scanSplit(Buffer.from('1\r\nx\r\n0\r\n', 'latin1'), []).done, false);
  });

  it('refuses framing that would desynchronise the caller', () => {
    const bad = [
      'x\r\n',
      '\r\n',
      '-1\r\n',
      '1\nx\r\n',
      '1\r\nxy\r\n',
      '1\r\nx\n0\r\n\r\n',
      '1\rx',
      `${'f'.repeat(13)}\r\n`,
      '1;a\x00b\r\n',
      `1;${'a'.repeat(1100)}\r\n`,
      '0\r\nX: a\nb\r\n\r\n',
    ];
    for (const text of bad) {
      assert.throws(
        () => scanSplit(Buffer.from(text, 'latin1'), []),
        UpstreamProtocolError,
        JSON.stringify(text),
      );
    }
  });

  it('holds a split size line back until it is complete', () => {
    const scanner = new ChunkedScanner();
    const first = scanner.scan(Buffer.from('5\r\nhello\r\n1', 'latin1'));
    assert.equal(first.forwardEnd, 10); // "5\r\nhello\r\n": the "1" waits
    const second = scanner.scan(Buffer.from('0\r\n', 'latin1'));
    assert.deepEqual(
      second.held.map((b) => b.toString('latin1')),
      ['1'],
    );
    assert.equal(second.forwardEnd, 3);
  });
});

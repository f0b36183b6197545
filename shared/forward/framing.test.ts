import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { assertNoBody, FramingError, framingHeaders, requestFraming } from './framing.ts';

const request = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;

describe('requestFraming', () => {
  it('reads the length Node parsed', () => {
    assert.deepEqual(requestFraming(request({ 'content-length': '42' })), { kind: 'length', length: '42' });
    assert.deepEqual(requestFraming(request({ 'content-length': '0' })), { kind: 'none' });
    assert.deepEqual(requestFraming(request({})), { kind: 'none' });
  });

  it('accepts chunked alone, as Go does, and refuses other codings with 501', () => {
    assert.deepEqual(requestFraming(request({ 'transfer-encoding': 'Chunked ' })), { kind: 'chunked' });
    assert.throws(
      () => requestFraming(request({ 'transfer-encoding': 'gzip, chunked' })),
      (err: unknown) => err instanceof FramingError && err.code === 501 && /gzip, chunked/.test(err.message),
    );
  });

  it('refuses a length that is not a decimal number', () => {
    assert.throws(
      () => requestFraming(request({ 'content-length': '1e3' })),
      (err: unknown) => err instanceof FramingError && err.code === 400,
    );
  });
});

describe('framingHeaders', () => {
  it('declares exactly the parsed framing', () => {
    assert.deepEqual(framingHeaders({ kind: 'length', length: '7' }, 'GET'), ['Content-Length', '7']);
    assert.deepEqual(framingHeaders({ kind: 'chunked' }, 'DELETE'), ['Transfer-Encoding', 'chunked']);
  });

  it('sends no framing for a body-less GET and Content-Length 0 for a body-less POST', () => {
    assert.deepEqual(framingHeaders({ kind: 'none' }, 'GET'), []);
    assert.deepEqual(framingHeaders({ kind: 'none' }, 'POST'), ['Content-Length', '0']);
  });
});

describe('assertNoBody', () => {
  it('lets a body-less upgrade through and refuses one with a body', () => {
    assertNoBody({ kind: 'none' });
    assert.throws(() => assertNoBody({ kind: 'length', length: '5' }), /must not carry a body/);
    assert.throws(() => assertNoBody({ kind: 'chunked' }), /must not carry a body/);
  });
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { goMaxQueryParams, goPathUnescape, goString, parseGoQuery } from './go-url.ts';

// Expected values were checked against Go 1.26's url.ParseQuery and
// url.PathUnescape (and 20,000 random queries agreed, see the PR note).
const read = (query: string) => Object.fromEntries(parseGoQuery(query).values);

test('segments with a ";" or a malformed escape are dropped, the others kept byte for byte', () => {
  const q = parseGoQuery('fieldSelector=metadata.name=allowed,x=;&a=%zz&b%=1&&c=1+2%2B3&d&e=%41');
  assert.deepEqual(Object.fromEntries(q.values), { c: ['1 2+3'], d: [''], e: ['A'] });
  assert.equal(q.accepted, 'c=1+2%2B3&d&e=%41');
  assert.equal(q.dropped, 3);
});

test('repeated keys keep their order; what is kept reads the same again', () => {
  const q = parseGoQuery('watch=%zz&watch=1&watch=0;&watch=false');
  assert.deepEqual(q.values.get('watch'), ['1', 'false']);
  assert.deepEqual(read(q.accepted), read('watch=%zz&watch=1&watch=0;&watch=false'));
});

test('past the parameter limit Go reads nothing at all', () => {
  const many = Array.from({ length: goMaxQueryParams + 1 }, (_, i) => `k${i}=v`).join('&');
  assert.deepEqual(parseGoQuery(many), { values: new Map(), accepted: '', dropped: goMaxQueryParams + 1 });
  const limit = Array.from({ length: goMaxQueryParams }, (_, i) => `k${i}=v`).join('&');
  assert.equal(parseGoQuery(limit).values.size, goMaxQueryParams);
});

test('bytes are decoded as UTF-8, each invalid byte U+FFFD (Go JSON rendering)', () => {
  assert.deepEqual(read('a=%C3%A9&b=%E2%82&c=%ED%A0%80&d=%F0%9F%98%80&e=%C0%AF&f=%F4%90%80%80'), {
    a: ['é'],
    b: ['\uFFFD\uFFFD'],
    c: ['\uFFFD\uFFFD\uFFFD'],
    d: ['😀'],
    e: ['\uFFFD\uFFFD'],
    f: ['\uFFFD\uFFFD\uFFFD\uFFFD'],
  });
  // Node hands raw bytes over as latin1 characters.
  assert.deepEqual(read('a=\u00c3\u00a9&b=\u00ff'), { a: ['é'], b: ['\uFFFD'] });
  assert.equal(goString(Uint8Array.from([0x61, 0xe2, 0x82, 0xac])), 'a€');
});

test('URL.Path: decoded once, "+" kept, malformed escapes refused', () => {
  assert.equal(goPathUnescape('/api/v1/a%2Fb/%252F/c+d'), '/api/v1/a/b/%2F/c+d');
  assert.equal(goPathUnescape('/x/%FF'), '/x/\uFFFD');
  assert.equal(goPathUnescape('/x/%zz'), undefined);
  assert.equal(goPathUnescape('/x/%4'), undefined);
});

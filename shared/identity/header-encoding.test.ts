import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { utf8HeaderValue, utf8WireValue } from './header-encoding.ts';

describe('identity header values as UTF-8 bytes', () => {
  it('writes every non-ASCII character as its UTF-8 bytes and leaves ASCII alone', () => {
    assert.equal(utf8WireValue('alice'), 'alice');
    assert.deepEqual(Buffer.from(utf8WireValue('jösé'), 'latin1'), Buffer.from('jösé', 'utf8'));
    assert.deepEqual(Buffer.from(utf8WireValue('用户'), 'latin1'), Buffer.from('用户', 'utf8'));
  });

  it('reads the UTF-8 bytes Node handed over as latin1 back to the text', () => {
    for (const text of ['alice', 'h-jösé', 'g-ñ', '团队', 'emoji 🙂']) {
      assert.equal(utf8HeaderValue(utf8WireValue(text)), text);
    }
  });

  it('refuses bytes that are not UTF-8, and characters Node never reads from a header', () => {
    assert.equal(utf8HeaderValue('j\xf6s\xe9'), undefined);
    assert.equal(utf8HeaderValue('\xc3'), undefined);
    assert.equal(utf8HeaderValue('用'), undefined);
  });
});

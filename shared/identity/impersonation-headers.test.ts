import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { escapeExtraKey } from './impersonation-headers.ts';

describe('escapeExtraKey', () => {
  it('escapes like client-go headerKeyEscape', () => {
    assert.equal(escapeExtraKey('scopes'), 'scopes');
    assert.equal(
      escapeExtraKey('authentication.kubernetes.io/pod-name'),
      'authentication.kubernetes.io%2Fpod-name',
    );
    assert.equal(escapeExtraKey('100%'), '100%25');
    assert.equal(escapeExtraKey('a b:c'), 'a%20b%3Ac');
    assert.equal(escapeExtraKey('ü'), '%C3%BC');
    assert.equal(escapeExtraKey("!#$&'*+-.^_`|~"), "!#$&'*+-.^_`|~");
  });
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { authorizationOf, clientCertificateOf } from './target.ts';

describe('authorizationOf', () => {
  it('presents tokens as bearer tokens', () => {
    assert.equal(authorizationOf({ token: 'abc\n' }), 'Bearer abc');
    assert.equal(authorizationOf({ token: 'dyn', certificate: 'c' }), 'Bearer dyn');
    assert.equal(authorizationOf({ token: '  ' }), undefined);
    assert.equal(authorizationOf({ certificate: 'c', privateKey: 'k' }), undefined);
    assert.equal(authorizationOf(undefined), undefined);
  });
});

describe('clientCertificateOf', () => {
  it('presents a certificate in the handshake, a token alone none', () => {
    assert.deepEqual(clientCertificateOf({ certificate: 'c', privateKey: 'k' }), { cert: 'c', key: 'k' });
    assert.equal(clientCertificateOf({ token: 't' }), undefined);
    assert.equal(clientCertificateOf(undefined), undefined);
  });
});

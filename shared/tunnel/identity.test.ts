import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeTunnelIdentity, encodeTunnelIdentity } from './identity.ts';

describe('the tunnel hop identity codec', () => {
  it('encodes as Kubernetes impersonation headers, the wire format gateways and agents of every version speak', () => {
    const out: string[] = [];
    encodeTunnelIdentity(out, {
      name: 'alice',
      uid: 'u-1',
      groups: ['dev', 'system:authenticated'],
      extra: { 'example.com/team': ['a', 'b'] },
    });
    assert.deepEqual(out, [
      'Impersonate-User',
      'alice',
      'Impersonate-Uid',
      'u-1',
      'Impersonate-Group',
      'dev',
      'Impersonate-Group',
      'system:authenticated',
      'Impersonate-Extra-example.com%2Fteam',
      'a',
      'Impersonate-Extra-example.com%2Fteam',
      'b',
    ]);
  });

  it('decodes user, uid and groups; ignores extras', () => {
    assert.deepEqual(
      decodeTunnelIdentity([
        'Impersonate-User',
        'alice',
        'impersonate-group',
        'a',
        'Impersonate-Uid',
        'u-1',
        'Impersonate-Group',
        'b',
        'Impersonate-Extra-Scopes',
        'x',
      ]),
      { name: 'alice', uid: 'u-1', groups: ['a', 'b'], extra: {} },
    );
  });

  it('round-trips what the gateway sends, extras left out', () => {
    const out: string[] = ['Host', 'x'];
    encodeTunnelIdentity(out, { name: 'bob', groups: ['g'], extra: { scopes: ['all'] } });
    assert.deepEqual(decodeTunnelIdentity(out), { name: 'bob', groups: ['g'], extra: {} });
  });

  it('refuses none, an empty or several users', () => {
    const refused = { refusal: 'exactly one Impersonate-User header is required' };
    assert.deepEqual(decodeTunnelIdentity(['Impersonate-Group', 'a']), refused);
    assert.deepEqual(decodeTunnelIdentity(['Impersonate-User', '']), refused);
    assert.deepEqual(decodeTunnelIdentity(['Impersonate-User', 'a', 'Impersonate-User', 'b']), refused);
  });
});

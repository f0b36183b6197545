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

describe('non-ASCII identities on the tunnel hop', () => {
  it('writes UTF-8 bytes, latin1-range characters included, as Go does (Node sends each character as a byte)', () => {
    const out: string[] = [];
    encodeTunnelIdentity(out, { name: 'h-jösé', groups: ['g-ñ', '团队'], extra: {} });
    const bytes = (value: string) => Buffer.from(value, 'latin1');
    assert.deepEqual(bytes(out[1]!), Buffer.from('h-jösé', 'utf8'));
    assert.deepEqual(bytes(out[3]!), Buffer.from('g-ñ', 'utf8'));
    assert.deepEqual(bytes(out[5]!), Buffer.from('团队', 'utf8'));
  });

  it('decodes what it encoded back to the same text (Node reads header bytes as latin1)', () => {
    const out: string[] = [];
    encodeTunnelIdentity(out, { name: 'h-jösé', uid: 'ü', groups: ['g-ñ', 'plain'], extra: {} });
    assert.deepEqual(decodeTunnelIdentity(out), {
      name: 'h-jösé',
      uid: 'ü',
      groups: ['g-ñ', 'plain'],
      extra: {},
    });
  });

  it('refuses a value that is not UTF-8 instead of reading it as another name', () => {
    for (const raw of [
      ['Impersonate-User', 'h-j\xf6s\xe9'],
      ['Impersonate-User', 'alice', 'Impersonate-Group', 'g-\xf1'],
    ]) {
      const decoded = decodeTunnelIdentity(raw);
      assert.ok('refusal' in decoded, JSON.stringify(raw));
      assert.match(decoded.refusal, /not valid UTF-8/);
    }
  });
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { UserInfo } from '../../../shared/identity/user.ts';
import { firstMatchingRule, sourceMatches } from './match.ts';
import { validateSpec } from './validate.ts';

const user = (name: string, groups: string[] = [], uid?: string): UserInfo => ({
  name,
  groups,
  extra: {},
  ...(uid ? { uid } : {}),
});

function config(origin: string, ...rules: Array<Record<string, unknown>>) {
  return validateSpec({ clientIdentityExchanger: { rules } }, origin);
}

function source(raw: Record<string, unknown>) {
  return config('t', { name: 'r', type: 'PrivilegedIdentityExchanger', source: raw }).rules[0]!.source;
}

// The Go original's TestExchangeIdentity cases, plus the negative side of each.
test('each source field matches as in the original', () => {
  assert.ok(sourceMatches(source({ user: 'test' }), user('test'), ''));
  assert.ok(!sourceMatches(source({ user: 'test' }), user('test2'), ''));
  assert.ok(sourceMatches(source({ group: 'test-group' }), user('test', ['group', 'test-group']), ''));
  assert.ok(!sourceMatches(source({ group: 'test-group' }), user('test', ['group']), ''));
  assert.ok(sourceMatches(source({ uid: '12345' }), user('abc', [], '12345'), ''));
  assert.ok(!sourceMatches(source({ uid: '12345' }), user('abc'), ''));
  assert.ok(sourceMatches(source({ userPattern: 'test-.*' }), user('test-1234'), ''));
  assert.ok(!sourceMatches(source({ userPattern: 'test-.*' }), user('prod-1'), ''));
  assert.ok(
    sourceMatches(source({ groupPattern: 'test-group:.+' }), user('t', ['group:1', 'test-group:2']), ''),
  );
  assert.ok(!sourceMatches(source({ groupPattern: 'test-group:.+' }), user('t', ['group:1']), ''));
  assert.ok(sourceMatches(source({ clusterPattern: 'cluster-\\d+' }), user('t'), 'cluster-1'));
  assert.ok(!sourceMatches(source({ clusterPattern: 'cluster-\\d+' }), user('t'), 'cluster-other'));
  // All fields set must match together.
  const both = source({ user: 'test', cluster: 'c1' });
  assert.ok(sourceMatches(both, user('test'), 'c1'));
  assert.ok(!sourceMatches(both, user('test'), 'c2'));
});

test('the first matching rule wins: cluster rules before global ones, whatever their priority', () => {
  const global = config(
    'global',
    { name: 'g-high', type: 'PrivilegedIdentityExchanger', source: { user: 'alice' }, priority: 1000 },
    { name: 'g-any', type: 'PrivilegedIdentityExchanger', source: { userPattern: '.*' } },
  );
  const cluster = config('cluster', {
    name: 'c-low',
    type: 'StaticMappingIdentityExchanger',
    source: { user: 'alice' },
    target: { user: 'a' },
    priority: -5,
  });
  assert.equal(firstMatchingRule([cluster, global], user('alice'), 'c1')?.rule.name, 'c-low');
  assert.equal(firstMatchingRule([cluster, global], user('alice'), 'c1')?.configuration.origin, 'cluster');
  assert.equal(firstMatchingRule([undefined, global], user('alice'), 'c1')?.rule.name, 'g-high');
  assert.equal(firstMatchingRule([cluster, global], user('bob'), 'c1')?.rule.name, 'g-any');
  assert.equal(firstMatchingRule([cluster, undefined], user('bob'), 'c1'), undefined);
});

test("the seed's example: user-12345 on cluster-34567 is mapped, elsewhere not; sudoer is privileged", () => {
  const seed = config(
    'seed',
    { name: 'super-user', source: { group: 'sudoer' }, type: 'PrivilegedIdentityExchanger', priority: 10 },
    {
      name: 'mapping',
      source: { user: 'user-12345', cluster: 'cluster-34567' },
      target: { user: 'user-34567' },
      type: 'StaticMappingIdentityExchanger',
      priority: 100,
    },
    {
      name: 'external',
      source: { userPattern: 'ext-*' },
      url: 'https://exchanger.example/',
      type: 'ExternalIdentityExchanger',
      priority: 20,
    },
  );
  assert.equal(firstMatchingRule([seed], user('user-12345'), 'cluster-34567')?.rule.name, 'mapping');
  assert.equal(firstMatchingRule([seed], user('user-12345'), 'cluster-1'), undefined);
  assert.equal(firstMatchingRule([seed], user('bob', ['sudoer']), 'cluster-1')?.rule.name, 'super-user');
  assert.equal(firstMatchingRule([seed], user('ext-alice', ['sudoer']), 'c')?.rule.name, 'external');
  // Priority 100 beats the sudoer rule for a mapped user who is also a sudoer.
  assert.equal(
    firstMatchingRule([seed], user('user-12345', ['sudoer']), 'cluster-34567')?.rule.name,
    'mapping',
  );
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { UserInfo } from '../../../shared/identity/user.ts';
import { identityToPenetrate, penetrationRequested } from './impersonation.ts';

const alice: UserInfo = {
  name: 'alice',
  uid: 'hub-uid',
  groups: ['dev', 'system:authenticated'],
  extra: { 'example.com/scopes': ['view', 'edit'] },
};

test('penetration is requested only by impersonate=true', () => {
  assert.equal(penetrationRequested(new URLSearchParams('impersonate=true')), true);
  for (const query of ['', 'impersonate=false', 'impersonate=1', 'impersonate=True', 'impersonate']) {
    assert.equal(penetrationRequested(new URLSearchParams(query)), false, query);
  }
});

test('the caller is impersonated per request or always with the global gate, without the hub uid', () => {
  assert.equal(identityToPenetrate(alice, new URLSearchParams()), undefined);
  const expected = {
    name: 'alice',
    groups: ['dev', 'system:authenticated'],
    extra: { 'example.com/scopes': ['view', 'edit'] },
  };
  assert.deepEqual(identityToPenetrate(alice, new URLSearchParams('impersonate=true')), expected);
  assert.deepEqual(identityToPenetrate(alice, new URLSearchParams(), { always: true }), expected);
  // The returned identity is a copy: the proxy may not alter the caller's.
  const copy = identityToPenetrate(alice, new URLSearchParams(), { always: true })!;
  copy.groups.push('x');
  assert.deepEqual(alice.groups, ['dev', 'system:authenticated']);
});

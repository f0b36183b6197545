import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  identityToPenetrate,
  impersonationHeaders,
  isImpersonationHeader,
  penetrationRequested,
} from './impersonation.ts';
import type { UserInfo } from './user.ts';

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

test('headers as client-go writes them, extra keys percent-encoded', () => {
  assert.deepEqual(impersonationHeaders({ ...alice, extra: { ...alice.extra, 'Ünï code%': ['v'] } }), [
    ['Impersonate-User', 'alice'],
    ['Impersonate-Group', 'dev'],
    ['Impersonate-Group', 'system:authenticated'],
    ['Impersonate-Uid', 'hub-uid'],
    ['Impersonate-Extra-example.com%2Fscopes', 'view'],
    ['Impersonate-Extra-example.com%2Fscopes', 'edit'],
    ['Impersonate-Extra-%C3%9Cn%C3%AF%20code%25', 'v'],
  ]);
  // Round trip: the apiserver lower-cases and percent-decodes the key.
  assert.equal(decodeURIComponent('%C3%9Cn%C3%AF%20code%25'), 'Ünï code%');
});

test('client-supplied impersonation headers are recognised for stripping', () => {
  assert.equal(isImpersonationHeader('Impersonate-User'), true);
  assert.equal(isImpersonationHeader('impersonate-extra-scopes'), true);
  assert.equal(isImpersonationHeader('X-Remote-User'), false);
});

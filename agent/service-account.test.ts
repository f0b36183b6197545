import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serviceAccountOwner } from './service-account.ts';

const jwt = (claims: unknown) => `e30.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.signature`;

test('the ServiceAccount of a bound token, in the same namespace only', () => {
  const token = jwt({ 'kubernetes.io': { namespace: 'ns', serviceaccount: { name: 'agent', uid: 'u-1' } } });
  assert.deepEqual(serviceAccountOwner(token, 'ns'), {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    name: 'agent',
    uid: 'u-1',
  });
  assert.equal(serviceAccountOwner(token, 'other'), undefined, 'owner references cannot cross namespaces');
  assert.equal(serviceAccountOwner(undefined, 'ns'), undefined);
  assert.equal(serviceAccountOwner('not-a-jwt', 'ns'), undefined);
  assert.equal(serviceAccountOwner('a.!!!.c', 'ns'), undefined);
  assert.equal(serviceAccountOwner(jwt({ sub: 'x' }), 'ns'), undefined);
});

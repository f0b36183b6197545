import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubernetesObject } from '@kubernetes/client-node';
import { diffRelist, objectKey } from './relist-diff.ts';

const obj = (name: string, rv: string, namespace: string | undefined = 'ns', uid = `uid-${name}`) =>
  ({ metadata: { name, namespace, resourceVersion: rv, uid } }) as KubernetesObject;
const names = (objs: KubernetesObject[]) => objs.map(objectKey).sort();

test('keys: namespace/name, or name for a cluster-scoped object', () => {
  assert.equal(objectKey(obj('a', '1')), 'ns/a');
  assert.equal(objectKey({ metadata: { name: 'n' } }), 'n');
});

test('added, updated (resourceVersion changed), deleted; unchanged objects emit nothing', () => {
  const cache = new Map(
    [obj('same', '1'), obj('changed', '2'), obj('gone', '3')].map((o) => [objectKey(o), o]),
  );
  const diff = diffRelist(cache, [obj('same', '1'), obj('changed', '5'), obj('new', '6')]);
  assert.deepEqual(names(diff.added), ['ns/new']);
  assert.deepEqual(names(diff.updated), ['ns/changed']);
  assert.equal(diff.updated[0]!.metadata!.resourceVersion, '5', 'the listed state, not the cached one');
  assert.deepEqual(names(diff.deleted), ['ns/gone']);
});

test('deleted and created again under the same name (new uid): a delete and an add', () => {
  const old = obj('x', '1', 'ns', 'u1');
  const diff = diffRelist(new Map([[objectKey(old), old]]), [obj('x', '9', 'ns', 'u2')]);
  assert.deepEqual(diff.deleted, [old]);
  assert.equal(diff.added[0]!.metadata!.uid, 'u2');
  assert.deepEqual(diff.updated, []);
});

test('an empty list deletes everything; an empty cache adds everything', () => {
  const a = obj('a', '1');
  assert.deepEqual(diffRelist(new Map([[objectKey(a), a]]), []).deleted, [a]);
  assert.deepEqual(diffRelist(new Map(), [a]).added, [a]);
});

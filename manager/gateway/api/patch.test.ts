import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StatusError } from '../../../shared/kube/status.ts';
import { applyPatch, mergePatch, patchTypeOf } from './patch.ts';

const doc = { metadata: { name: 'c1', labels: { a: '1' } }, status: { healthy: true }, list: [1, 2] };

function fails(fn: () => unknown, code: number, message: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof StatusError, String(err));
    assert.equal(err.code, code);
    assert.match(err.message, message);
    return true;
  });
}

test('content types map to patch types; apply-patch and others are unsupported', () => {
  assert.equal(patchTypeOf('application/merge-patch+json'), 'merge');
  assert.equal(patchTypeOf('application/json-patch+json; charset=utf-8'), 'json');
  assert.equal(patchTypeOf('application/strategic-merge-patch+json'), 'strategic');
  assert.equal(patchTypeOf('application/apply-patch+yaml'), undefined);
  assert.equal(patchTypeOf(undefined), undefined);
});

test('merge patch (RFC 7386): objects merge, null deletes, arrays replace; input untouched', () => {
  const patched = applyPatch(
    'merge',
    doc,
    '{"status":{"healthy":false,"healthyReason":"x"},"metadata":{"labels":null},"list":[3]}',
  );
  assert.deepEqual(patched, {
    metadata: { name: 'c1' },
    status: { healthy: false, healthyReason: 'x' },
    list: [3],
  });
  assert.deepEqual(doc.status, { healthy: true });
  assert.deepEqual(mergePatch({ a: 1 }, 'x'), 'x');
  fails(() => applyPatch('merge', doc, '[1]'), 400, /must be a JSON object/);
  fails(() => applyPatch('merge', doc, '{bad'), 400, /merge patch is not valid JSON/);
});

test('strategic merge patch applies as a merge patch and refuses $-directives', () => {
  assert.deepEqual(applyPatch('strategic', doc, '{"status":{"healthy":false}}'), {
    ...doc,
    status: { healthy: false },
  });
  fails(
    () => applyPatch('strategic', doc, '{"status":{"$patch":"replace","healthy":false}}'),
    400,
    /directive "\$patch" at \/status is not supported/,
  );
});

test('JSON patch (RFC 6902): every operation, pointer escapes, the whole document', () => {
  const ops = [
    { op: 'replace', path: '/status/healthy', value: false },
    { op: 'add', path: '/status/healthyReason', value: 'down' },
    { op: 'test', path: '/status/healthyReason', value: 'down' },
    { op: 'add', path: '/metadata/labels/a~1b', value: '2' },
    { op: 'remove', path: '/metadata/labels/a' },
    { op: 'add', path: '/list/-', value: 3 },
    { op: 'add', path: '/list/0', value: 0 },
    { op: 'copy', from: '/list', path: '/copied' },
    { op: 'move', from: '/copied/3', path: '/moved' },
  ];
  assert.deepEqual(applyPatch('json', doc, JSON.stringify(ops)), {
    metadata: { name: 'c1', labels: { 'a/b': '2' } },
    status: { healthy: false, healthyReason: 'down' },
    list: [0, 1, 2, 3],
    copied: [0, 1, 2],
    moved: 3,
  });
  assert.deepEqual(applyPatch('json', doc, '[{"op":"replace","path":"","value":{"x":1}}]'), { x: 1 });
  assert.deepEqual(doc.list, [1, 2]);
});

test('JSON patch: undecodable is 400, inapplicable is 422 naming the operation', () => {
  fails(() => applyPatch('json', doc, '{"op":"add"}'), 400, /must be a JSON array/);
  fails(() => applyPatch('json', doc, '[{"op":"frob","path":"/a"}]'), 400, /invalid "op" "frob"/);
  fails(() => applyPatch('json', doc, '[{"op":"add","path":"a","value":1}]'), 400, /must start with "\/"/);
  fails(() => applyPatch('json', doc, '[{"op":"add","path":"/a"}]'), 400, /has no "value"/);
  fails(
    () => applyPatch('json', doc, '[{"op":"test","path":"/status/healthy","value":false}]'),
    422,
    /operation 0 \(test \/status\/healthy\): test failed/,
  );
  fails(() => applyPatch('json', doc, '[{"op":"remove","path":"/nope"}]'), 422, /\/nope does not exist/);
  fails(
    () => applyPatch('json', doc, '[{"op":"replace","path":"/nope/x","value":1}]'),
    422,
    /does not exist/,
  );
  fails(() => applyPatch('json', doc, '[{"op":"add","path":"/list/5","value":1}]'), 422, /out of range/);
  fails(
    () => applyPatch('json', doc, '[{"op":"move","from":"/metadata","path":"/metadata/x"}]'),
    422,
    /into its own child/,
  );
});

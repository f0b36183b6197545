import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acceptsJson, parseAccept } from './accept.ts';
import { negotiateRepresentation } from './negotiate.ts';

const kubectlGet =
  'application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json';

test('parseAccept keeps parameters and orders by q, then header order', () => {
  const ranges = parseAccept(
    'text/plain;q=0.5, application/json;as=Table;v=v1;g=meta.k8s.io, */*;q=0.1, image/png;q=0',
  );
  assert.deepEqual(
    ranges.map((r) => [`${r.type}/${r.subtype}`, r.q]),
    [
      ['application/json', 1],
      ['text/plain', 0.5],
      ['*/*', 0.1],
    ],
  );
  assert.deepEqual(ranges[0]?.params, { as: 'Table', v: 'v1', g: 'meta.k8s.io' });
  assert.deepEqual(
    parseAccept(undefined).map((r) => `${r.type}/${r.subtype}`),
    ['*/*'],
  );
  assert.equal(acceptsJson({ type: 'application', subtype: '*', params: {}, q: 1 }), true);
  assert.equal(acceptsJson({ type: 'application', subtype: 'yaml', params: {}, q: 1 }), false);
});

test('negotiation: Table for kubectl, objects for plain JSON, partial metadata, 406 otherwise', () => {
  assert.deepEqual(negotiateRepresentation(kubectlGet, 'list'), { as: 'Table', version: 'v1' });
  assert.deepEqual(negotiateRepresentation('application/json;as=Table;v=v1beta1;g=meta.k8s.io', 'object'), {
    as: 'Table',
    version: 'v1beta1',
  });
  assert.deepEqual(negotiateRepresentation('application/json, */*', 'object'), { as: 'object' });
  assert.deepEqual(negotiateRepresentation(undefined, 'list'), { as: 'object' });
  assert.deepEqual(
    negotiateRepresentation('application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1', 'list'),
    { as: 'PartialObjectMetadata', version: 'v1' },
  );
  // An unknown conversion is skipped in favour of the next acceptable type.
  assert.deepEqual(
    negotiateRepresentation('application/json;as=Foo;g=meta.k8s.io;v=v1,application/json', 'list'),
    {
      as: 'object',
    },
  );
  assert.throws(
    () => negotiateRepresentation('application/vnd.kubernetes.protobuf', 'list'),
    (err: { code?: number }) => err.code === 406,
  );
  assert.throws(
    () =>
      negotiateRepresentation('application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1', 'object'),
    (err: { code?: number }) => err.code === 406,
  );
});

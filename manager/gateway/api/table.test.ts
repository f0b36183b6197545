import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StatusError } from '../../../shared/kube/status.ts';
import { columnDefinitions, humanDuration, parseIncludeObject, renderTable } from './table.ts';
import { target, token } from './test-fixtures.ts';

const now = Date.parse('2026-01-03T00:00:05Z');

test('a Table has the meta/v1 shape, the original columns plus Age and a wide Reason and tunnel state', () => {
  const table = renderTable(
    [
      target('prod'),
      target('bad', { credential: undefined, labels: {}, problem: 'no token' }),
      target('behind', {
        tunnel: { connected: true, since: '2026-01-02T23:59:00Z', replica: 'cluster-gateway-5d8f-x2' },
      }),
      target('gone', { tunnel: { connected: false } }),
    ],
    {
      version: 'v1',
      includeObject: 'Metadata',
      resourceVersion: '42',
      now,
    },
  );
  assert.equal(table.kind, 'Table');
  assert.equal(table.apiVersion, 'meta.k8s.io/v1');
  assert.deepEqual(table.metadata, { resourceVersion: '42' });
  assert.deepEqual(
    table.columnDefinitions?.map((c) => [c.name, c.priority]),
    [
      ['Name', 0],
      ['Provider', 0],
      ['Credential-Type', 0],
      ['Endpoint-Type', 0],
      ['Healthy', 0],
      ['Age', 0],
      ['Reason', 1],
      ['Tunnel', 1],
      ['Tunnel-Age', 1],
      ['Gateway', 1],
    ],
  );
  for (const column of columnDefinitions) {
    assert.deepEqual(Object.keys(column).sort(), ['description', 'format', 'name', 'priority', 'type']);
  }
  assert.deepEqual(table.rows[0]?.cells, [
    'prod',
    '',
    'ServiceAccountToken',
    'Const',
    'true',
    '2d',
    '',
    '',
    '',
    '',
  ]);
  assert.deepEqual(table.rows[1]?.cells, [
    'bad',
    '',
    '<none>',
    'Const',
    'false',
    '2d',
    'no token',
    '',
    '',
    '',
  ]);
  assert.deepEqual(table.rows[2]?.cells.slice(7), ['Connected', '65s', 'cluster-gateway-5d8f-x2']);
  assert.deepEqual(table.rows[3]?.cells.slice(7), ['Disconnected', '', '']);
  const partial = table.rows[0]?.object as
    | { kind: string; apiVersion: string; metadata: { name: string } }
    | undefined;
  assert.equal(partial?.kind, 'PartialObjectMetadata');
  assert.equal(partial?.apiVersion, 'meta.k8s.io/v1');
  assert.equal(partial?.metadata.name, 'prod');
  assert.ok(!JSON.stringify(table).includes(token));
});

test('includeObject None, Object; v1beta1; headers omitted on request', () => {
  const none = renderTable([target('a')], {
    version: 'v1beta1',
    includeObject: 'None',
    noHeaders: true,
    now,
  });
  assert.equal(none.apiVersion, 'meta.k8s.io/v1beta1');
  assert.equal(none.columnDefinitions, null);
  assert.equal(none.rows[0]?.object, undefined);
  assert.deepEqual(none.metadata, {});
  const full = renderTable([target('a')], { version: 'v1', includeObject: 'Object', now });
  assert.equal((full.rows[0]?.object as { kind: string } | undefined)?.kind, 'ClusterGateway');
  assert.ok(!JSON.stringify(full).includes(token));
  assert.equal(
    renderTable([target('a', { creationTimestamp: '' })], { version: 'v1', includeObject: 'None', now })
      .rows[0]?.cells[5],
    '<unknown>',
  );
});

test('parseIncludeObject validates like the apiserver', () => {
  assert.equal(parseIncludeObject(null), 'Metadata');
  assert.equal(parseIncludeObject('Object'), 'Object');
  assert.throws(
    () => parseIncludeObject('All'),
    (err: unknown) => err instanceof StatusError && err.code === 400,
  );
});

test('humanDuration matches kubectl', () => {
  const s = 1000;
  const m = 60 * s;
  const h = 60 * m;
  const d = 24 * h;
  const cases: [number, string][] = [
    [-5 * s, '<invalid>'],
    [-1 * s, '0s'],
    [0, '0s'],
    [5 * s, '5s'],
    [119 * s, '119s'],
    [2 * m, '2m'],
    [3 * m + 20 * s, '3m20s'],
    [10 * m + 30 * s, '10m'],
    [179 * m, '179m'],
    [3 * h, '3h'],
    [5 * h + 10 * m, '5h10m'],
    [47 * h, '47h'],
    [2 * d, '2d'],
    [2 * d + 3 * h, '2d3h'],
    [8 * d, '8d'],
    [729 * d, '729d'],
    [730 * d, '2y'],
    [750 * d, '2y20d'],
    [9 * 365 * d, '9y'],
  ];
  for (const [ms, expected] of cases) assert.equal(humanDuration(ms), expected, `${ms}ms`);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { getClusterGateway, listClusterGateways } from './read.ts';
import { FakeDirectory, target, token } from './test-fixtures.ts';

const kubectlGet =
  'application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json';

const directory = () =>
  new FakeDirectory([
    target('prod', { labels: { env: 'prod' } }),
    target('dev', { labels: { env: 'dev' } }),
    target('edge', { labels: {} }),
  ]);

const query = (params: Record<string, string> = {}) => new URLSearchParams(params);

test('get returns the object; a missing one is a Kubernetes NotFound', () => {
  const dir = directory();
  const ok = getClusterGateway(dir, 'prod', { query: query() });
  assert.equal(ok.status, 200);
  assert.equal(ok.headers['content-type'], 'application/json');
  assert.equal(JSON.parse(ok.body).metadata.name, 'prod');
  assert.ok(!ok.body.includes(token));

  const missing = getClusterGateway(dir, 'nope', { query: query() });
  assert.equal(missing.status, 404);
  assert.deepEqual(JSON.parse(missing.body), {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: 'clustergateways.cluster.core.oam.dev "nope" not found',
    reason: 'NotFound',
    code: 404,
    details: { name: 'nope', group: 'cluster.core.oam.dev', kind: 'clustergateways' },
  });
});

test('before sync, unknown names and lists are 503 rather than a false "not found"', async () => {
  const dir = directory();
  dir.synced = false;
  assert.equal(getClusterGateway(dir, 'nope', { query: query() }).status, 503);
  assert.equal(getClusterGateway(dir, 'prod', { query: query() }).status, 200);
  assert.equal((await listClusterGateways(dir, { query: query() })).status, 503);
});

test('list filters by label and field selectors and carries the directory version', async () => {
  const dir = directory();
  dir.version = '777';
  const list = JSON.parse(
    (await listClusterGateways(dir, { query: query({ labelSelector: 'env in (prod,dev)' }) })).body,
  );
  assert.equal(list.kind, 'ClusterGatewayList');
  assert.equal(list.metadata.resourceVersion, '777');
  assert.deepEqual(list.items.map((i: { metadata: { name: string } }) => i.metadata.name).sort(), [
    'dev',
    'prod',
  ]);
  const byName = JSON.parse(
    (await listClusterGateways(dir, { query: query({ fieldSelector: 'metadata.name=edge' }) })).body,
  );
  assert.deepEqual(
    byName.items.map((i: { metadata: { name: string } }) => i.metadata.name),
    ['edge'],
  );
  const bad = await listClusterGateways(dir, { query: query({ labelSelector: 'env in prod' }) });
  assert.equal(bad.status, 400);
  assert.match(JSON.parse(bad.body).message, /invalid label selector/);
  assert.equal((await listClusterGateways(dir, { query: query({ fieldSelector: 'spec.x=1' }) })).status, 400);
});

test('kubectl gets a Table; metadata-only clients get partial objects; protobuf-only is 406', async () => {
  const dir = directory();
  const table = JSON.parse((await listClusterGateways(dir, { query: query(), accept: kubectlGet })).body);
  assert.equal(table.kind, 'Table');
  assert.equal(table.rows.length, 3);
  assert.equal(table.metadata.resourceVersion, '100');
  const one = JSON.parse(
    getClusterGateway(dir, 'prod', { query: query({ includeObject: 'None' }), accept: kubectlGet }).body,
  );
  assert.equal(one.rows.length, 1);
  assert.equal(one.rows[0].object, undefined);
  const badInclude = await listClusterGateways(dir, {
    query: query({ includeObject: 'x' }),
    accept: kubectlGet,
  });
  assert.equal(badInclude.status, 400);

  const partialList = JSON.parse(
    (
      await listClusterGateways(dir, {
        query: query(),
        accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1',
      })
    ).body,
  );
  assert.equal(partialList.kind, 'PartialObjectMetadataList');
  assert.equal(partialList.items[0].kind, 'PartialObjectMetadata');
  const partial = JSON.parse(
    getClusterGateway(dir, 'prod', {
      query: query(),
      accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1',
    }).body,
  );
  assert.deepEqual(Object.keys(partial), ['kind', 'apiVersion', 'metadata']);
  assert.equal(
    getClusterGateway(dir, 'prod', { query: query(), accept: 'application/vnd.kubernetes.protobuf' }).status,
    406,
  );
});

test("list resourceVersion: not older than (waited for), Exact only for the current one, and the apiserver's checks", async () => {
  const dir = Object.assign(directory(), {
    eventsSince: () => ({ kind: 'events' as const, events: [] }),
    waitForVersion: async (version: number) => {
      if (version > 200) return false;
      dir.version = String(version);
      return true;
    },
  });
  const ok = await listClusterGateways(dir, { query: query({ resourceVersion: '150' }) });
  assert.equal(ok.status, 200);
  assert.equal(JSON.parse(ok.body).metadata.resourceVersion, '150', 'waited until applied');
  const ahead = await listClusterGateways(dir, { query: query({ resourceVersion: '300' }) });
  assert.equal(ahead.status, 504);
  assert.match(JSON.parse(ahead.body).message, /^Too large resource version: 300, current: 150$/);
  const exact = await listClusterGateways(dir, {
    query: query({ resourceVersion: '150', resourceVersionMatch: 'Exact' }),
  });
  assert.equal(exact.status, 200);
  const older = await listClusterGateways(dir, {
    query: query({ resourceVersion: '120', resourceVersionMatch: 'Exact' }),
  });
  assert.equal(older.status, 410);
  assert.equal(JSON.parse(older.body).message, 'too old resource version: 120 (150)');

  const invalid: Array<[Record<string, string>, string]> = [
    [
      { resourceVersionMatch: 'NotOlderThan' },
      'resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided',
    ],
    [
      { resourceVersion: '0', resourceVersionMatch: 'Exact' },
      'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
    ],
    [
      { resourceVersion: '5', resourceVersionMatch: 'Newest' },
      'resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""',
    ],
    [{ sendInitialEvents: 'true' }, 'sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list'],
  ];
  for (const [params, message] of invalid) {
    const res = await listClusterGateways(dir, { query: query(params) });
    assert.equal(res.status, 422, JSON.stringify(params));
    assert.equal(JSON.parse(res.body).message, `ListOptions.meta.k8s.io "" is invalid: ${message}`);
  }
});

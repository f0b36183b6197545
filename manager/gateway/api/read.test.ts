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

test('before sync, unknown names and lists are 503 rather than a false "not found"', () => {
  const dir = directory();
  dir.synced = false;
  assert.equal(getClusterGateway(dir, 'nope', { query: query() }).status, 503);
  assert.equal(getClusterGateway(dir, 'prod', { query: query() }).status, 200);
  assert.equal(listClusterGateways(dir, { query: query() }).status, 503);
});

test('list filters by label and field selectors and carries the directory version', () => {
  const dir = directory();
  dir.version = '777';
  const list = JSON.parse(
    listClusterGateways(dir, { query: query({ labelSelector: 'env in (prod,dev)' }) }).body,
  );
  assert.equal(list.kind, 'ClusterGatewayList');
  assert.equal(list.metadata.resourceVersion, '777');
  assert.deepEqual(list.items.map((i: { metadata: { name: string } }) => i.metadata.name).sort(), [
    'dev',
    'prod',
  ]);
  const byName = JSON.parse(
    listClusterGateways(dir, { query: query({ fieldSelector: 'metadata.name=edge' }) }).body,
  );
  assert.deepEqual(
    byName.items.map((i: { metadata: { name: string } }) => i.metadata.name),
    ['edge'],
  );
  const bad = listClusterGateways(dir, { query: query({ labelSelector: 'env in prod' }) });
  assert.equal(bad.status, 400);
  assert.match(JSON.parse(bad.body).message, /invalid label selector/);
  assert.equal(listClusterGateways(dir, { query: query({ fieldSelector: 'spec.x=1' }) }).status, 400);
});

test('kubectl gets a Table; metadata-only clients get partial objects; protobuf-only is 406', () => {
  const dir = directory();
  const table = JSON.parse(listClusterGateways(dir, { query: query(), accept: kubectlGet }).body);
  assert.equal(table.kind, 'Table');
  assert.equal(table.rows.length, 3);
  assert.equal(table.metadata.resourceVersion, '100');
  const one = JSON.parse(
    getClusterGateway(dir, 'prod', { query: query({ includeObject: 'None' }), accept: kubectlGet }).body,
  );
  assert.equal(one.rows.length, 1);
  assert.equal(one.rows[0].object, undefined);
  const badInclude = listClusterGateways(dir, { query: query({ includeObject: 'x' }), accept: kubectlGet });
  assert.equal(badInclude.status, 400);

  const partialList = JSON.parse(
    listClusterGateways(dir, {
      query: query(),
      accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1',
    }).body,
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

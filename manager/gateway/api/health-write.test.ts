import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import type { AuthorizationAttributes, Authorizer } from '../auth/contracts.ts';
import type { ClusterTarget } from '../clusters/cluster.ts';
import type { ClusterProxy } from '../proxy/index.ts';
import { createRoutes } from '../routes.ts';
import { type HealthMark, type HealthMarkStore, writeClusterGatewayHealth } from './health-write.ts';
import { getClusterGateway } from './read.ts';
import { FakeDirectory, target } from './test-fixtures.ts';

/** Records marks by applying them to the directory, as the informer round trip would. */
class FakeStore implements HealthMarkStore {
  readonly calls: { name: string; mark: HealthMark; conditional: boolean }[] = [];
  fail?: StatusError;
  readonly directory: FakeDirectory;
  constructor(directory: FakeDirectory) {
    this.directory = directory;
  }
  async record(name: string, mark: HealthMark, options: { conditional: boolean }): Promise<void> {
    if (this.fail) throw this.fail;
    this.calls.push({ name, mark, conditional: options.conditional });
    const current = this.directory.clusters.get(name) as ClusterTarget;
    this.directory.clusters.set(name, {
      ...current,
      resourceVersion: String(Number(current.resourceVersion) + 1),
      health: { healthy: mark.healthy, ...(mark.reason ? { reason: mark.reason } : {}) },
    });
  }
}

function setup() {
  const directory = new FakeDirectory([target('c1'), target('c2')]);
  const store = new FakeStore(directory);
  const write = (method: string, body: unknown, contentType?: string, query = '') =>
    writeClusterGatewayHealth(directory, store, {
      method,
      name: 'c1',
      contentType: contentType ?? (method === 'PUT' ? 'application/json' : 'application/merge-patch+json'),
      body: typeof body === 'string' ? body : JSON.stringify(body),
      query: new URLSearchParams(query),
    });
  return { directory, store, write };
}

const json = (r: { body: string }) => JSON.parse(r.body);
const object = (status: object, metadata: object = {}) => ({
  apiVersion: 'cluster.core.oam.dev/v1alpha1',
  kind: 'ClusterGateway',
  metadata: { name: 'c1', ...metadata },
  status,
});

test("PUT of the whole object, as the original's client does: get, set status, update", async () => {
  const { store, write, directory } = setup();
  const got = directory.get('c1') as ClusterTarget;
  const res = await write(
    'PUT',
    object({ healthy: true, healthyReason: 'ConnectionTimeout' }, { resourceVersion: got.resourceVersion }),
  );
  assert.equal(res.status, 200, res.body);
  assert.deepEqual(json(res).status, { healthy: true, healthyReason: 'ConnectionTimeout' });
  assert.equal(json(res).metadata.resourceVersion, '101');
  assert.deepEqual(store.calls, [
    { name: 'c1', mark: { healthy: true, reason: 'ConnectionTimeout' }, conditional: true },
  ]);
  // Go's zero values: no status is healthy=false, reason "".
  const bare = await write('PUT', { metadata: { name: 'c1' } });
  assert.equal(bare.status, 200, bare.body);
  assert.deepEqual(store.calls[1]?.mark, { healthy: false, reason: '' });
  assert.equal(store.calls[1]?.conditional, false);
});

test('PUT with a stale resourceVersion is a 409 and records nothing', async () => {
  const { store, write } = setup();
  const res = await write('PUT', object({ healthy: false }, { resourceVersion: '99' }));
  assert.equal(res.status, 409);
  assert.equal(json(res).reason, 'Conflict');
  assert.match(json(res).message, /clustergateways.cluster.core.oam.dev "c1": the object has been modified/);
  assert.equal(store.calls.length, 0);
});

test('a conflict from the store (the Secret changed underneath) reaches the client as 409', async () => {
  const { store, write } = setup();
  store.fail = new StatusError(failureStatus(409, 'conflict'));
  assert.equal((await write('PUT', object({ healthy: false }, { resourceVersion: '100' }))).status, 409);
});

test('PATCH: merge, strategic merge and JSON patch apply to what GET shows', async () => {
  const { store, write } = setup();
  const merge = await write('PATCH', { status: { healthy: false, healthyReason: 'maintenance' } });
  assert.equal(merge.status, 200, merge.body);
  assert.deepEqual(json(merge).status, { healthy: false, healthyReason: 'maintenance' });
  assert.equal(store.calls[0]?.conditional, false);

  // kubectl patch --subresource=health -p '{"status":{"healthy":true}}': the reason stays as shown.
  const strategic = await write(
    'PATCH',
    { status: { healthy: true } },
    'application/strategic-merge-patch+json',
  );
  assert.equal(strategic.status, 200, strategic.body);
  assert.deepEqual(store.calls[1]?.mark, { healthy: true, reason: 'maintenance' });

  const jsonPatch = await write(
    'PATCH',
    [
      { op: 'test', path: '/status/healthy', value: true },
      { op: 'replace', path: '/status/healthy', value: false },
      { op: 'remove', path: '/status/healthyReason' },
    ],
    'application/json-patch+json',
  );
  assert.equal(jsonPatch.status, 200, jsonPatch.body);
  assert.deepEqual(store.calls[2]?.mark, { healthy: false, reason: '' });
});

test('PATCH that sets a resourceVersion is a precondition', async () => {
  const { store, write } = setup();
  assert.equal(
    (await write('PATCH', { metadata: { resourceVersion: '1' }, status: { healthy: false } })).status,
    409,
  );
  const ok = await write('PATCH', { metadata: { resourceVersion: '100' }, status: { healthy: false } });
  assert.equal(ok.status, 200, ok.body);
  assert.equal(store.calls[0]?.conditional, true);
});

test('invalid bodies are 400/415/422 Status with what to fix, and record nothing', async () => {
  const { store, write } = setup();
  const cases: [string, unknown, string | undefined, number, RegExp][] = [
    ['PUT', '{not json', undefined, 400, /request body is not valid JSON/],
    ['PUT', [1], undefined, 400, /must be a ClusterGateway object, got an array/],
    [
      'PUT',
      object({ healthy: true }, { name: 'c2' }),
      undefined,
      400,
      /name of the object \(c2\) does not match the name on the URL \(c1\)/,
    ],
    [
      'PUT',
      { ...object({}), kind: 'Secret' },
      undefined,
      400,
      /must be of type ClusterGateway\): kind "Secret"/,
    ],
    [
      'PUT',
      { ...object({}), apiVersion: 'v1' },
      undefined,
      400,
      /API version in the data \(v1\) does not match the expected API version \(cluster.core.oam.dev\/v1alpha1\)/,
    ],
    [
      'PUT',
      object({ healthy: 'yes' }),
      undefined,
      400,
      /status.healthy must be a boolean \(true or false\), got string "yes"/,
    ],
    [
      'PUT',
      object({ healthy: true, healthyReason: 7 }),
      undefined,
      400,
      /status.healthyReason must be a string/,
    ],
    [
      'PUT',
      object({ healthy: false, healthyReason: 'x'.repeat(1025) }),
      undefined,
      422,
      /is invalid: status.healthyReason: Too long/,
    ],
    [
      'PUT',
      object({ healthy: true }),
      'application/yaml',
      415,
      /accepted media types include: application\/json/,
    ],
    [
      'PATCH',
      { status: { healthy: true } },
      'application/apply-patch+yaml',
      415,
      /application\/merge-patch\+json/,
    ],
    ['PATCH', { metadata: { name: 'other' } }, undefined, 400, /does not match the name on the URL/],
    [
      'PATCH',
      [{ op: 'test', path: '/status/healthy', value: false }],
      'application/json-patch+json',
      422,
      /test failed/,
    ],
  ];
  for (const [method, body, contentType, code, message] of cases) {
    const res = await write(method, body, contentType);
    assert.equal(res.status, code, `${method} ${JSON.stringify(body).slice(0, 80)}: ${res.body}`);
    assert.equal(json(res).kind, 'Status');
    assert.match(json(res).message, message);
  }
  assert.equal(store.calls.length, 0);
});

test('dryRun=All validates and answers without recording; other values are refused', async () => {
  const { store, write } = setup();
  const dry = await write('PUT', object({ healthy: false, healthyReason: 'x' }), undefined, 'dryRun=All');
  assert.equal(dry.status, 200, dry.body);
  assert.deepEqual(json(dry).status, { healthy: false, healthyReason: 'x' });
  assert.equal((await write('PUT', object({ healthy: false }), undefined, 'dryRun=Some')).status, 422);
  assert.equal(store.calls.length, 0);
});

test('an unknown cluster is 404', async () => {
  const { directory, store } = setup();
  const res = await writeClusterGatewayHealth(directory, store, {
    method: 'PUT',
    name: 'nope',
    body: '{}',
    query: new URLSearchParams(),
  });
  assert.equal(res.status, 404);
});

test('through the routes: authorized as update/patch on clustergateways/health; 403 without it', async () => {
  const { directory, store } = setup();
  const asked: AuthorizationAttributes[] = [];
  const authorizer: Authorizer = {
    authorize: async (user, attributes) => {
      asked.push(attributes);
      return user.name === 'admin' ? { allowed: true, reason: '' } : { allowed: false, reason: '' };
    },
  };
  const routes = createRoutes({
    directory,
    authenticator: {
      authenticate: async (req) => ({ name: String(req.headers['x-user']), groups: [], extra: {} }),
    },
    authorizer,
    proxy: {} as ClusterProxy,
    ready: () => true,
    impersonateAll: false,
    authorizeProxySubpath: false,
    rejectUnhealthy: false,
    health: store,
    log: { warn: () => {}, debug: () => {} },
  });
  const server = http.createServer(routes.request);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/apis/cluster.core.oam.dev/v1alpha1/clustergateways/c1`;
  try {
    const send = (method: string, user: string, body: string, type: string, path = '/health') =>
      fetch(base + path, { method, body, headers: { 'x-user': user, 'content-type': type } });
    const put = await send('PUT', 'admin', JSON.stringify(object({ healthy: false })), 'application/json');
    assert.equal(put.status, 200, await put.clone().text());
    const patch = await send('PATCH', 'admin', '{"status":{"healthy":true}}', 'application/merge-patch+json');
    assert.equal(patch.status, 200);
    assert.deepEqual(asked, [
      {
        kind: 'resource',
        verb: 'update',
        group: 'cluster.core.oam.dev',
        version: 'v1alpha1',
        resource: 'clustergateways',
        subresource: 'health',
        name: 'c1',
      },
      {
        kind: 'resource',
        verb: 'patch',
        group: 'cluster.core.oam.dev',
        version: 'v1alpha1',
        resource: 'clustergateways',
        subresource: 'health',
        name: 'c1',
      },
    ]);
    const denied = await send('PUT', 'bob', JSON.stringify(object({ healthy: false })), 'application/json');
    assert.equal(denied.status, 403);
    assert.match(
      ((await denied.json()) as { message: string }).message,
      /User "bob" cannot update resource "clustergateways\/health" in API group "cluster.core.oam.dev"/,
    );
    assert.equal(store.calls.length, 2);
    // The object itself stays read-only.
    assert.equal((await send('PUT', 'admin', '{}', 'application/json', '')).status, 405);
    const huge = await send('PUT', 'admin', 'x'.repeat(300 * 1024), 'application/json');
    assert.equal(huge.status, 413);
  } finally {
    server.close();
  }
});

test('a write answers with what was written, as the original does, even where the merged view differs', async () => {
  const { directory, store, write } = setup();
  // The store records the mark, but the prober says otherwise: what a later GET shows.
  store.record = async (name, mark, options) => {
    store.calls.push({ name, mark, conditional: options.conditional });
    const current = directory.clusters.get(name) as ClusterTarget;
    directory.clusters.set(name, {
      ...current,
      resourceVersion: String(Number(current.resourceVersion) + 1),
      health: { healthy: false, reason: 'Get "https://127.0.0.1:1/healthz": connect ECONNREFUSED' },
    });
  };
  const answer = await write('PUT', object({ healthy: true, healthyReason: 'checked by hand' }));
  assert.equal(answer.status, 200);
  assert.deepEqual(json(answer).status, { healthy: true, healthyReason: 'checked by hand' });
  assert.equal(json(answer).metadata.resourceVersion, '101', 'at the version of the write');
  const later = getClusterGateway(directory, 'c1', { query: new URLSearchParams() });
  assert.equal(JSON.parse(later.body).status.healthy, false, 'a later read shows the merged view');
  const noReason = await write('PUT', object({ healthy: false }));
  assert.deepEqual(json(noReason).status, { healthy: false });
});

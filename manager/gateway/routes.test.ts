import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { UserInfo } from '../../shared/identity/user.ts';
import type { Authenticator, Authorizer } from './auth/contracts.ts';
import type { ClusterDirectory, ClusterTarget } from './clusters/cluster.ts';
import type { ClusterProxy } from './proxy/index.ts';
import { createRoutes } from './routes.ts';

// Small fakes: this tests routing and error shapes, not the collaborators.
const cluster = (name: string, healthy: boolean): ClusterTarget => ({
  name,
  labels: {},
  annotations: {},
  creationTimestamp: '2026-01-01T00:00:00Z',
  resourceVersion: '1',
  health: healthy ? { healthy } : { healthy, reason: 'unreachable: connect ECONNREFUSED' },
  // As merge.ts derives it from a failed probe (clusters/offline-causes.ts).
  ...(healthy
    ? {}
    : {
        offline: [
          { kind: 'probe', message: 'the last health probe failed: unreachable: connect ECONNREFUSED' },
        ],
      }),
  connectionKey: name,
  endpoint: { type: 'Const', address: 'https://127.0.0.1:1', insecure: true },
  credential: { type: 'ServiceAccountToken', token: 't' },
});
const clusters = new Map([
  ['up', cluster('up', true)],
  ['down', cluster('down', false)],
]);
const directory: ClusterDirectory = {
  get: (name) => clusters.get(name),
  list: () => [...clusters.values()],
  version: '1',
  synced: true,
  subscribe: () => () => {},
};
const users: Record<string, UserInfo> = {
  alice: { name: 'alice', groups: ['system:authenticated'], extra: {} },
  bob: { name: 'bob', groups: ['system:authenticated'], extra: {} },
};
const authenticator: Authenticator = {
  authenticate: async (req) => users[String(req.headers['x-test-user'])],
};
const authorizer: Authorizer = {
  authorize: async (user) =>
    user.name === 'alice' ? { allowed: true, reason: '' } : { allowed: false, reason: 'no RBAC rule' },
};
const proxied: { cluster: string; path: string; identity?: string }[] = [];
const proxy: ClusterProxy = {
  handleRequest: (_req, res, target, upstreamPath, identity) => {
    proxied.push({
      cluster: target.name,
      path: upstreamPath,
      ...(identity ? { identity: identity.name } : {}),
    });
    res.end('proxied');
  },
  handleUpgrade: () => {},
  forget: () => {},
  stats: () => ({
    pools: 0,
    retired: 0,
    activeSockets: 0,
    idleSockets: 0,
    queuedRequests: 0,
    http2Sessions: 0,
    http2Streams: 0,
    perCluster: [],
    inflightRequests: 0,
    openUpgrades: 0,
  }),
  close: () => {},
};
const silent = { warn: () => {}, debug: () => {} };

let server: http.Server;
let base: string;

before(async () => {
  const routes = createRoutes({
    directory,
    authenticator,
    authorizer,
    proxy,
    ready: () => true,
    impersonateAll: false,
    authorizeProxySubpath: false,
    rejectUnhealthy: true,
    probeIntervalSeconds: 10,
    log: silent,
  });
  server = http.createServer(routes.request);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => server.close());

async function get(path: string, user?: string, method = 'GET') {
  const res = await fetch(base + path, { method, headers: user ? { 'x-test-user': user } : {} });
  const text = await res.text();
  return {
    status: res.status,
    text,
    json: () => JSON.parse(text) as { kind: string; message: string; code: number },
  };
}

const prefix = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways';

test('health endpoints need no credentials; everything else does', async () => {
  assert.equal((await get('/healthz')).text, 'ok');
  assert.equal((await get('/readyz')).status, 200);
  const res = await get(`${prefix}/up/proxy/api`);
  assert.equal(res.status, 401);
  assert.equal(res.json().kind, 'Status');
});

test('a proxied request reaches the proxy with its upstream path and query', async () => {
  const res = await get(`${prefix}/up/proxy/api/v1/pods?watch=true&dryRun=All`, 'alice');
  assert.equal(res.text, 'proxied');
  assert.deepEqual(proxied.at(-1), { cluster: 'up', path: '/api/v1/pods?watch=true&dryRun=All' });
});

test('?impersonate=true hands the caller identity to the proxy', async () => {
  await get(`${prefix}/up/proxy/api?impersonate=true`, 'alice');
  assert.equal(proxied.at(-1)?.identity, 'alice');
});

test('unknown clusters are 404, unhealthy ones 503 with the reason (--reject-unhealthy)', async () => {
  const missing = await get(`${prefix}/nope/proxy/api`, 'alice');
  assert.equal(missing.status, 404);
  assert.match(missing.json().message, /"nope" not found/);
  const started = performance.now();
  const down = await get(`${prefix}/down/proxy/api`, 'alice');
  const took = performance.now() - started;
  assert.equal(down.status, 503);
  assert.match(down.json().message, /cluster "down" is unhealthy: unreachable: connect ECONNREFUSED/);
  // The defined answer of issue 32: a ClusterOffline cause, the ClusterGateway named, at once.
  assert.deepEqual((JSON.parse(down.text) as { details: unknown }).details, {
    name: 'down',
    group: 'cluster.core.oam.dev',
    kind: 'clustergateways',
    causes: [
      {
        reason: 'ClusterOffline',
        message: 'the last health probe failed: unreachable: connect ECONNREFUSED',
      },
    ],
    retryAfterSeconds: 10,
  });
  assert.ok(took < 100, `answered in ${took.toFixed(1)} ms`);
  assert.ok(!proxied.some((p) => p.cluster === 'down'), 'never handed to the proxy');
  // Not probed yet (just after a restart): unknown, not unhealthy (clusters/health-precedence.ts).
  const unknown = { healthy: false, reason: 'Unknown: not probed yet', unknown: true };
  // Unknown has no offline cause (merge.ts): never probed, so not known to be offline.
  const { offline: _noCause, ...notProbed } = cluster('new', false);
  clusters.set('new', { ...notProbed, health: unknown });
  try {
    assert.equal((await get(`${prefix}/new/proxy/api`, 'alice')).text, 'proxied', 'tried, not rejected');
  } finally {
    clusters.delete('new');
  }
});

test('denied requests are 403 with the Kubernetes wording and the authorizer reason', async () => {
  const res = await get(`${prefix}/up/proxy/api`, 'bob');
  assert.equal(res.status, 403);
  assert.match(
    res.json().message,
    /User "bob" cannot get resource "clustergateways\/proxy" in API group "cluster.core.oam.dev" at the cluster scope: no RBAC rule/,
  );
});

test('clustergateways are read-only, and bad names and paths are clear 4xx errors', async () => {
  const del = await get(`${prefix}/up`, 'alice', 'DELETE');
  assert.equal(del.status, 405);
  assert.match(del.json().message, /read-only/);
  const bad = await get(`${prefix}/Not_Valid`, 'alice');
  assert.equal(bad.status, 404);
  assert.match(bad.json().message, /not a valid cluster name/);
  const elsewhere = await get('/api/v1/pods', 'alice');
  assert.equal(elsewhere.status, 404);
});

test('get and list answer from the directory', async () => {
  const one = await get(`${prefix}/up`, 'alice');
  assert.equal(one.status, 200);
  assert.equal((JSON.parse(one.text) as { metadata: { name: string } }).metadata.name, 'up');
  const list = JSON.parse((await get(prefix, 'alice')).text) as { items: unknown[] };
  assert.equal(list.items.length, 2);
});

test('--authorize-proxy-subpath also authorizes the proxied request itself on the hub', async () => {
  const seen: string[] = [];
  const routes = createRoutes({
    directory,
    authenticator,
    authorizer: {
      authorize: async (_user, a) => {
        seen.push(
          a.kind === 'resource'
            ? `${a.verb} ${a.resource}${a.subresource ? `/${a.subresource}` : ''}`
            : a.path,
        );
        const allowed = !(a.kind === 'resource' && a.resource === 'secrets');
        return { allowed, reason: allowed ? '' : 'secrets are off limits' };
      },
    },
    proxy,
    ready: () => true,
    impersonateAll: false,
    authorizeProxySubpath: true,
    rejectUnhealthy: false,
    log: silent,
  });
  const local = http.createServer(routes.request);
  await new Promise<void>((r) => local.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(local.address() as AddressInfo).port}${prefix}/up/proxy/api/v1/namespaces/default`;
  try {
    const pods = await fetch(`${url}/pods`, { headers: { 'x-test-user': 'alice' } });
    assert.equal(pods.status, 200);
    assert.deepEqual(seen.splice(0), ['get clustergateways/proxy', 'list pods']);
    const secrets = await fetch(`${url}/secrets/token`, { headers: { 'x-test-user': 'alice' } });
    assert.equal(secrets.status, 403);
    assert.match(
      ((await secrets.json()) as { message: string }).message,
      /cannot get resource "secrets".*off limits/,
    );
  } finally {
    local.close();
  }
});

test('a collection GET serves what was authorized: every watch value but false/0 is a watch, as in Go', async () => {
  const verbs: string[] = [];
  const routes = createRoutes({
    directory,
    authenticator,
    authorizer: {
      authorize: async (_user, a) => {
        verbs.push(a.verb);
        return { allowed: true, reason: '' };
      },
    },
    proxy,
    ready: () => true,
    impersonateAll: false,
    authorizeProxySubpath: false,
    rejectUnhealthy: false,
    log: silent,
  });
  const local = http.createServer(routes.request);
  await new Promise<void>((r) => local.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(local.address() as AddressInfo).port}${prefix}`;
  // What the response is: a watch stream's first event type, or the kind of a complete object.
  const served = async (query: string): Promise<string> => {
    const abort = new AbortController();
    const res = await fetch(`${url}${query}`, { headers: { 'x-test-user': 'alice' }, signal: abort.signal });
    assert.equal(res.status, 200, query);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    try {
      while (!text.includes('\n')) {
        const { done, value } = await reader.read();
        if (done) return (JSON.parse(text) as { kind: string }).kind;
        text += Buffer.from(value).toString();
      }
      return `watch ${(JSON.parse(text.slice(0, text.indexOf('\n'))) as { type: string }).type}`;
    } finally {
      abort.abort();
    }
  };
  try {
    for (const query of [
      '?watch=true',
      '?watch=1',
      '?watch=True',
      '?watch=TRUE',
      '?watch=yes',
      '?watch=no',
      '?watch=',
      '?watch',
      '?watch=00',
    ]) {
      assert.equal(await served(query), 'watch ADDED', query);
      assert.deepEqual(verbs.splice(0), ['watch'], query);
    }
    for (const query of [
      '',
      '?watch=false',
      '?watch=0',
      '?watch=FALSE',
      '?watch=False',
      '?watch=fal%C5%BFe',
      '?labelSelector=a',
    ]) {
      assert.equal(await served(query), 'ClusterGatewayList', query);
      assert.deepEqual(verbs.splice(0), ['list'], query);
    }
    // The first value decides, as Go's conversion reads only [0].
    assert.equal(await served('?watch=false&watch=true'), 'ClusterGatewayList');
    assert.deepEqual(verbs.splice(0), ['list']);
    assert.equal(await served('?watch=yes&watch=false'), 'watch ADDED');
    assert.deepEqual(verbs.splice(0), ['watch']);
  } finally {
    local.close();
    local.closeAllConnections();
  }
});

test('without --reject-unhealthy a marked cluster is tried, but a ClusterProxy one without its tunnel is ClusterOffline at once, upgrades too', async () => {
  const routes = createRoutes({
    directory,
    authenticator,
    authorizer,
    proxy,
    ready: () => true,
    impersonateAll: false,
    authorizeProxySubpath: false,
    rejectUnhealthy: false,
    log: silent,
  });
  const local = http.createServer(routes.request);
  local.on('upgrade', routes.upgrade);
  await new Promise<void>((r) => local.listen(0, '127.0.0.1', r));
  const port = (local.address() as AddressInfo).port;
  const marked: ClusterTarget = {
    ...cluster('marked', false),
    health: { healthy: false, reason: 'Maintenance' },
    offline: [{ kind: 'mark', message: 'marked unhealthy through the health subresource: Maintenance' }],
  };
  const { endpoint: _none, ...noEndpoint } = cluster('edge', true);
  const tunnelDown: ClusterTarget = {
    ...noEndpoint,
    problem: 'endpoint type is ClusterProxy but no agent tunnel is connected for this cluster',
    tunnel: { connected: false },
    offline: [{ kind: 'tunnel', message: 'no agent tunnel is connected (endpoint type ClusterProxy)' }],
  };
  clusters.set('marked', marked);
  clusters.set('edge', tunnelDown);
  try {
    const tried = await fetch(`http://127.0.0.1:${port}${prefix}/marked/proxy/api`, {
      headers: { 'x-test-user': 'alice' },
    });
    assert.equal(await tried.text(), 'proxied', 'tried, as the original does');

    const res = await fetch(`http://127.0.0.1:${port}${prefix}/edge/proxy/api/v1/pods`, {
      headers: { 'x-test-user': 'alice' },
    });
    assert.equal(res.status, 503);
    const status = (await res.json()) as { message: string; reason: string; details: unknown };
    assert.equal(
      status.message,
      'cluster "edge" is unreachable: endpoint type is ClusterProxy but no agent tunnel is connected for this cluster',
    );
    assert.equal(status.reason, 'ServiceUnavailable');
    assert.deepEqual(status.details, {
      name: 'edge',
      group: 'cluster.core.oam.dev',
      kind: 'clustergateways',
      causes: [
        { reason: 'ClusterOffline', message: 'no agent tunnel is connected (endpoint type ClusterProxy)' },
      ],
    });
    assert.ok(!proxied.some((p) => p.cluster === 'edge'), 'never handed to the proxy');

    // exec and port-forward are upgrades: the same Status, written on the socket.
    const upgraded = await new Promise<{ code: number; body: string }>((resolve, reject) => {
      const req = http.request({
        port,
        host: '127.0.0.1',
        path: `${prefix}/edge/proxy/api/v1/namespaces/default/pods/p/exec?command=sh`,
        headers: { 'x-test-user': 'alice', connection: 'Upgrade', upgrade: 'websocket' },
      });
      req.on('response', (r) => {
        let body = '';
        r.on('data', (chunk: Buffer) => {
          body += chunk.toString();
        });
        r.on('end', () => resolve({ code: r.statusCode ?? 0, body }));
      });
      req.on('upgrade', () => reject(new Error('upgraded')));
      req.on('error', reject);
      req.end();
    });
    assert.equal(upgraded.code, 503);
    assert.match(upgraded.body, /"reason":"ClusterOffline"/);
  } finally {
    clusters.delete('marked');
    clusters.delete('edge');
    local.close();
  }
});

/**
 * routes.ts with the identity module wired in (identity/): what reaches the
 * proxy, and what the gateway refuses itself, for per-cluster settings.
 * The collaborators are small fakes; identity/*.test.ts test the rules.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { UserInfo } from '../../shared/identity/user.ts';
import type { Authenticator, Authorizer } from './auth/contracts.ts';
import type { ClusterDirectory, ClusterTarget } from './clusters/cluster.ts';
import { INLINE_CONFIGURATION_ANNOTATION } from './identity/configuration.ts';
import { ProxyConfigurationStore } from './identity/configuration-store.ts';
import { ExternalIdentityExchanger } from './identity/external-exchanger.ts';
import { ProxyIdentity } from './identity/proxy-identity.ts';
import type { ClusterProxy, ProxyAccess } from './proxy/index.ts';
import { createRoutes } from './routes.ts';

const mapping = `spec:
  clientIdentityExchanger:
    rules:
    - name: mapping
      type: StaticMappingIdentityExchanger
      source: {user: user-12345}
      target: {user: user-34567}
`;

const cluster = (name: string, annotations: Record<string, string>): ClusterTarget => ({
  name,
  labels: {},
  annotations,
  creationTimestamp: '2026-01-01T00:00:00Z',
  resourceVersion: '1',
  health: { healthy: true },
  connectionKey: name,
  endpoint: { type: 'Const', address: 'https://127.0.0.1:1', insecure: true },
  credential: { type: 'ServiceAccountToken', token: 't' },
});
const clusters = new Map([
  ['mapped', cluster('mapped', { [INLINE_CONFIGURATION_ANNOTATION]: mapping })],
  [
    'guarded',
    cluster('guarded', { [INLINE_CONFIGURATION_ANNOTATION]: 'spec: {authorizeProxySubpath: true}' }),
  ],
  [
    'broken',
    cluster('broken', { [INLINE_CONFIGURATION_ANNOTATION]: 'spec: {authorizeProxySubpath: maybe}' }),
  ],
  ['plain', cluster('plain', {})],
]);
const directory: ClusterDirectory = {
  get: (name) => clusters.get(name),
  list: () => [...clusters.values()],
  version: '1',
  synced: true,
  subscribe: () => () => {},
};
const authenticator: Authenticator = {
  authenticate: async (req) => ({ name: String(req.headers['x-test-user']), groups: [], extra: {} }),
};
// Everyone may use the proxy subresource; on the hub, only user1 may touch namespace1.
const reviews: Array<{ user: string; proxied: boolean; namespace?: string }> = [];
const authorizer: Authorizer = {
  authorize: async (user, attributes, context) => {
    const proxied = context?.proxied === true;
    const namespace = attributes.kind === 'resource' ? attributes.namespace : undefined;
    reviews.push({ user: user.name, proxied, ...(namespace ? { namespace } : {}) });
    if (!proxied) return { allowed: true, reason: '' };
    return user.name === 'user1' && namespace === 'namespace1'
      ? { allowed: true, reason: '' }
      : { allowed: false, reason: 'no RBAC rule' };
  },
};
const proxied: Array<{ cluster: string; path: string; identity?: UserInfo; access?: ProxyAccess }> = [];
const proxy = {
  handleRequest: (
    ...[, res, target, upstreamPath, identity, access]: Parameters<ClusterProxy['handleRequest']>
  ) => {
    proxied.push({
      cluster: target.name,
      path: upstreamPath,
      ...(identity ? { identity } : {}),
      ...(access ? { access } : {}),
    });
    res.end('proxied');
  },
  handleUpgrade: () => {},
  forget: () => {},
  close: () => {},
} as unknown as ClusterProxy;
const accessLines: Array<Record<string, unknown>> = [];

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
    identity: new ProxyIdentity({
      store: new ProxyConfigurationStore({ globalObjectName: '', watchesObjects: false }),
      external: new ExternalIdentityExchanger({ maxEntries: 1 }),
      penetrateAll: false,
      authorizeProxySubpath: false,
    }),
    accessLog: { info: (fields) => accessLines.push(fields as Record<string, unknown>) },
    rejectUnhealthy: false,
    log: { warn: () => {}, debug: () => {} },
  });
  server = http.createServer(routes.request);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => server.close());

async function get(user: string, path: string) {
  const res = await fetch(`${base}/apis/cluster.core.oam.dev/v1alpha1/clustergateways${path}`, {
    headers: { 'x-test-user': user },
  });
  return { status: res.status, body: await res.text() };
}

test("a cluster annotation's exchange rule reaches the proxy as the identity, with the access record", async () => {
  proxied.length = 0;
  const res = await get('user-12345', '/mapped/proxy/api/v1/namespaces/default?impersonate=true');
  assert.equal(res.status, 200, res.body);
  assert.equal(proxied[0]?.identity?.name, 'user-34567');
  assert.deepEqual(proxied[0]?.access, {
    user: 'user-12345',
    as: 'static-mapping',
    clusterUser: 'user-34567',
    rule: 'mapping',
    ruleOrigin: `annotation ${INLINE_CONFIGURATION_ANNOTATION} of cluster "mapped"`,
  });
  // Without ?impersonate=true the gateway credential is used, as before.
  await get('user-12345', '/mapped/proxy/api/v1/namespaces/default');
  assert.equal(proxied[1]?.identity, undefined);
  assert.equal(proxied[1]?.access?.as, 'cluster-credential');
});

test('local authorization turned on by one cluster: user1 reaches namespace1, user2 is refused before the proxy', async () => {
  proxied.length = 0;
  accessLines.length = 0;
  const allowed = await get('user1', '/guarded/proxy/api/v1/namespaces/namespace1/configmaps?x=1&x=2');
  assert.equal(allowed.status, 200, allowed.body);
  const refused = await get('user2', '/guarded/proxy/api/v1/namespaces/namespace1/configmaps');
  assert.equal(refused.status, 403);
  assert.match(refused.body, /User \\"user2\\" cannot list resource \\"configmaps\\".*namespace1/);
  assert.deepEqual(
    proxied.map((p) => p.cluster),
    ['guarded'],
    'only user1 was forwarded',
  );
  assert.deepEqual(accessLines.at(-1), {
    cluster: 'guarded',
    verb: 'list',
    method: 'GET',
    path: '/api/v1/namespaces/namespace1/configmaps',
    code: 403,
    user: 'user2',
    as: 'refused',
  });
  // Another cluster is not checked on the hub.
  reviews.length = 0;
  assert.equal((await get('user2', '/plain/proxy/api/v1/namespaces/namespace1/configmaps')).status, 200);
  assert.ok(reviews.every((r) => !r.proxied));
});

test('a cluster whose configuration was never valid refuses with a 500 naming the field', async () => {
  proxied.length = 0;
  const res = await get('user1', '/broken/proxy/api/v1/namespaces');
  assert.equal(res.status, 500);
  assert.match(res.body, /spec\.authorizeProxySubpath: must be true or false/);
  assert.equal(proxied.length, 0);
});

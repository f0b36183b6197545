/**
 * Opt-in behaviour of the gateway, on a second gateway process started with
 * the flags (the environment's gateway runs with defaults). It uses the same
 * hub, credentials and managed clusters; requests reach it as the aggregator's
 * do, with the front-proxy client certificate.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { waitFor } from '../hack/localenv/wait.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import { applyClusterSecret, secretPath } from './support/credentials.ts';
import { hubClient } from './support/environment.ts';
import { gatewayRequest } from './support/gateway-client.ts';
import { grantOnHub, hubUser, revokeOnHub } from './support/rbac.ts';
import { type SecondGateway, startSecondGateway } from './support/second-gateway.ts';
import { proxyPrefix } from './support/users.ts';

let hub: KubeClient;
let gateway: SecondGateway;
let url: string;
const user = 'subpath-bob';
const asUser = { frontProxy: { user, groups: ['system:authenticated'] } };

before(async () => {
  hub = await hubClient();
  gateway = await startSecondGateway('gateway-with-flags', [
    '--health-check-interval=1',
    '--reject-unhealthy',
    '--authorize-proxy-subpath',
  ]);
  url = gateway.url;
  // The user may use the proxy subresource, and nothing else on the hub yet.
  await grantOnHub(
    hub,
    `${user}-proxy`,
    [hubUser(user)],
    [{ apiGroups: ['cluster.core.oam.dev'], resources: ['clustergateways/proxy'], verbs: ['get'] }],
  );
});

after(async () => {
  gateway?.stop();
  for (const name of [`${user}-proxy`, `${user}-pods`]) await revokeOnHub(hub, name);
  await hub.delete(secretPath('unhealthy'));
  hub?.close();
});

test('--reject-unhealthy answers 503 at once for a cluster whose probe fails, and serves healthy ones', async () => {
  await applyClusterSecret(hub, 'unhealthy', 'ServiceAccountToken', {
    endpoint: 'https://127.0.0.1:9',
    token: 'x',
  });
  const admin = { frontProxy: { user: 'admin', groups: ['system:masters'] } };
  const res = await waitFor('the probe to mark the cluster unhealthy', async () => {
    const r = await gatewayRequest('GET', `${proxyPrefix}/unhealthy/proxy/api/v1/namespaces`, admin, url);
    // Before its first probe the cluster is unknown and tried (a 503 "is unreachable" from the proxy itself).
    return /is unhealthy: unreachable/.test(r.body) ? r : undefined;
  });
  assert.equal(res.status, 503);
  assert.match(
    res.json<{ message: string }>().message,
    /cluster "unhealthy" is unhealthy: unreachable: .*ECONNREFUSED/,
  );
  const started = Date.now();
  await gatewayRequest('GET', `${proxyPrefix}/unhealthy/proxy/api/v1/namespaces`, admin, url);
  assert.ok(Date.now() - started < 500, 'rejected without trying the cluster');
  const healthy = await gatewayRequest(
    'GET',
    `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/default`,
    admin,
    url,
  );
  assert.equal(healthy.status, 200);
});

test('--authorize-proxy-subpath checks the proxied request against the hub RBAC too', async () => {
  const pods = `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/default/pods`;
  const denied = await gatewayRequest('GET', pods, asUser, url);
  assert.equal(denied.status, 403);
  assert.match(denied.json<{ message: string }>().message, /User "subpath-bob" cannot list resource "pods"/);
  await grantOnHub(
    hub,
    `${user}-pods`,
    [hubUser(user)],
    [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }],
  );
  // Denials are cached for --authorization-deny-ttl (5 s).
  const allowed = await waitFor('the hub RBAC change to take effect', async () => {
    const r = await gatewayRequest('GET', pods, asUser, url);
    return r.status === 200 ? r : undefined;
  });
  assert.equal(allowed.json<{ kind: string }>().kind, 'PodList');
});

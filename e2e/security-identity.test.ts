/**
 * Identity headers, attacked directly on the gateway's port with a valid
 * low-privilege token and through the aggregator: a caller can never become
 * someone else with X-Remote-* (spoofed, empty-then-real, groups alone) or
 * with its own Impersonate-* headers, neither on the hub (what the gateway
 * authorizes) nor on the managed cluster (what its audit log shows).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { waitFor } from '../hack/localenv/wait.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import { requestServiceAccountToken } from '../shared/kube/service-account-token.ts';
import { auditEvents } from './support/audit.ts';
import { environmentState, hubClient } from './support/environment.ts';
import { rawRequest } from './support/raw-request.ts';
import { grantOnHub, hubUser, revokeOnHub, serviceAccount } from './support/rbac.ts';
import { hubUserCertificate, proxyPrefix } from './support/users.ts';

const ns = 'sec-identity';
const sa = 'identity-attacker';
const saUser = `system:serviceaccount:${ns}:${sa}`;
const certUser = 'identity-alice';

let hub: KubeClient;
let token: string;
let alice: { cert: string; key: string };

function gatewayUrl(): string {
  const url = environmentState().gateway?.url;
  if (!url) throw new Error('the e2e environment runs no gateway');
  return url;
}

before(async () => {
  hub = await hubClient();
  await hub.apply(
    `/api/v1/namespaces/${ns}`,
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
    'e2e',
  );
  await hub.apply(
    `/api/v1/namespaces/${ns}/serviceaccounts/${sa}`,
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: sa, namespace: ns } },
    'e2e',
  );
  // Both callers may proxy to cluster1 and read clustergateways, nothing else.
  await grantOnHub(
    hub,
    ns,
    [serviceAccount(ns, sa), hubUser(certUser)],
    [
      {
        apiGroups: ['cluster.core.oam.dev'],
        resources: ['clustergateways', 'clustergateways/proxy'],
        resourceNames: ['cluster1'],
        verbs: ['get'],
      },
    ],
  );
  token = await requestServiceAccountToken(hub, ns, sa, 3600);
  alice = await hubUserCertificate(certUser);
  await waitFor('the token caller to be allowed cluster1', async () => {
    const res = await direct(`${proxyPrefix}/cluster1`);
    return res.status === 200;
  });
});

after(async () => {
  await revokeOnHub(hub, ns);
  await hub.delete(`/api/v1/namespaces/${ns}`);
  hub?.close();
});

function direct(target: string, headers: string[] = []) {
  return rawRequest(gatewayUrl(), 'GET', target, {
    headers: ['Authorization', `Bearer ${token}`, ...headers],
  });
}

function viaAggregator(target: string, headers: string[] = []) {
  return rawRequest(environmentState().hub.server, 'GET', target, { client: alice, headers });
}

/** The event cluster1 logged for the request whose query holds `marker`. */
function clusterEvent(marker: string) {
  return waitFor(`cluster1 to log ${marker}`, () =>
    auditEvents('cluster1').find((e) => e.requestURI.includes(marker)),
  );
}

describe('directly on the gateway port, with a low-privilege token', () => {
  test('spoofed X-Remote-* headers without the front-proxy certificate are a 401', async () => {
    for (const headers of [
      ['X-Remote-User', 'system:admin'],
      ['X-Remote-User', 'system:admin', 'X-Remote-Group', 'system:masters'],
      // Issue item 8: an empty X-Remote-User, then the real one.
      ['X-Remote-User', '', 'X-Remote-User', 'system:admin'],
      ['X-Remote-User', ''],
      ['X-Remote-Group', 'system:masters'],
      ['X-Remote-Extra-Scopes', 'admin'],
      ['x-remote-user', 'system:admin'],
    ]) {
      for (const path of [
        `${proxyPrefix}`,
        `${proxyPrefix}/cluster2/proxy/api/v1/namespaces/kube-system/secrets`,
      ]) {
        const res = await direct(path, headers);
        assert.equal(
          res.status,
          401,
          `${JSON.stringify(headers)} ${path}: ${res.status} ${res.body.slice(0, 200)}`,
        );
        assert.match(res.body, /front-proxy identity headers rejected/);
      }
    }
  });

  test('the same token without spoofed headers is itself: allowed cluster1, refused the rest', async () => {
    const own = await direct(`${proxyPrefix}/cluster1`);
    assert.equal(own.status, 200, own.body);
    const other = await direct(`${proxyPrefix}/cluster2/proxy/api/v1/namespaces/kube-system/secrets`);
    assert.equal(other.status, 403);
    assert.match(
      other.body,
      new RegExp(`User \\\\"${saUser}\\\\" cannot get resource \\\\"clustergateways/proxy\\\\"`),
    );
  });

  test('Impersonate-* from the caller never reaches the cluster: it sees the caller, or the gateway', async () => {
    const headers = [
      'Impersonate-User',
      'system:admin',
      'Impersonate-Group',
      'system:masters',
      'Impersonate-Extra-Scopes',
      'all',
    ];
    const penetrated = `idp${Date.now()}`;
    const res = await direct(
      `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/default?impersonate=true&${penetrated}=1`,
      headers,
    );
    // cluster1 gives the hub's ServiceAccount no rights: the caller's own identity is what it judged.
    assert.equal(res.status, 403, res.body);
    assert.match(res.body, new RegExp(`User \\\\"${saUser}\\\\" cannot get resource \\\\"namespaces\\\\"`));
    const event = await clusterEvent(penetrated);
    assert.equal(event.impersonatedUser?.username, saUser);
    assert.ok(!event.impersonatedUser?.groups?.includes('system:masters'));

    const plain = `plain${Date.now()}`;
    const asGateway = await direct(
      `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/default?${plain}=1`,
      headers,
    );
    assert.equal(asGateway.status, 200, asGateway.body);
    const plainEvent = await clusterEvent(plain);
    assert.equal(plainEvent.impersonatedUser, undefined, 'the gateway credential, not impersonating anyone');
  });
});

describe('through the aggregator, as a hub user with a client certificate', () => {
  test('X-Remote-* from the caller does not change who the gateway sees', async () => {
    const res = await viaAggregator(`${proxyPrefix}/cluster2`, [
      'X-Remote-User',
      'system:admin',
      'X-Remote-Group',
      'system:masters',
    ]);
    assert.equal(res.status, 403, res.body);
    assert.match(
      res.body,
      new RegExp(`User \\\\"${certUser}\\\\" cannot get resource \\\\"clustergateways\\\\"`),
    );
    const own = await viaAggregator(`${proxyPrefix}/cluster1`, [
      'X-Remote-User',
      '',
      'X-Remote-User',
      'system:admin',
    ]);
    assert.equal(own.status, 200, own.body);
  });

  test("Impersonate-* needs the hub's impersonate permission, and the cluster sees the real caller", async () => {
    const refused = await viaAggregator(`${proxyPrefix}/cluster1/proxy/api/v1/namespaces/default`, [
      'Impersonate-User',
      'system:admin',
    ]);
    assert.equal(refused.status, 403, refused.body);
    assert.match(refused.body, /cannot impersonate/);

    const marker = `agg${Date.now()}`;
    const res = await viaAggregator(
      `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/default?impersonate=true&${marker}=1`,
      ['X-Remote-User', 'system:admin'],
    );
    assert.equal(res.status, 403, res.body);
    const event = await clusterEvent(marker);
    assert.equal(event.impersonatedUser?.username, certUser);
  });
});

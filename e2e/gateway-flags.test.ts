/**
 * Opt-in behaviour of the gateway, on a second gateway process started with
 * the flags (the environment's gateway runs with defaults). It uses the same
 * hub, credentials and managed clusters; requests reach it as the aggregator's
 * do, with the front-proxy client certificate.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { openSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { repoRoot } from '../hack/localenv/binaries.ts';
import { credentialNamespace } from '../hack/localenv/gateway.ts';
import { freePort } from '../hack/localenv/ports.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import { applyClusterSecret, secretPath } from './support/credentials.ts';
import { environmentState, hubClient } from './support/environment.ts';
import { gatewayRequest } from './support/gateway-client.ts';
import { proxyPrefix } from './support/users.ts';

let hub: KubeClient;
let gateway: ChildProcess;
let url: string;
const user = 'subpath-bob';
const asUser = { frontProxy: { user, groups: ['system:authenticated'] } };

before(async () => {
  hub = await hubClient();
  const dir = path.join(environmentState().stateDir, 'gateway');
  const port = await freePort();
  url = `https://127.0.0.1:${port}`;
  const log = openSync(path.join(environmentState().stateDir, 'logs', 'gateway-with-flags.log'), 'a');
  gateway = spawn(
    process.execPath,
    [
      path.join(repoRoot, 'manager', 'gateway', 'main.ts'),
      `--secure-port=${port}`,
      '--bind-address=127.0.0.1',
      `--tls-cert-file=${path.join(dir, 'tls.crt')}`,
      `--tls-private-key-file=${path.join(dir, 'tls.key')}`,
      `--kubeconfig=${path.join(dir, 'serviceaccount.kubeconfig')}`,
      `--secret-namespace=${credentialNamespace}`,
      '--health-check-interval=1',
      '--reject-unhealthy',
      '--authorize-proxy-subpath',
    ],
    { stdio: ['ignore', log, log] },
  );
  await waitFor(
    'the second gateway to be ready',
    async () => (await gatewayRequest('GET', '/readyz', {}, url)).status === 200,
  );
  // The user may use the proxy subresource, and nothing else on the hub yet.
  await hub.apply(
    `/apis/rbac.authorization.k8s.io/v1/clusterroles/${user}-proxy`,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: `${user}-proxy` },
      rules: [{ apiGroups: ['cluster.core.oam.dev'], resources: ['clustergateways/proxy'], verbs: ['get'] }],
    },
    'e2e',
  );
  await bind(`${user}-proxy`);
});

after(async () => {
  gateway?.kill('SIGTERM');
  for (const name of [`${user}-proxy`, `${user}-pods`]) {
    await hub.delete(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${name}`);
    await hub.delete(`/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`);
  }
  await hub.delete(secretPath('unhealthy'));
  hub?.close();
});

async function bind(role: string): Promise<void> {
  await hub.apply(
    `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${role}`,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: role },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
    },
    'e2e',
  );
}

test('--reject-unhealthy answers 503 at once for a cluster whose probe fails, and serves healthy ones', async () => {
  await applyClusterSecret(hub, 'unhealthy', 'ServiceAccountToken', {
    endpoint: 'https://127.0.0.1:9',
    token: 'x',
  });
  const admin = { frontProxy: { user: 'admin', groups: ['system:masters'] } };
  const res = await waitFor('the probe to mark the cluster unhealthy', async () => {
    const r = await gatewayRequest('GET', `${proxyPrefix}/unhealthy/proxy/api/v1/namespaces`, admin, url);
    return /unreachable/.test(r.body) ? r : undefined;
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
  await hub.apply(
    `/apis/rbac.authorization.k8s.io/v1/clusterroles/${user}-pods`,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: `${user}-pods` },
      rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }],
    },
    'e2e',
  );
  await bind(`${user}-pods`);
  // Denials are cached for --authorization-deny-ttl (5 s).
  const allowed = await waitFor('the hub RBAC change to take effect', async () => {
    const r = await gatewayRequest('GET', pods, asUser, url);
    return r.status === 200 ? r : undefined;
  });
  assert.equal(allowed.json<{ kind: string }>().kind, 'PodList');
});

/**
 * Opt-in behaviour of the gateway, on a second gateway process started with
 * the flags (the environment's gateway runs with defaults). It uses the same
 * hub, credentials and managed clusters; requests reach it as the aggregator's
 * do, with the front-proxy client certificate. And the gateway flags the addon
 * manager is given (--gateway-args), which the manager checks against the
 * gateway's own flags before it deploys anything.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { repoRoot } from '../hack/localenv/binaries.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import { renderManagerArgs } from '../manager/addon/options.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import { applyClusterSecret, secretPath } from './support/credentials.ts';
import { environmentState, hubClient } from './support/environment.ts';
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

/** The addon manager's real entry against the environment's hub: its exit code, stderr and run time. */
async function runManager(
  gatewayArgs: string[],
): Promise<{ code: number | null; stderr: string; stdout: string; ms: number }> {
  const started = Date.now();
  const child = spawn(process.execPath, [
    path.join(repoRoot, 'manager', 'addon', 'main.ts'),
    ...renderManagerArgs({
      kubeconfig: environmentState().hub.kubeconfig,
      // Should the check ever let it through, it must not act on the shared hub: a name of its own,
      // and leadership (needed before it writes anything) sought in a namespace that does not exist.
      'addon-name': 'flags-check',
      namespace: 'flags-check-absent',
      'leader-elect': true,
      'http-bind-address': '127.0.0.1',
      'http-port': 0,
      'webhook-port': 0,
      'deploy-gateway': true,
      'gateway-name': 'flags-check',
      'gateway-args': JSON.stringify(gatewayArgs),
    }),
  ]);
  let stderr = '';
  let stdout = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  clearTimeout(timer);
  return { code, stderr, stdout, ms: Date.now() - started };
}

test('the addon manager given a misspelt or bad --gateway-args flag exits at once (2), naming it', async () => {
  const misspelt = await runManager(['--log-level=debug', '--log-levle=debug']);
  assert.equal(misspelt.code, 2, `exit code; stderr: ${misspelt.stderr}`);
  assert.equal(
    misspelt.stderr,
    'error: --gateway-args: --log-levle is not a flag of the gateway (node manager/gateway/main.ts --help lists them; did you mean --log-level?)\n',
  );
  assert.equal(misspelt.stdout, '', 'nothing started: no log line');
  // Node's start and the manager's imports only: no connection to the hub, no wait.
  assert.ok(misspelt.ms < 15_000, `exited after ${misspelt.ms} ms`);

  const badValue = await runManager(['--health-check-interval=0']);
  assert.equal(badValue.code, 2, `exit code; stderr: ${badValue.stderr}`);
  assert.match(
    badValue.stderr,
    /^error: --gateway-args: --health-check-interval: "0" is not a whole number between 1 and 3600\n$/,
  );
});

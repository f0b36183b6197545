/**
 * Credential leaks, against the real gateway: no token, client certificate
 * or key in any clustergateways response (get, list, watch, table, health;
 * through the aggregator and directly), in /metrics or in the gateway's
 * debug log; and a failing exec plugin that prints a secret never gets it
 * into healthyReason (readable by anyone who may get clustergateways) or
 * the log. gateway-api.test.ts checks `kubectl get -o yaml` and
 * gateway-proxy.test.ts the log for the environment's own tokens; this file
 * covers every other way out, with every credential type, while the same
 * clusters keep serving proxied requests.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { parse } from 'yaml';
import { waitFor } from '../hack/localenv/wait.ts';
import type { KubeClient, KubeObject } from '../shared/kube/client.ts';
import { applyClusterSecret, clusterEndpoint, gatewayToken, secretPath } from './support/credentials.ts';
import { environmentState, hubClient } from './support/environment.ts';
import { gatewayRequest } from './support/gateway-client.ts';
import { proxyPrefix } from './support/users.ts';

const gateways = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways';
const admin = { frontProxy: { user: 'admin', groups: ['system:masters'] } };
const v1 = 'client.authentication.k8s.io/v1';
const created = ['leak-x509', 'leak-exec', 'leak-exec-json'];

let hub: KubeClient;
/** Every credential the gateway holds in this file: none may appear anywhere but on the wire upstream. */
const secrets: Record<string, string> = {};

interface ClusterGateway extends KubeObject {
  status: { healthy: boolean; healthyReason?: string };
}

before(async () => {
  hub = await hubClient();
  for (const cluster of ['cluster1', 'cluster2']) {
    secrets[`${cluster} token`] = (await gatewayToken(hub, cluster)).trim();
  }
  // An X509Certificate cluster: cluster2's admin client certificate and key.
  const kubeconfig = parse(readFileSync(environmentState().managed[1]!.kubeconfig, 'utf8')) as {
    users: { user: Record<string, string> }[];
  };
  const user = kubeconfig.users[0]!.user;
  const certificate = Buffer.from(user['client-certificate-data']!, 'base64').toString();
  const key = Buffer.from(user['client-key-data']!, 'base64').toString();
  secrets['x509 certificate body'] = pemBody(certificate);
  secrets['x509 key body'] = pemBody(key);
  await applyClusterSecret(hub, 'leak-x509', 'X509Certificate', {
    ...clusterEndpoint('cluster2'),
    'tls.crt': certificate,
    'tls.key': key,
  });
});

after(async () => {
  for (const name of created) await hub.delete(secretPath(name));
  hub?.close();
});

/** The base64 body of a PEM block, long enough that a match is never a coincidence. */
function pemBody(pem: string): string {
  return pem
    .split('\n')
    .filter((line) => line && !line.startsWith('-----'))
    .join('')
    .slice(0, 64);
}

function assertNoCredential(where: string, text: string): void {
  assert.ok(text.length > 0, `${where}: something to check`);
  for (const [what, value] of Object.entries(secrets)) {
    assert.ok(value.length >= 20, `${what} is a real credential`);
    assert.ok(!text.includes(value), `${where} holds the ${what}`);
    // Encoded forms too: base64 (as in a Secret) and JSON-escaped.
    assert.ok(!text.includes(Buffer.from(value).toString('base64')), `${where} holds the base64 ${what}`);
  }
  assert.doesNotMatch(
    text,
    /BEGIN [A-Z ]*PRIVATE KEY|serviceAccountToken|privateKey|Bearer [\w.-]{20,}/,
    where,
  );
}

function gatewayLog(): string {
  return readFileSync(path.join(environmentState().stateDir, 'logs', 'hub-cluster-gateway.log'), 'utf8');
}

async function proxiedNamespace(cluster: string): Promise<string> {
  const ns = await waitFor(`${cluster} to serve through the proxy`, () =>
    hub.get<KubeObject>(`${proxyPrefix}/${cluster}/proxy/api/v1/namespaces/default`).catch(() => undefined),
  );
  return ns.metadata?.name ?? '';
}

test('no clustergateways response holds a credential: get, list, watch, table, health, direct and aggregated', async () => {
  // The credentials are in use: each cluster serves, with every credential type.
  for (const cluster of ['cluster1', 'cluster2', 'leak-x509']) {
    assert.equal(await proxiedNamespace(cluster), 'default');
  }

  const bodies: [string, string][] = [];
  const viaHub = async (what: string, p: string, accept?: string) => {
    const body = await hub.request<unknown>('GET', p, accept ? { headers: { accept } } : {});
    bodies.push([`${what} (aggregator)`, typeof body === 'string' ? body : JSON.stringify(body)]);
  };
  const direct = async (what: string, p: string) => {
    const res = await gatewayRequest('GET', p, admin);
    assert.equal(res.status, 200, `${what}: ${res.body}`);
    bodies.push([`${what} (direct)`, res.body]);
  };
  for (const name of ['cluster1', 'leak-x509']) {
    await viaHub(`get ${name}`, `${gateways}/${name}`);
    await direct(`get ${name}`, `${gateways}/${name}`);
    await viaHub(`health ${name}`, `${gateways}/${name}/health`);
    await direct(`health ${name}`, `${gateways}/${name}/health`);
    await viaHub(`table ${name}`, `${gateways}/${name}`, 'application/json;as=Table;v=v1;g=meta.k8s.io');
  }
  await viaHub('list', gateways);
  await direct('list', gateways);
  await viaHub('table list', gateways, 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json');
  await viaHub(
    'list with partial metadata',
    gateways,
    'application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io',
  );

  // A watch: the initial ADDED events of every cluster, credentials and all.
  const abort = new AbortController();
  const events: string[] = [];
  const watching = (async () => {
    for await (const event of hub.watch(`${gateways}?resourceVersion=0`, abort.signal)) {
      events.push(JSON.stringify(event));
    }
  })().catch(() => {});
  try {
    await waitFor('watch events of every cluster', () =>
      ['cluster1', 'cluster2', 'leak-x509'].every((c) => events.some((e) => e.includes(`"name":"${c}"`))),
    );
  } finally {
    abort.abort();
    await watching;
  }
  bodies.push(['watch', events.join('\n')]);

  for (const [where, body] of bodies) assertNoCredential(where, body);
  // The checks can fail: the list does hold the clusters whose credentials were searched for.
  assert.match(bodies.find(([w]) => w === 'list (aggregator)')?.[1] ?? '', /X509Certificate/);
});

test('/metrics and the debug log hold no credential', async () => {
  assert.equal(await proxiedNamespace('leak-x509'), 'default');
  const metrics = await gatewayRequest('GET', '/metrics', admin);
  assert.equal(metrics.status, 200);
  assert.match(metrics.body, /cluster="leak-x509"/, 'the X509 cluster was proxied and counted');
  assertNoCredential('/metrics', metrics.body);
  // The environment's gateway logs at debug level (e2e/setup.ts).
  const log = gatewayLog();
  assert.match(log, /"level":20/, 'debug lines are in the log');
  assertNoCredential('the gateway log', log);
});

test('a failing exec plugin that prints a secret: not in healthyReason, not in the log; a working one serves', async () => {
  const leaked = `leaked-by-plugin-${Date.now()}-0123456789abcdef`;
  secrets['exec plugin output'] = leaked;
  // A real plugin's error output often echoes what it used or got (a refresh token, a curl dump).
  await applyClusterSecret(hub, 'leak-exec', 'Dynamic', {
    ...clusterEndpoint('cluster1'),
    exec: JSON.stringify({
      apiVersion: v1,
      command: 'sh',
      args: ['-c', `echo "refresh failed for token ${leaked}" >&2; echo "${leaked}"; exit 7`],
    }),
  });
  // And one whose stdout is not an ExecCredential but holds the secret.
  await applyClusterSecret(hub, 'leak-exec-json', 'Dynamic', {
    ...clusterEndpoint('cluster1'),
    exec: JSON.stringify({ apiVersion: v1, command: 'sh', args: ['-c', `echo "{${leaked}"`] }),
  });
  const failed = await waitFor('the plugin failure to be reported', async () => {
    const gw = await hub.get<ClusterGateway>(`${gateways}/leak-exec`);
    return /exited with status 7/.test(gw.status.healthyReason ?? '') ? gw : undefined;
  });
  assert.equal(failed.status.healthy, false);
  assert.ok(!failed.status.healthyReason?.includes(leaked), "healthyReason holds the plugin's stderr");
  assert.match(
    failed.status.healthyReason ?? '',
    /exec plugin "sh" exited with status 7 \(its output is not shown/,
  );
  const badJson = await waitFor('the invalid ExecCredential to be reported', async () => {
    const gw = await hub.get<ClusterGateway>(`${gateways}/leak-exec-json`);
    return /not JSON/.test(gw.status.healthyReason ?? '') ? gw : undefined;
  });
  // Proxying fails with a Status that says why, without the output either.
  const refused = await hub.get(`${proxyPrefix}/leak-exec/proxy/api/v1/namespaces/default`).then(
    () => '',
    (err: Error) => err.message,
  );
  assert.match(refused, /exited with status 7/);
  // The refresher logs each failure (warn); give the retry a moment to be written too.
  await waitFor('the failure to be logged', () =>
    /"cluster":"leak-exec".*exec credential plugin failed/.test(gatewayLog()),
  );
  for (const [where, text] of [
    ['healthyReason', failed.status.healthyReason ?? ''],
    ['healthyReason (invalid JSON)', badJson.status.healthyReason ?? ''],
    ['the proxy refusal', refused],
    ['the gateway log', gatewayLog()],
  ] as const) {
    assert.ok(!text.includes(leaked), `${where} holds the plugin's output`);
    assert.doesNotMatch(text, /refresh failed for token/, where);
  }

  // The same Secret with a working plugin serves, and its token is not shown either.
  const tokenFile = path.join(environmentState().stateDir, 'leak-exec-token');
  writeFileSync(tokenFile, secrets['cluster1 token']!);
  await applyClusterSecret(hub, 'leak-exec', 'Dynamic', {
    ...clusterEndpoint('cluster1'),
    exec: JSON.stringify({
      apiVersion: v1,
      command: 'sh',
      args: [
        '-c',
        `printf '{"apiVersion":"${v1}","kind":"ExecCredential","status":{"token":"%s"}}' "$(cat ${tokenFile})"`,
      ],
    }),
  });
  assert.equal(await proxiedNamespace('leak-exec'), 'default');
  assertNoCredential('get leak-exec', JSON.stringify(await hub.get(`${gateways}/leak-exec`)));
});

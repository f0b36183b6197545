/**
 * The proxy subresource, end to end: kubectl -> hub kube-aggregator ->
 * gateway -> managed kube-apiserver, with the hub's authentication and
 * authorization and, on request, the caller's identity on the managed
 * cluster.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { parse } from 'yaml';
import { waitFor } from '../hack/localenv/wait.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import { StatusError } from '../shared/kube/status.ts';
import { applyClusterSecret, clusterEndpoint, gatewayToken, secretPath } from './support/credentials.ts';
import { environmentState, hubClient, managedClient } from './support/environment.ts';
import { gatewayRequest } from './support/gateway-client.ts';
import { kubectl } from './support/kubectl.ts';
import { hubUserKubeconfig, proxyKubeconfig, proxyPrefix } from './support/users.ts';

let hub: KubeClient;
let spoke: KubeClient;
let hubKubeconfig: string;

before(async () => {
  hub = await hubClient();
  spoke = await managedClient('cluster1');
  hubKubeconfig = environmentState().hub.kubeconfig;
});
after(async () => {
  for (const name of [
    'offline',
    'dotted.cluster.example',
    'rotated.cluster.example',
    'x509-cluster',
    'exec-cluster',
  ]) {
    await hub.delete(secretPath(name));
  }
  hub.close();
  spoke.close();
});

test("kubectl --raw through the proxy returns the managed cluster's namespaces", async () => {
  const marker = `marker-${Date.now()}`;
  await spoke.create('/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: marker },
  });
  const raw = await kubectl(hubKubeconfig, 'get', '--raw', `${proxyPrefix}/cluster1/proxy/api/v1/namespaces`);
  const names = (JSON.parse(raw) as { items: { metadata: { name: string } }[] }).items.map(
    (i) => i.metadata.name,
  );
  assert.ok(names.includes(marker), 'namespace created on cluster1 is seen through the gateway');
  const other = await kubectl(
    hubKubeconfig,
    'get',
    '--raw',
    `${proxyPrefix}/cluster2/proxy/api/v1/namespaces`,
  );
  assert.ok(!other.includes(marker), 'cluster2 is a different cluster');
  await spoke.delete(`/api/v1/namespaces/${marker}`);
});

test('a kubectl whose server is the proxy URL can get, create and apply --dry-run=server', async () => {
  const kc = await proxyKubeconfig('cluster1');
  const ns = await kubectl(kc, 'get', 'namespaces', '-o', 'name');
  assert.match(ns, /namespace\/kube-system/);
  const manifest = path.join(environmentState().stateDir, 'dry-run-cm.yaml');
  writeFileSync(
    manifest,
    'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dry-run-only\n  namespace: default\ndata:\n  a: b\n',
  );
  const dry = await kubectl(kc, 'apply', '--dry-run=server', '-f', manifest);
  assert.match(dry, /configmap\/dry-run-only (created|configured) \(server dry run\)/);
  assert.equal(await spoke.getOptional('/api/v1/namespaces/default/configmaps/dry-run-only'), undefined);
  await kubectl(kc, 'apply', '-f', manifest);
  const cm = await spoke.get<{ data: Record<string, string> }>(
    '/api/v1/namespaces/default/configmaps/dry-run-only',
  );
  assert.equal(cm.data.a, 'b');
  await kubectl(kc, 'delete', '-f', manifest);
});

test('a watch through the proxy delivers events as they happen', async () => {
  const kc = await proxyKubeconfig('cluster1');
  const client = await (await import('../shared/kube/client.ts')).KubeClient.fromKubeconfig(kc);
  const abort = new AbortController();
  const seen: string[] = [];
  const watching = (async () => {
    for await (const e of client.watch<{ metadata: { name: string } }>(
      '/api/v1/namespaces/default/configmaps?resourceVersion=0',
      abort.signal,
    )) {
      seen.push(`${e.type}:${e.object.metadata.name}`);
    }
  })();
  try {
    await waitFor('initial events', () => seen.some((s) => s.startsWith('ADDED:kube-root-ca.crt')));
    const started = Date.now();
    await spoke.create('/api/v1/namespaces/default/configmaps', {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'watched' },
    });
    await waitFor('the ADDED event', () => seen.includes('ADDED:watched'), {
      intervalMs: 20,
      timeoutMs: 10_000,
    });
    assert.ok(Date.now() - started < 2000, 'event arrived without buffering delay');
  } finally {
    abort.abort();
    await watching;
    client.close();
    await spoke.delete('/api/v1/namespaces/default/configmaps/watched');
  }
});

/** A Secret-defined cluster reaching cluster1 with the gateway's token for it. */
async function applyTokenSecret(name: string): Promise<void> {
  await applyClusterSecret(hub, name, 'ServiceAccountToken', {
    ...clusterEndpoint('cluster1'),
    token: await gatewayToken(hub, 'cluster1'),
  });
}

test('cluster names with dots work (a Secret-defined cluster)', async () => {
  await applyTokenSecret('dotted.cluster.example');
  const out = await waitFor('the dotted cluster to serve', async () =>
    kubectl(
      hubKubeconfig,
      'get',
      '--raw',
      `${proxyPrefix}/dotted.cluster.example/proxy/api/v1/namespaces/default`,
    ),
  );
  assert.equal((JSON.parse(out) as { metadata: { name: string } }).metadata.name, 'default');
});

test('a rotated credential takes effect on the next request, without a restart', async () => {
  await applyTokenSecret('rotated.cluster.example');
  const path_ = secretPath('rotated.cluster.example');
  const secret = await hub.get<{ data: Record<string, string> }>(path_);
  const good = secret.data.token!;
  await hub.mergePatch(path_, { data: { token: Buffer.from('revoked-token').toString('base64') } });
  await waitFor('the cluster to reject the revoked token', async () =>
    kubectl(
      hubKubeconfig,
      'get',
      '--raw',
      `${proxyPrefix}/rotated.cluster.example/proxy/api/v1/namespaces/default`,
    ).then(
      () => undefined,
      (err: Error) => /Unauthorized/.test(err.message),
    ),
  );
  await hub.mergePatch(path_, { data: { token: good } });
  await waitFor('the restored token to work', async () =>
    kubectl(
      hubKubeconfig,
      'get',
      '--raw',
      `${proxyPrefix}/rotated.cluster.example/proxy/api/v1/namespaces/default`,
    ).catch(() => undefined),
  );
});

test('an X509Certificate credential Secret works', async () => {
  const cluster2 = environmentState().managed[1]!;
  const kubeconfig = parse(readFileSync(cluster2.kubeconfig, 'utf8')) as {
    users: { user: Record<string, string> }[];
  };
  const user = kubeconfig.users[0]!.user;
  const base64 = (value: string) => Buffer.from(value, 'base64').toString();
  await applyClusterSecret(hub, 'x509-cluster', 'X509Certificate', {
    ...clusterEndpoint('cluster2'),
    'tls.crt': base64(user['client-certificate-data']!),
    'tls.key': base64(user['client-key-data']!),
  });
  const out = await waitFor('the X509 cluster to serve', async () =>
    kubectl(
      hubKubeconfig,
      'get',
      '--raw',
      `${proxyPrefix}/x509-cluster/proxy/api/v1/namespaces/kube-system`,
    ).catch(() => undefined),
  );
  assert.equal((JSON.parse(out) as { metadata: { name: string } }).metadata.name, 'kube-system');
  const yaml = await kubectl(hubKubeconfig, 'get', 'clustergateway', 'x509-cluster', '-o', 'yaml');
  assert.match(yaml, /type: X509Certificate/);
  assert.ok(!yaml.includes(user['client-key-data']!), 'private key never returned');
});

test('a Dynamic (exec credential plugin) Secret works, and its token is never shown', async () => {
  const token = (await gatewayToken(hub, 'cluster1')).trim();
  // The plugin reads the token from a file, as a real one would fetch it from somewhere.
  const tokenFile = path.join(environmentState().stateDir, 'exec-cluster-token');
  writeFileSync(tokenFile, token);
  const v1 = 'client.authentication.k8s.io/v1';
  const exec = {
    apiVersion: v1,
    command: 'sh',
    args: [
      '-c',
      `printf '{"apiVersion":"${v1}","kind":"ExecCredential","status":{"token":"%s"}}' "$(cat ${tokenFile})"`,
    ],
  };
  await applyClusterSecret(hub, 'exec-cluster', 'Dynamic', {
    ...clusterEndpoint('cluster1'),
    exec: JSON.stringify(exec),
  });
  const out = await waitFor('the exec credential cluster to serve', async () =>
    kubectl(
      hubKubeconfig,
      'get',
      '--raw',
      `${proxyPrefix}/exec-cluster/proxy/api/v1/namespaces/default`,
    ).catch(() => undefined),
  );
  assert.equal((JSON.parse(out) as { metadata: { name: string } }).metadata.name, 'default');
  const yaml = await kubectl(hubKubeconfig, 'get', 'clustergateway', 'exec-cluster', '-o', 'yaml');
  assert.match(yaml, /type: Dynamic/);
  assert.ok(!yaml.includes(token), 'the plugin token is never returned');
});

test('an unknown cluster is a 404 Status; an unreachable one a 503 Status that says why', async () => {
  const unknown = await hub.get(`${proxyPrefix}/no-such-cluster/proxy/api/v1/namespaces`).then(
    () => undefined,
    (err: unknown) => err,
  );
  assert.ok(unknown instanceof StatusError);
  assert.equal(unknown.code, 404);
  assert.match(unknown.message, /"no-such-cluster" not found/);

  await applyClusterSecret(hub, 'offline', 'ServiceAccountToken', {
    endpoint: 'https://127.0.0.1:9',
    token: 'x',
  });
  const offline = await waitFor('the offline cluster to be known', async () => {
    try {
      await hub.get(`${proxyPrefix}/offline/proxy/api/v1/namespaces`);
      return undefined;
    } catch (err) {
      return err instanceof StatusError && err.code !== 404 ? err : undefined;
    }
  });
  assert.equal(offline.code, 503);
  assert.match(offline.message, /offline.*(unreachable|ECONNREFUSED)/);
  const table = await waitFor('the offline cluster to show unhealthy', async () => {
    const out = await kubectl(hubKubeconfig, 'get', 'clustergateway', 'offline');
    return /false/.test(out) ? out : undefined;
  });
  assert.match(table, /offline\s+ServiceAccountToken\s+Const\s+false/);
});

test('a LIST of 3 MB passes through the gateway as cluster1 sent it, item for item', async () => {
  // Reads pass their bodies through as the cluster framed them (shared/forward/passthrough.ts):
  // kube-apiserver chunks a LIST this size in its own pieces, and every one must reach the caller.
  const ns = `big-list-${Date.now()}`;
  await spoke.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  try {
    for (let i = 0; i < 6; i++) {
      await spoke.create(`/api/v1/namespaces/${ns}/configmaps`, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `big-${i}` },
        data: {
          value: String.fromCharCode(97 + i).repeat(500_000),
          json: '{"a":"\\u0000\\r\\n0\\r\\n\\r\\n"}',
        },
      });
    }
    type List = {
      items: { metadata: { name: string; resourceVersion: string }; data: Record<string, string> }[];
    };
    const direct = (await spoke.list(`/api/v1/namespaces/${ns}/configmaps`)) as unknown as List;
    const through = (await hub.list(
      `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/${ns}/configmaps`,
    )) as unknown as List;
    // Only the six: the controller manager adds its kube-root-ca.crt to the namespace at its own time.
    const ours = (list: List) =>
      list.items
        .filter((i) => i.metadata.name.startsWith('big-'))
        .map((i) => [i.metadata.name, i.metadata.resourceVersion, i.data]);
    assert.equal(ours(through).length, 6);
    assert.deepEqual(ours(through), ours(direct));
  } finally {
    await spoke.delete(`/api/v1/namespaces/${ns}`);
  }
});

test('upstream errors pass through unchanged', async () => {
  const err = await hub
    .get(`${proxyPrefix}/cluster1/proxy/api/v1/namespaces/default/configmaps/does-not-exist`)
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  assert.ok(err instanceof StatusError);
  assert.equal(err.code, 404);
  assert.match(err.message, /configmaps "does-not-exist" not found/);
});

test('the gateway authorizes every request itself: no clustergateways/proxy permission means 403', async () => {
  // A hub ServiceAccount with no RBAC, calling the gateway directly with its token.
  await hub.apply(
    '/api/v1/namespaces/default/serviceaccounts/nobody',
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'nobody', namespace: 'default' } },
    'e2e',
  );
  const token = await hub.create<{ status: { token: string } }>(
    '/api/v1/namespaces/default/serviceaccounts/nobody/token',
    { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: {} },
  );
  const res = await gatewayRequest('GET', `${proxyPrefix}/cluster1/proxy/api/v1/namespaces`, {
    bearerToken: token.status.token,
  });
  assert.equal(res.status, 403);
  const status = res.json<{ kind: string; message: string }>();
  assert.equal(status.kind, 'Status');
  assert.match(
    status.message,
    /system:serviceaccount:default:nobody.*cannot get resource "clustergateways\/proxy"/,
  );

  // Through the aggregator as a plain user: refused too (by the hub, before it reaches us).
  const alice = await hubUserKubeconfig('alice-no-rights');
  await assert.rejects(
    kubectl(alice, 'get', '--raw', `${proxyPrefix}/cluster1/proxy/api/v1/namespaces`),
    /Forbidden/,
  );
});

test('X-Remote-User without the front-proxy certificate is rejected, not trusted', async () => {
  const res = await gatewayRequest('GET', `${proxyPrefix}/cluster1/proxy/api/v1/namespaces`, {
    spoofedHeaders: { user: 'admin', groups: ['system:masters'] },
  });
  assert.equal(res.status, 401);
  assert.equal(res.json<{ kind: string }>().kind, 'Status');
});

test('with ?impersonate=true the managed cluster applies its own RBAC to the hub user', async () => {
  const user = 'carol';
  await hub.apply(
    '/apis/rbac.authorization.k8s.io/v1/clusterroles/clustergateway-proxy',
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'clustergateway-proxy' },
      rules: [{ apiGroups: ['cluster.core.oam.dev'], resources: ['clustergateways/proxy'], verbs: ['*'] }],
    },
    'e2e',
  );
  await hub.apply(
    `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/clustergateway-proxy-${user}`,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: `clustergateway-proxy-${user}` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'clustergateway-proxy' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
    },
    'e2e',
  );
  const kc = await hubUserKubeconfig(user, ['developers']);
  const path_ = `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/default/configmaps?impersonate=true`;
  // Allowed on the hub, but cluster1 has never heard of carol: cluster1's own 403.
  await assert.rejects(
    kubectl(kc, 'get', '--raw', path_),
    /User \\?"carol\\?" cannot list resource \\?"configmaps\\?" in API group \\?"\\?" in the namespace \\?"default\\?"/,
  );
  // Without impersonation the gateway's own credential is used.
  const asGateway = await kubectl(
    kc,
    'get',
    '--raw',
    `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/default/configmaps`,
  );
  assert.match(asGateway, /ConfigMapList/);
  // Once cluster1 grants carol's group read access, the impersonated request succeeds.
  await spoke.apply(
    '/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/developers-view',
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'developers-view', namespace: 'default' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'developers' }],
    },
    'e2e',
  );
  const allowed = await waitFor('cluster1 RBAC to allow developers', async () =>
    kubectl(kc, 'get', '--raw', path_).catch(() => undefined),
  );
  assert.match(allowed, /ConfigMapList/);
});

test('the gateway exposes Prometheus metrics with the original names', async () => {
  const res = await gatewayRequest('GET', '/metrics', {
    frontProxy: { user: 'admin', groups: ['system:masters'] },
  });
  assert.equal(res.status, 200);
  assert.match(res.body, /ocm_proxy_proxied_requests_by_cluster_total\{[^}]*cluster="cluster1"/);
  assert.match(res.body, /ocm_proxy_proxied_request_duration_seconds_bucket/);
  assert.match(res.body, /ocm_proxy_proxied_resource_requests_by_resource_total\{[^}]*resource="namespaces"/);
  assert.match(res.body, /cluster_gateway_upstream_connections\{cluster="cluster1"\} \d+/);
  assert.match(res.body, /cluster_gateway_inflight_requests \d+/);
});

test('no credential ever reaches the gateway log', async () => {
  const log = readFileSync(path.join(environmentState().stateDir, 'logs', 'hub-cluster-gateway.log'), 'utf8');
  assert.ok(log.length > 0, 'the gateway logged something');
  for (const cluster of ['cluster1', 'cluster2']) {
    const token = await gatewayToken(hub, cluster);
    assert.ok(!log.includes(token), `${cluster} token absent from the log`);
  }
  assert.ok(
    !/BEGIN [A-Z ]*PRIVATE KEY|Bearer [A-Za-z0-9._-]{20,}/.test(log),
    'no key or bearer token in the log',
  );
});

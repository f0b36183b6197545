/**
 * Moving from KubeVela's bundled Go gateway, as docs/migration.md says, on the environment's real hub
 * (issue 31, item 4).
 *
 * What the original leaves is set up first, in its own format: Helm release `kubevela` in namespace
 * `vela-system` with the templates of KubeVela's chart (support/kubevela-release.ts): its gateway Service
 * and Deployment (0 replicas: the original's pods are gone, so the Service has no endpoint), and the
 * APIService v1alpha1.cluster.core.oam.dev pointing at that Service with the caBundle its patch Job wrote;
 * the credential Secrets `vela cluster join` writes in `vela-system` (Opaque, label
 * cluster.core.oam.dev/cluster-credential-type, data endpoint, ca.crt, token or tls.crt/tls.key), for
 * cluster1 (a ServiceAccount's token) and cluster2 (a client certificate). The original's clients then get
 * 503 from the hub's aggregator and hub discovery is broken.
 *
 * Then the documented steps: `helm install` of charts/cluster-gateway into `vela-system` with
 * gateway.credentialNamespace.name=vela-system and create=false (KubeVela takes its Secret namespace from
 * the APIService's Service, so the gateway must live there too); the manager takes the APIService over
 * once its gateway serves, with its own CA as caBundle. The requests of the original's Go clients
 * (support/original-client.ts) go through the aggregator to the installed gateway, authenticated to each
 * cluster with the Secret's credential (the clusters' SelfSubjectReviews name it), and the Secrets keep
 * their data and labels. Then the documented hand-over: the APIService's Helm ownership annotations
 * removed and `helm.sh/resource-policy: keep` set, KubeVela's `helm upgrade` (direct: false,
 * secureTLS off) no longer renders it, and KubeVela's `helm uninstall` leaves it and the Secrets alone.
 *
 * The environment's gateway (on the host) stays up throughout; `after` uninstalls both releases, deletes
 * `vela-system` and the clusters' test namespaces, and registers the environment's APIService again.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { nodeChartValues } from '../hack/localenv/chart.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import { apiServiceName, apiServicePath } from '../manager/addon/gateway-deploy/names.ts';
import { KubeClient, type KubeObject } from '../shared/kube/client.ts';
import { loadCertificateAuthority } from '../shared/pki.ts';
import { environmentState, hubClient } from './support/environment.ts';
import { helm } from './support/helm.ts';
import { awaitInstallGone, restoreEnvironmentApiService } from './support/installed-chart.ts';
import { kubectl } from './support/kubectl.ts';
import {
  createTlsSecret,
  kubevelaProxyClusterRole,
  kubevelaRelease,
  kubevelaServiceAccount,
  kubevelaServiceName,
  kubevelaTlsSecret,
  runPatchJob,
  writeKubeVelaChart,
} from './support/kubevela-release.ts';
import { clusterGatewaysPath, proxyPath, send } from './support/original-client.ts';

/** KubeVela's namespace: its release, its gateway, its credential Secrets; and, migrated, this chart's. */
const velaSystem = 'vela-system';
const release = 'cluster-gateway';
const gatewayName = 'cluster-gateway';
const chart = path.join(import.meta.dirname, '..', 'charts', 'cluster-gateway');
/** On each managed cluster: where the credentials of the Secrets may act. */
const workNamespace = 'cg-migration';
const tokenUser = `system:serviceaccount:${workNamespace}:vela-migration`;
const certificateUser = 'vela-migration-cluster2';
const addon = 'cluster-gateway';
const cmaPath = `/apis/addon.open-cluster-management.io/v1alpha1/clustermanagementaddons/${addon}`;
const webhookConfigPath = `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${addon}-addon-available`;
const secretPath = (name: string) => `/api/v1/namespaces/${velaSystem}/secrets/${name}`;
const seconds = (ms: number) => Number((ms / 1000).toFixed(1));

type Condition = { type: string; status: string; reason?: string };
type ApiService = KubeObject & {
  metadata: { annotations?: Record<string, string>; labels?: Record<string, string> };
  spec: {
    service?: { namespace: string; name: string; port?: number };
    caBundle?: string;
    insecureSkipTLSVerify?: boolean;
    groupPriorityMinimum?: number;
  };
  status?: { conditions?: Condition[] };
};
type Secret = KubeObject & {
  type?: string;
  metadata: { labels?: Record<string, string>; annotations?: Record<string, string> };
  data?: Record<string, string>;
};
type ClusterGateway = KubeObject & {
  spec: {
    access: {
      endpoint?: { type: string; const?: { address?: string } };
      credential?: { type: string; serviceAccountToken?: string };
    };
  };
};
type SelfSubjectReview = { status?: { userInfo?: { username?: string } } };

let hub: KubeClient;
let kubeconfig: string;
let environmentApiService: ApiService;
const spokes = new Map<string, KubeClient>();
let removeChart: (() => void) | undefined;
let cmaExisted = false;
let webhookExisted = false;
let kubevelaInstalled = false;
let installed = false;
/** What this file created, and so deletes: never a namespace that was there before. */
let createdVelaSystem = false;
const createdWorkNamespace = new Set<KubeClient>();
/** The Secrets as written, to compare with what is left of them. */
const written = new Map<string, Secret>();

const isAvailable = (obj: ApiService | undefined) =>
  obj?.status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True') ?? false;
const pointsAt = (obj: ApiService | undefined, name: string) =>
  obj?.spec.service?.namespace === velaSystem && obj.spec.service.name === name;

/** `kubectl api-resources` exits 0: every APIService of the hub answers discovery. */
const discoveryHealthy = () =>
  kubectl(kubeconfig, 'api-resources', '-o', 'name').then(
    () => true,
    () => false,
  );

/** The proxied SelfSubjectReview: who `cluster` sees the request as (the credential the gateway used). */
async function userOn(cluster: string, headers: Record<string, string> = {}) {
  return send<SelfSubjectReview>(
    hub,
    'POST',
    proxyPath(cluster, '/apis/authentication.k8s.io/v1/selfsubjectreviews'),
    {
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
      headers,
    },
  );
}

/** A namespace on the managed cluster where the Secret's identity may edit, and nothing more. */
async function grantWork(spoke: KubeClient, subject: Record<string, string>): Promise<void> {
  await spoke.create('/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: workNamespace },
  });
  createdWorkNamespace.add(spoke);
  await spoke.create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${workNamespace}/rolebindings`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'vela-migration-edit' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
    subjects: [subject],
  });
}

/** A credential Secret as `vela cluster join` writes it (kubevela pkg/multicluster/cluster_management.go). */
async function writeJoinSecret(
  cluster: string,
  type: 'ServiceAccountToken' | 'X509Certificate',
  data: Record<string, string>,
): Promise<void> {
  const env = environmentState();
  const managed = env.managed.find((m) => m.name === cluster);
  assert.ok(managed, `managed cluster ${cluster}`);
  const created = await hub.create<Secret>(`/api/v1/namespaces/${velaSystem}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: {
      name: cluster,
      namespace: velaSystem,
      labels: { 'cluster.core.oam.dev/cluster-credential-type': type },
    },
    stringData: {
      // The URL the hub's pods reach the cluster at (a kubeconfig a user joins with would name it).
      endpoint: managed.reachableServer,
      'ca.crt': readFileSync(path.join(env.stateDir, cluster, 'ca.crt'), 'utf8'),
      ...data,
    },
  });
  written.set(cluster, created);
}

describe("moving from KubeVela's bundled gateway: its Secrets and APIService, then this chart", () => {
  before(async () => {
    hub = await hubClient();
    const env = environmentState();
    assert.ok(env.image, 'the e2e environment runs real nodes and their image (e2e/setup.ts: nodes: true)');
    kubeconfig = env.hub.kubeconfig;
    assert.equal(
      await hub.getOptional(`/api/v1/namespaces/${velaSystem}`),
      undefined,
      `no ${velaSystem} on the hub to begin with (this file deletes it at the end)`,
    );
    environmentApiService = await hub.get<ApiService>(apiServicePath);
    assert.ok(isAvailable(environmentApiService), "the environment's APIService is Available to begin with");
    cmaExisted = !!(await hub.getOptional(cmaPath));
    webhookExisted = !!(await hub.getOptional(webhookConfigPath));
    for (const name of ['cluster1', 'cluster2'])
      spokes.set(name, await KubeClient.fromKubeconfig(env.managed.find((m) => m.name === name)?.kubeconfig));

    // The identities the Secrets carry, on the managed clusters: a ServiceAccount's token on cluster1, a
    // client certificate from cluster2's CA on cluster2; each may edit in the work namespace only.
    const cluster1 = spokes.get('cluster1') as KubeClient;
    const cluster2 = spokes.get('cluster2') as KubeClient;
    await grantWork(cluster1, { kind: 'ServiceAccount', name: 'vela-migration', namespace: workNamespace });
    await cluster1.create(`/api/v1/namespaces/${workNamespace}/serviceaccounts`, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'vela-migration' },
    });
    const tokenRequest = await cluster1.create<KubeObject & { status: { token: string } }>(
      `/api/v1/namespaces/${workNamespace}/serviceaccounts/vela-migration/token`,
      {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 3600 },
      } as KubeObject,
    );
    await grantWork(cluster2, { apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: certificateUser });
    const cluster2Ca = await loadCertificateAuthority({
      cert: readFileSync(path.join(env.stateDir, 'cluster2', 'ca.crt'), 'utf8'),
      key: readFileSync(path.join(env.stateDir, 'cluster2', 'ca.key'), 'utf8'),
    });
    const clientCertificate = await cluster2Ca.issue({ commonName: certificateUser, usage: 'client' });

    // KubeVela's release, as its chart leaves it: on a hub with no other gateway, so its lookup finds no
    // APIService and renders its own. (The environment's is registered again in `after`.)
    const started = Date.now();
    await hub.delete(apiServicePath);
    await hub.create('/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: velaSystem },
    });
    createdVelaSystem = true;
    await createTlsSecret(hub, velaSystem);
    const kubevelaChart = writeKubeVelaChart();
    removeChart = kubevelaChart.remove;
    kubevelaInstalled = true; // a failed install leaves a release to uninstall
    await helm('install', kubevelaRelease, kubevelaChart.dir, '--namespace', velaSystem);
    await runPatchJob(hub, velaSystem);
    await writeJoinSecret('cluster1', 'ServiceAccountToken', { token: tokenRequest.status.token });
    await writeJoinSecret('cluster2', 'X509Certificate', {
      'tls.crt': clientCertificate.cert,
      'tls.key': clientCertificate.key,
    });
    console.log(`[migration] KubeVela's release and Secrets in place: ${seconds(Date.now() - started)} s`);
  });

  after(async () => {
    const attempt = async (what: string, step: () => Promise<unknown>) =>
      step().catch((err: Error) => console.log(`[migration] cleanup: ${what}: ${err.message}`));
    // Both releases first (KubeVela's may still hold the APIService in its manifest), then the
    // environment's APIService, which namespace deletion needs (its discovery must answer).
    if (installed)
      await attempt('helm uninstall cluster-gateway', () => helm('uninstall', release, '-n', velaSystem));
    if (kubevelaInstalled) {
      await attempt('helm uninstall kubevela', () => helm('uninstall', kubevelaRelease, '-n', velaSystem));
    }
    removeChart?.();
    await attempt('leftovers', async () => {
      if (!cmaExisted) await hub.delete(cmaPath);
      if (!webhookExisted) await hub.delete(webhookConfigPath);
      // The installed gateway's peer certificate requests (cluster-scoped; the environment's are left).
      const csrs = '/apis/certificates.k8s.io/v1/certificatesigningrequests';
      const peers = await hub.list<KubeObject & { spec: { username?: string } }>(
        `${csrs}?labelSelector=${encodeURIComponent('cluster.core.oam.dev/gateway-peer')}`,
      );
      for (const csr of peers.items) {
        if (csr.spec.username === `system:serviceaccount:${velaSystem}:${gatewayName}`) {
          await hub.delete(`${csrs}/${csr.metadata?.name}`);
        }
      }
      const current = await hub.getOptional<ApiService>(apiServicePath);
      if (
        current &&
        JSON.stringify(current.spec.service) !== JSON.stringify(environmentApiService.spec.service)
      ) {
        await hub.delete(apiServicePath);
      }
    });
    try {
      // Not swallowed: the files after this one need the environment's gateway behind the APIService again.
      await restoreEnvironmentApiService(hub, environmentApiService.spec);
    } finally {
      if (createdVelaSystem) {
        await attempt(`namespace ${velaSystem}`, () => hub.delete(`/api/v1/namespaces/${velaSystem}`));
      }
      for (const [name, spoke] of spokes) {
        if (!createdWorkNamespace.has(spoke)) continue;
        await attempt(`${name} namespace ${workNamespace}`, () =>
          spoke.delete(`/api/v1/namespaces/${workNamespace}`),
        );
      }
      await awaitInstallGone(hub, createdVelaSystem ? [velaSystem] : [], attempt);
      for (const [name, spoke] of spokes) {
        if (createdWorkNamespace.has(spoke)) {
          await attempt(`${name} namespace ${workNamespace} gone`, () =>
            waitFor(
              `${workNamespace} on ${name} gone`,
              async () => !(await spoke.getOptional(`/api/v1/namespaces/${workNamespace}`)),
              { timeoutMs: 60_000 },
            ),
          );
        }
        spoke.close();
      }
      hub.close();
    }
  });

  test("before: the original's APIService points at a Service with no gateway behind it; its clients get 503", async () => {
    const api = await hub.get<ApiService>(apiServicePath);
    assert.ok(
      pointsAt(api, kubevelaServiceName),
      `the APIService points at ${velaSystem}/${kubevelaServiceName}`,
    );
    assert.equal(
      api.metadata.annotations?.['meta.helm.sh/release-name'],
      kubevelaRelease,
      'owned by the release',
    );
    // The patch Job's doing: a CA instead of the chart's `Cg==`, TLS verified (false is not stored).
    const tlsSecret = await hub.get<Secret>(secretPath(kubevelaTlsSecret));
    assert.equal(api.spec.caBundle, tlsSecret.data?.ca, "the caBundle is the CA of KubeVela's TLS Secret");
    assert.notEqual(api.spec.insecureSkipTLSVerify, true);
    const answer = await send(
      hub,
      'GET',
      proxyPath('cluster1', `/api/v1/namespaces/${workNamespace}/configmaps`),
    );
    assert.equal(answer.code, 503, `the aggregator has nowhere to send it: ${JSON.stringify(answer.body)}`);
    assert.equal((await send(hub, 'GET', clusterGatewaysPath)).code, 503, 'nor the list of clusters');
    await waitFor(
      'the aggregator to mark the APIService unavailable',
      async () => !isAvailable(await hub.get<ApiService>(apiServicePath)),
      { timeoutMs: 30_000 },
    );
    await assert.rejects(
      kubectl(kubeconfig, 'get', 'clustergateways'),
      /unable to handle the request|doesn't have a resource type|service unavailable|503/i,
      'kubectl get clustergateways fails',
    );
  });

  test('helm install into vela-system with the credential namespace vela-system: the APIService is taken over, with a real caBundle', async () => {
    const started = Date.now();
    installed = true; // a failed install leaves a release to uninstall
    await helm(
      'install',
      release,
      chart,
      '--namespace',
      velaSystem,
      ...nodeChartValues({ image: environmentState().image as string }, [
        `gateway.credentialNamespace.name=${velaSystem}`,
        'gateway.credentialNamespace.create=false',
        'gateway.replicas=1',
      ]),
    );
    const api = await waitFor(
      'the APIService to point at the installed gateway and be Available',
      async () => {
        const obj = await hub.get<ApiService>(apiServicePath);
        return pointsAt(obj, gatewayName) && isAvailable(obj) ? obj : undefined;
      },
      { timeoutMs: 120_000 },
    );
    console.log(
      `[migration] helm install -> APIService taken over and Available: ${seconds(Date.now() - started)} s`,
    );
    const tls = await hub.get<Secret>(secretPath(`${gatewayName}-tls`));
    const ca = Buffer.from(tls.data?.['ca.crt'] ?? '', 'base64').toString();
    const bundle = Buffer.from(api.spec.caBundle ?? '', 'base64').toString();
    assert.ok(new X509Certificate(ca).ca, "the manager's CA is a CA certificate");
    assert.ok(bundle.includes(ca.trim()), "the caBundle holds the manager's CA");
    assert.notEqual(api.spec.insecureSkipTLSVerify, true, 'TLS to the gateway is verified');
    assert.match(
      await kubectl(kubeconfig, 'get', 'clustergateways'),
      /cluster1/,
      'kubectl get clustergateways',
    );
    assert.ok(await discoveryHealthy(), 'kubectl api-resources exits 0');
  });

  test("the original's clients keep working, with the Secrets in vela-system as the only credential", async () => {
    // KubeVela's controller and CLI take the namespace of their cluster Secrets from the APIService's
    // Service (kubevela pkg/multicluster/utils.go, references/cli/cluster.go): it must be vela-system still.
    const api = await hub.get<ApiService>(apiServicePath);
    assert.equal(api.spec.service?.namespace, velaSystem, "KubeVela's Secret namespace is unchanged");

    // The clientset: GET and LIST ClusterGateways, the health subresource (GetHealthiness).
    const list = await send<{ items: ClusterGateway[] }>(hub, 'GET', clusterGatewaysPath);
    assert.equal(list.code, 200, JSON.stringify(list.body));
    const names = list.body.items.map((i) => i.metadata?.name);
    for (const [cluster, type] of [
      ['cluster1', 'ServiceAccountToken'],
      ['cluster2', 'X509Certificate'],
    ] as const) {
      assert.ok(names.includes(cluster), `${cluster} listed (${names.join(', ')})`);
      const got = await send<ClusterGateway>(hub, 'GET', `${clusterGatewaysPath}/${cluster}`);
      assert.equal(got.code, 200, JSON.stringify(got.body));
      assert.equal(got.body.spec.access.credential?.type, type, `${cluster}: the Secret's credential type`);
      assert.equal(got.body.spec.access.credential?.serviceAccountToken, undefined, 'no credential returned');
      const managed = environmentState().managed.find((m) => m.name === cluster);
      assert.equal(
        got.body.spec.access.endpoint?.const?.address,
        managed?.reachableServer,
        `${cluster}: the Secret's endpoint`,
      );
      const health = await send<ClusterGateway>(hub, 'GET', `${clusterGatewaysPath}/${cluster}/health`);
      assert.equal(health.code, 200, `GetHealthiness of ${cluster}: ${JSON.stringify(health.body)}`);
    }

    // The round trippers (NewClusterGatewayRoundTripper, kubevela/pkg's Transport): discovery of the
    // cluster (remote RESTMapper), a list, a dry-run create; the cluster sees the Secret's identity.
    for (const [cluster, user] of [
      ['cluster1', tokenUser],
      ['cluster2', certificateUser],
    ] as const) {
      await waitFor(
        `a proxied request to ${cluster} through the installed gateway`,
        async () => (await userOn(cluster)).code === 201,
        { timeoutMs: 30_000 },
      );
      const review = await userOn(cluster);
      assert.equal(review.body.status?.userInfo?.username, user, `${cluster} sees the Secret's credential`);
      for (const discovery of ['/api', '/apis', '/version']) {
        const answer = await send(hub, 'GET', proxyPath(cluster, `${discovery}?timeout=32s`));
        assert.equal(answer.code, 200, `${cluster} ${discovery}: ${JSON.stringify(answer.body)}`);
      }
      const configMaps = await send<{ kind: string }>(
        hub,
        'GET',
        proxyPath(cluster, `/api/v1/namespaces/${workNamespace}/configmaps?limit=500&timeout=32s`),
      );
      assert.equal(configMaps.code, 200, JSON.stringify(configMaps.body));
      assert.equal(configMaps.body.kind, 'ConfigMapList');
      const dryRun = await send<KubeObject>(
        hub,
        'POST',
        proxyPath(cluster, `/api/v1/namespaces/${workNamespace}/configmaps?dryRun=All&fieldManager=kubevela`),
        {
          body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'vela-dry-run' }, data: { a: 'b' } },
        },
      );
      assert.equal(dryRun.code, 201, `dry-run create on ${cluster}: ${JSON.stringify(dryRun.body)}`);
      const stored = await spokes
        .get(cluster)
        ?.getOptional(`/api/v1/namespaces/${workNamespace}/configmaps/vela-dry-run`);
      assert.equal(stored, undefined, `${cluster}: the dry run stored nothing`);
      const outside = await send(hub, 'GET', proxyPath(cluster, '/api/v1/namespaces/kube-system/secrets'));
      assert.equal(outside.code, 403, `${cluster}: the Secret's identity, not more, outside its namespace`);
    }

    // vela-core's own ServiceAccount, with only what KubeVela's chart grants it on the proxy.
    const asVelaCore = {
      'impersonate-user': `system:serviceaccount:${velaSystem}:${kubevelaServiceAccount}`,
    };
    const viaKubeVelaRbac = await userOn('cluster1', asVelaCore);
    assert.equal(
      viaKubeVelaRbac.code,
      201,
      `through ${kubevelaProxyClusterRole}: ${JSON.stringify(viaKubeVelaRbac.body)}`,
    );
    assert.equal(viaKubeVelaRbac.body.status?.userInfo?.username, tokenUser);

    // The Secrets: same type, labels and data; only the gateway's status annotations added.
    for (const [cluster, before] of written) {
      const now = await hub.get<Secret>(secretPath(cluster));
      assert.equal(now.type, before.type, `${cluster}: type`);
      assert.deepEqual(now.metadata.labels, before.metadata.labels, `${cluster}: labels`);
      assert.deepEqual(now.data, before.data, `${cluster}: data (the same keys and values)`);
      const added = Object.keys(now.metadata.annotations ?? {}).filter(
        (k) => !(k in (before.metadata.annotations ?? {})),
      );
      assert.deepEqual(
        added.filter((k) => !k.startsWith('status.cluster.core.oam.dev/')),
        [],
        `${cluster}: annotations added only under status.cluster.core.oam.dev/`,
      );
    }
  });

  test("KubeVela's next helm upgrade and its uninstall leave the APIService and the Secrets to this chart", async () => {
    const ours = await hub.get<ApiService>(apiServicePath);
    assert.equal(
      ours.metadata.annotations?.['meta.helm.sh/release-name'],
      kubevelaRelease,
      "after the take-over the APIService still carries KubeVela's ownership annotation, so its chart would render it again",
    );
    // The hand-over step of docs/migration.md.
    await kubectl(
      kubeconfig,
      'annotate',
      'apiservice',
      apiServiceName,
      'meta.helm.sh/release-name-',
      'meta.helm.sh/release-namespace-',
      'helm.sh/resource-policy=keep',
    );
    // KubeVela's upgrade as docs/migration.md sets it: through the hub's aggregator, no TLS Job.
    await helm(
      'upgrade',
      kubevelaRelease,
      writeKubeVelaChartDir(),
      '--namespace',
      velaSystem,
      '--reuse-values',
      '--set',
      'multicluster.clusterGateway.direct=false',
      '--set',
      'multicluster.clusterGateway.secureTLS.enabled=false',
      '--set',
      'multicluster.clusterGateway.replicaCount=0',
    );
    const manifest = await helm('get', 'manifest', kubevelaRelease, '--namespace', velaSystem);
    assert.doesNotMatch(manifest, /kind: APIService/, "KubeVela's release no longer holds the APIService");
    const afterUpgrade = await hub.get<ApiService>(apiServicePath);
    assert.ok(pointsAt(afterUpgrade, gatewayName), 'the APIService points at the installed gateway');
    assert.equal(afterUpgrade.spec.caBundle, ours.spec.caBundle, 'with the same caBundle');
    assert.ok(isAvailable(afterUpgrade), 'and is Available');

    await helm('uninstall', kubevelaRelease, '--namespace', velaSystem);
    kubevelaInstalled = false;
    const afterUninstall = await hub.get<ApiService>(apiServicePath);
    assert.equal(afterUninstall.metadata.uid, ours.metadata.uid, 'the same APIService, never deleted');
    assert.ok(pointsAt(afterUninstall, gatewayName) && isAvailable(afterUninstall));
    for (const cluster of written.keys()) {
      assert.ok(await hub.getOptional(secretPath(cluster)), `${cluster}'s Secret is still there`);
    }
    const review = await userOn('cluster1');
    assert.equal(review.body.status?.userInfo?.username, tokenUser, 'cluster1 still served with its Secret');
  });
});

/** The chart folder of the `kubevela` release (written in `before`). */
function writeKubeVelaChartDir(): string {
  const chartDir = writeKubeVelaChart();
  const previous = removeChart;
  removeChart = () => {
    previous?.();
    chartDir.remove();
  };
  return chartDir.dir;
}

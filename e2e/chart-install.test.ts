/**
 * The path users take, on the environment's real hub and nodes: `helm
 * install` of charts/cluster-gateway (validated by the real apiserver) with
 * the node values of hack/localenv/chart.ts (the image built here, the
 * chart's defaults otherwise), the manager run by the hub's kubelet from the
 * Deployment helm made, the gateway pods from the Deployment the manager
 * made, reached by the aggregator through their Service's endpoints, its
 * APIService registered only once it serves; `clusteradm addon enable`, the
 * agents run by the managed clusters' kubelets, AVAILABLE True, `kubectl get
 * clustergateways` and a proxied request; drift repaired; `helm upgrade`;
 * certificate rotations forced by test validities under continuous traffic,
 * reloaded by every gateway pod from the volume its kubelet updates; `helm
 * uninstall` removing the APIService before the gateway.
 *
 * The environment runs its own gateway behind the same APIService
 * (v1alpha1.cluster.core.oam.dev), which the test files after this one use.
 * This file installs into a namespace of its own, so nothing of the
 * environment's is overwritten but the APIService, which the installed
 * manager takes over (as it would from a hand-made gateway on a real hub);
 * `after` deletes what the install left and registers the environment's
 * APIService again, from the copy taken in `before`, and waits until it is
 * Available. The environment's namespaces are never deleted.
 *
 * Named chart-install so that node --test runs it before gateway-*.test.ts,
 * which then prove the environment was left intact.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import tls from 'node:tls';
import { nodeChartValues } from '../hack/localenv/chart.ts';
import { type Pod, podsOf } from '../hack/localenv/pods.ts';
import { type Rollout, rolloutComplete } from '../hack/localenv/rollout.ts';
import { waitFor, waitForConditions } from '../hack/localenv/wait.ts';
import {
  apiServiceName,
  apiServicePath,
  gatewayLabelSelector,
  tunnelPeerPort,
} from '../manager/addon/gateway-deploy/names.ts';
import { KubeClient, type KubeObject } from '../shared/kube/client.ts';
import { clusteradm } from './support/clusteradm.ts';
import { e2eStateDir, environmentState, hubClient } from './support/environment.ts';
import { helm } from './support/helm.ts';
import { kubectl } from './support/kubectl.ts';
import { frontProxyClient } from './support/users.ts';
import { type Recorded, recordWatch, type WatchRecorder } from './support/watch-recorder.ts';

const release = 'cg-e2e';
const namespace = 'cluster-gateway-install';
const addon = 'cluster-gateway';
const gatewayName = 'cluster-gateway';
const managerName = `${release}-cluster-gateway-addon-manager`;
const clusters = ['cluster1', 'cluster2'] as const;
const chart = path.join(import.meta.dirname, '..', 'charts', 'cluster-gateway');
const addonApi = '/apis/addon.open-cluster-management.io/v1alpha1';
const mcaPath = (c: string) => `${addonApi}/namespaces/${c}/managedclusteraddons/${addon}`;
const cmaPath = `${addonApi}/clustermanagementaddons/${addon}`;
const webhookConfigPath = `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${addon}-addon-available`;
const deploymentPath = (name: string) => `/apis/apps/v1/namespaces/${namespace}/deployments/${name}`;
const gatewayServicePath = `/api/v1/namespaces/${namespace}/services/${gatewayName}`;
const agentDeploymentPath = `/apis/apps/v1/namespaces/open-cluster-management-agent-addon/deployments/${addon}-agent`;
const seconds = (ms: number) => Number((ms / 1000).toFixed(1));
/** A PriorityClass of this file's, for the pod settings the install sets on every workload. */
const priorityClass = 'cluster-gateway-e2e';
const priorityClassPath = `/apis/scheduling.k8s.io/v1/priorityclasses/${priorityClass}`;
/** Pod settings of the install (charts/cluster-gateway values): they reach the gateway and the agents. */
const podSettings = [
  `gateway.priorityClassName=${priorityClass}`,
  'gateway.podLabels.e2e-pod-label=gateway',
  'addon.agent.podLabels.e2e-pod-label=agent',
];

type Condition = { type: string; status: string; reason?: string; message?: string };
type ApiService = KubeObject & {
  metadata: { name: string; uid?: string; ownerReferences?: { kind: string; name: string }[] };
  spec: { service?: { namespace: string; name: string; port?: number }; caBundle?: string };
  status?: { conditions?: Condition[] };
};
type Deployment = KubeObject & { status?: { availableReplicas?: number } };
type TlsSecret = KubeObject & { data?: Record<string, string> };
type Mca = KubeObject & { metadata: { namespace: string }; status?: { conditions?: Condition[] } };

let hub: KubeClient;
let kubeconfig: string;
/** The image the environment's nodes hold: the chart runs it. */
let image: string;
/** The managed clusters' clients (agents are checked there). */
const spokes: KubeClient[] = [];
/** The chart's gateway.port (its default): where each gateway pod serves, behind the Service's 443. */
const gatewayPort = 9443;
/** The environment's own APIService, registered again in `after`. */
let environmentApiService: ApiService;
let cmaExisted = false;
let webhookExisted = false;
let installed = false;
const recorders: WatchRecorder<KubeObject>[] = [];
let apiServiceEvents: Recorded<ApiService>[] = [];
let gatewayEvents: Recorded<Deployment>[] = [];

const pointsAtInstall = (obj: ApiService | undefined) =>
  obj?.spec.service?.namespace === namespace && obj.spec.service.name === gatewayName;
const isAvailable = (obj: { status?: { conditions?: Condition[] } } | undefined) =>
  obj?.status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True') ?? false;

/** The node chart values (hack/localenv/chart.ts, as npm start installs it), then `overrides`. */
function values(overrides: string[] = []): string[] {
  return nodeChartValues({ image }, overrides);
}

type GatewayPod = Pod & { status?: { podIP?: string } };

/** The installed gateway's pods that run (not being deleted), with their pod IP: this host reaches it. */
async function gatewayPods(): Promise<(GatewayPod & { ip: string })[]> {
  const pods = (await podsOf(hub, namespace, gatewayLabelSelector)) as GatewayPod[];
  return pods.flatMap((p) =>
    p.status?.phase === 'Running' && !p.metadata.deletionTimestamp && p.status.podIP
      ? [{ ...p, ip: p.status.podIP }]
      : [],
  );
}

/**
 * Waits until the gateway Deployment's rollout is complete: every replica of its latest template Ready and
 * available, no pod of an older one left (not even terminating). Returns its pods.
 */
async function gatewayRolledOut(timeoutMs = 120_000): Promise<(GatewayPod & { ip: string })[]> {
  return waitFor(
    'the gateway rollout complete: every replica of the latest template Ready, no other pod left',
    async () => {
      const d = await hub.get<Rollout>(deploymentPath(gatewayName));
      const want = d.spec.replicas;
      if (!rolloutComplete(d)) return undefined;
      const all = await podsOf(hub, namespace, gatewayLabelSelector);
      const pods = await gatewayPods();
      return all.length === want && pods.length === want ? pods : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

/**
 * How many requests for `cluster` the installed gateway has proxied, from the /metrics of each of its
 * pods, read straight from them at their pod IPs (as the aggregator: front-proxy certificate; the serving
 * certificate checked against the CA the manager made, for the Service's name): what proves that a request
 * through the hub went to the installed gateway.
 */
async function proxiedByInstalledGateway(cluster: string): Promise<number> {
  const secret = await hub.get<KubeObject & { data: Record<string, string> }>(
    `/api/v1/namespaces/${namespace}/secrets/${gatewayName}-tls`,
  );
  const pods = await gatewayPods();
  assert.ok(pods.length > 0, 'the installed gateway runs');
  let total = 0;
  for (const pod of pods) total += await proxiedByPod(pod.ip, secret, cluster);
  return total;
}

async function proxiedByPod(
  ip: string,
  secret: KubeObject & { data: Record<string, string> },
  cluster: string,
): Promise<number> {
  const fp = frontProxyClient();
  const text = await new Promise<string>((resolve, reject) => {
    const req = https.get(
      `https://${ip}:${gatewayPort}/metrics`,
      {
        ca: Buffer.from(secret.data['ca.crt'] ?? '', 'base64').toString(),
        servername: `${gatewayName}.${namespace}.svc`,
        cert: fp.cert,
        key: fp.key,
        headers: { 'x-remote-user': 'e2e-metrics-reader', 'x-remote-group': 'system:masters' },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () =>
          res.statusCode === 200 ? resolve(body) : reject(new Error(`${res.statusCode}: ${body}`)),
        );
      },
    );
    req.on('error', reject);
  });
  let total = 0;
  for (const m of text.matchAll(/^ocm_proxy_proxied_requests_by_cluster_total\{([^}]*)\} (\d+)/gm)) {
    if (m[1]?.includes(`cluster="${cluster}"`)) total += Number(m[2]);
  }
  return total;
}

/**
 * What the managers' gateway controllers wrote since `since`, from the logs of every manager pod that
 * runs (`kubectl logs`, as the kubelet keeps them), as kind/name: field.
 */
async function gatewayWritesSince(since: number): Promise<string[]> {
  const managers = (await podsOf(hub, namespace)).filter(
    (p) => p.metadata.name.startsWith(`${managerName}-`) && p.status?.phase === 'Running',
  );
  assert.ok(managers.length > 0, 'the manager runs');
  const lines: string[] = [];
  for (const pod of managers) {
    const log = await hub.request<string>(
      'GET',
      `/api/v1/namespaces/${namespace}/pods/${pod.metadata.name}/log?container=manager`,
    );
    lines.push(...String(log).split('\n'));
  }
  const writes: string[] = [];
  for (const line of lines) {
    if (!line.startsWith('{')) continue;
    const entry = JSON.parse(line) as {
      time: number;
      controller?: string;
      msg: string;
      kind?: string;
      name?: string;
      field?: string;
    };
    if (entry.time < since || entry.controller !== 'gateway') continue;
    const written =
      entry.msg === 'gateway object created' ||
      entry.msg === 'gateway object repaired or updated' ||
      entry.msg === 'APIService repaired' ||
      /^APIService \S+ (registered|taken over)/.test(entry.msg);
    if (written) {
      writes.push(
        `${entry.kind ?? 'APIService'} ${entry.name ?? ''}: ${entry.msg} ${entry.field ?? ''}`.trim(),
      );
    }
  }
  return writes;
}

/** A request through the hub's aggregator to cluster1's kube-apiserver. */
async function proxiedThroughHub(): Promise<KubeObject> {
  return JSON.parse(
    await kubectl(
      kubeconfig,
      'get',
      '--raw',
      '/apis/cluster.core.oam.dev/v1alpha1/clustergateways/cluster1/proxy/api/v1/namespaces/default',
    ),
  ) as KubeObject;
}

/** `kubectl api-resources` exits 0: every APIService of the hub answers discovery. */
async function discoveryHealthy(): Promise<boolean> {
  return kubectl(kubeconfig, 'api-resources', '-o', 'name').then(
    () => true,
    () => false,
  );
}

describe('helm install of charts/cluster-gateway on the real hub', () => {
  before(async () => {
    hub = await hubClient();
    const env = environmentState();
    assert.ok(env.image, 'the e2e environment runs real nodes and their image (e2e/setup.ts: nodes: true)');
    image = env.image;
    kubeconfig = env.hub.kubeconfig;
    environmentApiService = await hub.get<ApiService>(apiServicePath);
    assert.ok(isAvailable(environmentApiService), "the environment's APIService is Available to begin with");
    for (const c of clusters) await hub.delete(mcaPath(c));
    // A ClusterManagementAddOn an earlier file's manager left is not this release's: the chart would leave it
    // to that manager (templates/cluster-management-addon.yaml). Removed, so that this install declares it.
    const leftover = await hub.getOptional<KubeObject>(cmaPath);
    if (leftover && !leftover.metadata?.annotations?.['meta.helm.sh/release-name']) {
      await hub.delete(cmaPath);
      await waitFor(
        'the leftover ClusterManagementAddOn gone',
        async () => !(await hub.getOptional(cmaPath)),
      );
    }
    await hub.apply(
      priorityClassPath,
      {
        apiVersion: 'scheduling.k8s.io/v1',
        kind: 'PriorityClass',
        metadata: { name: priorityClass },
        value: 1000,
        description: 'e2e/chart-install.test.ts: the chart sets it on the gateway pods',
      },
      'e2e-chart-install',
    );
    cmaExisted = !!(await hub.getOptional(cmaPath));
    webhookExisted = !!(await hub.getOptional(webhookConfigPath));
    for (const c of env.managed.filter((m) => clusters.includes(m.name as never))) {
      spokes.push(await KubeClient.fromKubeconfig(c.kubeconfig));
    }
    const apiServices = recordWatch<ApiService>(
      hub,
      `/apis/apiregistration.k8s.io/v1/apiservices?fieldSelector=metadata.name=${apiServiceName}`,
    );
    const gateways = recordWatch<Deployment>(
      hub,
      `/apis/apps/v1/namespaces/${namespace}/deployments?fieldSelector=metadata.name=${gatewayName}`,
    );
    recorders.push(apiServices as never, gateways as never);
    apiServiceEvents = apiServices.events;
    gatewayEvents = gateways.events;
    await Promise.all([apiServices.ready, gateways.ready]);
  });

  after(async () => {
    // Leave the environment as found. Every step runs whatever failed before it.
    const attempt = async (what: string, step: () => Promise<unknown>) =>
      step().catch((err: Error) => console.log(`[chart-install] cleanup: ${what}: ${err.message}`));
    if (installed) await attempt('helm uninstall', () => helm('uninstall', release, '-n', namespace));
    await attempt('addon disable', () =>
      clusteradm('addon', 'disable', '--names', addon, '--clusters', clusters.join(',')),
    );
    for (const c of clusters) {
      await attempt(`${c} addon gone`, () =>
        waitFor(`addon on ${c} gone`, async () => !(await hub.getOptional(mcaPath(c))), {
          timeoutMs: 60_000,
        }),
      );
    }
    // No agent pod of the install left on the managed clusters' nodes (the work agents remove them).
    for (const [i, spoke] of spokes.entries()) {
      await attempt(`${clusters[i]} agent pods gone`, () =>
        waitFor(
          `the agent pods of ${clusters[i]} gone`,
          async () =>
            (await podsOf(spoke, 'open-cluster-management-agent-addon')).every(
              (p) => !p.metadata.name.startsWith(`${addon}-agent-`),
            ),
          { timeoutMs: 60_000 },
        ),
      );
    }
    for (const r of recorders) await r.stop();
    await attempt('leftovers', async () => {
      if (!cmaExisted) await hub.delete(cmaPath);
      await hub.delete(priorityClassPath);
      if (!webhookExisted) await hub.delete(webhookConfigPath);
      await hub.request(
        'DELETE',
        `/apis/certificates.k8s.io/v1/certificatesigningrequests?labelSelector=${encodeURIComponent(`open-cluster-management.io/addon-name=${addon}`)}`,
      );
      const current = await hub.getOptional<ApiService>(apiServicePath);
      if (current && !sameService(current, environmentApiService)) await hub.delete(apiServicePath);
      await hub.delete(`/api/v1/namespaces/${namespace}`);
    });
    // Its pods (the manager's and the gateway's) stop on the hub's node with the namespace.
    await attempt(`namespace ${namespace} gone`, () =>
      waitFor(
        `namespace ${namespace} and its pods gone`,
        async () => !(await hub.getOptional(`/api/v1/namespaces/${namespace}`)),
        {
          timeoutMs: 90_000,
        },
      ),
    );
    await attempt("the environment's APIService", async () => {
      await hub.apply(
        apiServicePath,
        {
          apiVersion: 'apiregistration.k8s.io/v1',
          kind: 'APIService',
          metadata: { name: apiServiceName },
          spec: environmentApiService.spec,
        },
        'local-environment',
      );
      await waitForConditions(hub, apiServicePath, ['Available'], {
        what: "the environment's APIService to be Available again",
        timeoutMs: 60_000,
      });
      assert.ok(sameService(await hub.get<ApiService>(apiServicePath), environmentApiService));
    });
    hub?.close();
    for (const c of spokes) c.close();
  });

  test('helm install: the manager from its Deployment, the gateway from the manager, the APIService once it serves', async () => {
    const started = Date.now();
    const notes = await helm(
      'install',
      release,
      chart,
      '--namespace',
      namespace,
      '--create-namespace',
      ...values(podSettings),
    );
    installed = true;
    assert.match(notes, new RegExp(`clusteradm addon enable --names ${addon} --clusters`));
    await waitFor(
      'the manager Deployment to be available',
      async () =>
        ((await hub.getOptional<Deployment>(deploymentPath(managerName)))?.status?.availableReplicas ?? 0) >=
        1,
    );
    const registered = await waitFor(
      'the APIService to point at the installed gateway and be Available',
      async () => {
        const obj = await hub.getOptional<ApiService>(apiServicePath);
        return pointsAtInstall(obj) && isAvailable(obj) ? obj : undefined;
      },
      { timeoutMs: 120_000 },
    );
    console.log(`[chart-install] helm install -> APIService Available: ${seconds(Date.now() - started)} s`);

    // Registered only once the gateway served: the first APIService event naming it came after the first
    // gateway Deployment event with an available replica.
    const gatewayServing = gatewayEvents.find((e) => (e.object.status?.availableReplicas ?? 0) >= 1);
    const takenOver = apiServiceEvents.find((e) => pointsAtInstall(e.object));
    assert.ok(gatewayServing && takenOver, 'both recorded');
    assert.ok(
      takenOver.at >= gatewayServing.at,
      `APIService taken over ${takenOver.at - gatewayServing.at} ms after the gateway served`,
    );
    // The caBundle is the CA the manager keeps in the gateway's Secret: no placeholder, no skipped verification.
    const secret = await hub.get<KubeObject & { data: Record<string, string> }>(
      `/api/v1/namespaces/${namespace}/secrets/${gatewayName}-tls`,
    );
    const ca = Buffer.from(secret.data['ca.crt'] ?? '', 'base64').toString();
    assert.equal(
      Buffer.from(registered.spec.caBundle ?? '', 'base64')
        .toString()
        .trim(),
      ca.trim(),
    );
    assert.notEqual(registered.spec.caBundle, 'Cg==');
    assert.equal((registered.spec as { insecureSkipTLSVerify?: boolean }).insecureSkipTLSVerify, undefined);
    // The chart's defaults: a ClusterIP Service on 443 in front of the gateway pods (no host port, no external name).
    assert.deepEqual(registered.spec.service, { namespace, name: gatewayName, port: 443 });
    const service = await hub.get<KubeObject & { spec: { type?: string; clusterIP?: string } }>(
      gatewayServicePath,
    );
    assert.equal(service.spec.type, 'ClusterIP');
    assert.ok(service.spec.clusterIP && service.spec.clusterIP !== 'None', 'the Service has a cluster IP');
    assert.deepEqual(
      registered.metadata.ownerReferences?.map((o) => `${o.kind}/${o.name}`),
      [`ClusterRole/${managerName}`],
      'helm uninstall (deleting that ClusterRole) takes it away',
    );
    // Why it waited, and that it registered, are Events on the gateway Deployment.
    const events = await hub.list<KubeObject & { reason: string; message: string }>(
      `/api/v1/namespaces/${namespace}/events?fieldSelector=involvedObject.name=${gatewayName}`,
    );
    const reasons = events.items.map((e) => e.reason);
    assert.ok(reasons.includes('APIServiceNotRegistered'), `events: ${reasons.join(', ')}`);
    assert.ok(reasons.includes('APIServiceRegistered'), `events: ${reasons.join(', ')}`);
    assert.ok(await discoveryHealthy(), 'kubectl api-resources exits 0');
  });

  test('the ClusterManagementAddOn comes from helm, and the manager leaves it alone', async () => {
    type Cma = KubeObject & { spec: { addOnMeta: { description: string } } };
    const cma = await hub.get<Cma>(cmaPath);
    assert.equal(
      cma.metadata?.annotations?.['meta.helm.sh/release-name'],
      release,
      'declared by the release',
    );
    // A change the manager's flags do not describe (as a helm upgrade's before the manager rolls): kept.
    const changed = 'changed outside the manager (e2e)';
    const original = cma.spec.addOnMeta.description;
    await hub.mergePatch(cmaPath, { spec: { addOnMeta: { description: changed } } });
    try {
      // The manager watches it and would apply its own within milliseconds (cma/cma-controller.ts).
      await new Promise((r) => setTimeout(r, 3_000));
      const after = await hub.get<Cma>(cmaPath);
      assert.equal(after.spec.addOnMeta.description, changed, 'the manager did not write it back');
      const managers = (after.metadata?.managedFields ?? []) as { manager?: string }[];
      assert.deepEqual(
        managers.filter((f) => f.manager === 'cluster-gateway-addon-manager'),
        [],
        "no field of the manager's CMA controller",
      );
    } finally {
      await hub.mergePatch(cmaPath, { spec: { addOnMeta: { description: original } } });
    }
  });

  test("the gateway pods carry the chart's gateway.podLabels and gateway.priorityClassName", async () => {
    const pods = await gatewayRolledOut();
    for (const pod of pods) {
      const p = pod as GatewayPod & { spec?: { priorityClassName?: string } };
      assert.equal(p.metadata.labels?.['e2e-pod-label'], 'gateway', p.metadata.name);
      assert.equal(p.spec?.priorityClassName, priorityClass, p.metadata.name);
    }
  });

  test('non-default values render objects the real apiserver accepts (server-side dry run)', async () => {
    const rendered = await helm(
      'template',
      release,
      chart,
      '--namespace',
      namespace,
      ...values([
        'addon.installStrategy=Placements',
        'addon.placements[0].name=production',
        'addon.everyCluster.enabled=true',
        'addon.deploymentConfig.agentInstallNamespace=cluster-gateway-agent',
        'addon.deploymentConfig.nodePlacement.nodeSelector.role=infra',
        'addon.deploymentConfig.registries[0].source=ghcr.io',
        'addon.deploymentConfig.registries[0].mirror=registry.example.com',
        'addon.deploymentConfig.proxyConfig.httpsProxy=http://proxy.example.com:3128',
        'addon.deploymentConfig.resourceRequirements[0].containerID=deployments:*:*',
        'addon.deploymentConfig.resourceRequirements[0].resources.limits.memory=128Mi',
        'gateway.credentialNamespace.create=true',
        'image.pullSecrets={pull-secret}',
        'networkPolicy.enabled=true',
        'networkPolicy.apiServer[0].ipBlock.cidr=10.0.0.0/8',
        'networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=monitoring',
        'manager.podLabels.team=platform',
        'manager.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=1',
        'manager.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].key=role',
        'manager.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].operator=Exists',
      ]),
    );
    const dir = path.join(e2eStateDir, 'chart-install');
    mkdirSync(dir, { recursive: true });
    const file = path.join(dir, 'non-default.yaml');
    writeFileSync(file, rendered);
    const out = await kubectl(
      kubeconfig,
      'apply',
      '--server-side',
      '--dry-run=server',
      '--force-conflicts',
      '--field-manager=e2e-dry-run',
      '-f',
      file,
    );
    for (const kind of [
      'placement',
      'managedclustersetbinding',
      'addondeploymentconfig',
      'deployment',
      'namespace',
      'networkpolicy',
    ]) {
      assert.match(
        out,
        new RegExp(
          `^${kind}[^ ]* (serverside-applied|created|configured|unchanged) \\(server dry run\\)`,
          'mi',
        ),
      );
    }
  });

  test('clusteradm addon enable: AVAILABLE True, kubectl get clustergateways, a proxied request', async () => {
    const started = Date.now();
    await clusteradm('addon', 'enable', '--names', addon, '--clusters', clusters.join(','));
    await waitFor(
      'both ManagedClusterAddOns Available True',
      async () => {
        for (const c of clusters) if (!isAvailable(await hub.getOptional<Mca>(mcaPath(c)))) return false;
        return true;
      },
      { timeoutMs: 120_000 },
    );
    console.log(`[chart-install] addon enable -> Available True: ${seconds(Date.now() - started)} s`);
    const table = await kubectl(kubeconfig, 'get', 'managedclusteraddons', '-A');
    console.log(table.trimEnd());
    for (const c of clusters) assert.match(table, new RegExp(`^${c}\\s+${addon}\\s+True\\b`, 'm'));

    // Served by the installed gateway: the aggregator routes the group to the APIService's service only.
    assert.ok(pointsAtInstall(await hub.get<ApiService>(apiServicePath)));
    const gateways = await kubectl(kubeconfig, 'get', 'clustergateways');
    console.log(gateways.trimEnd());
    for (const c of clusters) assert.match(gateways, new RegExp(`^${c}\\s`, 'm'));
    const before = await proxiedByInstalledGateway('cluster1');
    const proxied = await proxiedThroughHub();
    assert.equal(proxied.kind, 'Namespace');
    assert.equal(proxied.metadata?.name, 'default');
    assert.equal(await proxiedByInstalledGateway('cluster1'), before + 1, 'proxied by the installed gateway');
    // The agent names OCM's image pull Secret in a namespace the klusterlet copies it into, and carries the
    // chart's agent pod labels (addon.agent.podLabels, through the manager's --agent-pod-labels).
    // biome-ignore lint/suspicious/noExplicitAny: the work's manifests are read field by field.
    type Manifest = KubeObject & { spec?: any };
    const work = await hub.get<KubeObject & { spec: { workload: { manifests: Manifest[] } } }>(
      `/apis/work.open-cluster-management.io/v1/namespaces/cluster1/manifestworks/addon-${addon}-deploy-0`,
    );
    const manifests = work.spec.workload.manifests;
    const agentDeployment = manifests.find((m) => m.kind === 'Deployment');
    assert.deepEqual(agentDeployment?.spec.template.spec.imagePullSecrets, [
      { name: 'open-cluster-management-image-pull-credentials' },
    ]);
    assert.equal(
      manifests.find((m) => m.kind === 'Namespace')?.metadata?.labels?.[
        'addon.open-cluster-management.io/namespace'
      ],
      'true',
    );
    const running = await spokes[0]?.get<Manifest>(agentDeploymentPath);
    assert.equal(running?.spec.template.metadata.labels['e2e-pod-label'], 'agent', 'on the managed cluster');
  });

  test("the agents' tunnels land on the installed gateway, which shares them with its other replicas through Leases", async () => {
    // The manager runs the gateway with tunnel sharing on (workload.ts: peerArgs): the replica holding
    // a cluster's tunnel writes a Lease naming itself and its peer address, and renews it.
    type Lease = KubeObject & {
      metadata: { annotations?: Record<string, string> };
      spec?: { holderIdentity?: string; renewTime?: string };
    };
    const leasePath = (c: string) =>
      `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/cluster-gateway-tunnel-${c}`;
    const first = new Map<string, Lease>();
    await waitFor(
      'a held tunnel Lease per cluster in the install namespace',
      async () => {
        for (const c of clusters) {
          const lease = await hub.getOptional<Lease>(leasePath(c));
          if (!lease?.spec?.holderIdentity) return false;
          first.set(c, lease);
        }
        return true;
      },
      { timeoutMs: 60_000 },
    );
    const pods = await gatewayPods();
    for (const [c, lease] of first) {
      assert.equal(lease.metadata.annotations?.['cluster.core.oam.dev/cluster-name'], c);
      const holder = pods.find((p) => p.metadata.name === lease.spec?.holderIdentity);
      assert.ok(
        holder,
        `a running gateway pod holds it (${lease.spec?.holderIdentity}; pods: ${pods.map((p) => p.metadata.name).join(', ')})`,
      );
      assert.equal(
        lease.metadata.annotations?.['cluster.core.oam.dev/tunnel-peer-address'],
        `${holder.ip}:${tunnelPeerPort}`,
        "the holder's pod IP and its peer port",
      );
    }
    await waitFor(
      'the Leases renewed',
      async () => {
        for (const c of clusters) {
          const lease = await hub.getOptional<Lease>(leasePath(c));
          if (lease?.spec?.renewTime === first.get(c)?.spec?.renewTime) return false;
        }
        return true;
      },
      { timeoutMs: 15_000 },
    );
  });

  test('the APIService or the gateway Service deleted by hand: back, discovery healthy, within 10 s', async () => {
    for (const [what, objectPath] of [
      ['APIService', apiServicePath],
      ['gateway Service', gatewayServicePath],
    ] as const) {
      const deletedAt = Date.now();
      await hub.delete(objectPath);
      await waitFor(
        `the ${what} repaired and discovery healthy`,
        async () => {
          if (!(await hub.getOptional(objectPath))) return false;
          const api = await hub.getOptional<ApiService>(apiServicePath);
          if (!pointsAtInstall(api) || !isAvailable(api) || !(await discoveryHealthy())) return false;
          // Through the aggregator to the installed gateway and on to cluster1, for real.
          return (await proxiedThroughHub().catch(() => undefined))?.kind === 'Namespace';
        },
        { timeoutMs: 20_000, intervalMs: 100 },
      );
      const took = seconds(Date.now() - deletedAt);
      console.log(`[chart-install] ${what} deleted -> repaired, discovery healthy: ${took} s`);
      assert.ok(took < 10, `${what}: ${took} s`);
    }
  });

  test('helm upgrade with changed values rolls the manager and the gateway; the addons stay Available', async () => {
    const before = await hub.get<KubeObject & { spec: { template: unknown } }>(deploymentPath(gatewayName));
    const addons = recordWatch<Mca>(
      hub,
      `${addonApi}/managedclusteraddons?fieldSelector=metadata.name=${addon}`,
    );
    await addons.ready;
    const started = Date.now();
    try {
      await helm(
        'upgrade',
        release,
        chart,
        '--namespace',
        namespace,
        // The install's pod settings kept: the agents are not rolled (their ManifestWork unchanged).
        ...values([
          ...podSettings,
          'gateway.replicas=3',
          'gateway.logLevel=info',
          'gateway.healthCheck.intervalSeconds=3',
        ]),
      );
      const rolled = await waitFor(
        'the manager to roll the gateway Deployment',
        async () => {
          const d = await hub.get<KubeObject & { spec: { replicas: number; template: unknown } }>(
            deploymentPath(gatewayName),
          );
          return d.spec.replicas === 3 ? d : undefined;
        },
        { timeoutMs: 60_000 },
      );
      const args = JSON.stringify(rolled.spec.template);
      assert.ok(args.includes('--log-level=info') && args.includes('--health-check-interval=3'));
      assert.notDeepEqual(rolled.spec.template, before.spec.template);
      await waitFor(
        'the rolled gateway serving through the APIService',
        async () => {
          const api = await hub.getOptional<ApiService>(apiServicePath);
          return pointsAtInstall(api) && isAvailable(api) && (await discoveryHealthy());
        },
        { timeoutMs: 60_000 },
      );
      // Give a False caused by the upgrade time to show: the manager's health resync and heartbeats.
      await new Promise((r) => setTimeout(r, 8_000));
      // The new manager's caches come from lists, the old one's from watch events too: an unrelated change
      // (an annotation) makes it reconcile, and a converged manager then writes nothing.
      const poked = Date.now();
      await hub.mergePatch(deploymentPath(gatewayName), {
        metadata: { annotations: { 'e2e.cluster-gateway.oam.dev/poke': String(poked) } },
      });
      await new Promise((r) => setTimeout(r, 2_000));
      assert.deepEqual(await gatewayWritesSince(poked), [], 'no gateway object written again');
      console.log(`[chart-install] helm upgrade -> rolled and serving: ${seconds(Date.now() - started)} s`);
    } finally {
      await addons.stop();
    }
    const notAvailable = addons.events.filter(
      (e) =>
        e.type === 'DELETED' ||
        e.object.status?.conditions?.some((c) => c.type === 'Available' && c.status !== 'True'),
    );
    assert.deepEqual(
      notAvailable.map(
        (e) => `${e.object.metadata.namespace} ${e.type} ${JSON.stringify(e.object.status?.conditions)}`,
      ),
      [],
      'no addon left Available True during the upgrade',
    );
  });

  test('certificate rotation with test validities (CA 80 s, serving 60 s): no failed request, both CAs trusted across the switch', async () => {
    // Sequence after the upgrade lowers the validities: the 5-year CA is rotated at once (lowered validity),
    // the serving certificate 38 s later (a third of its 66 s life left: 60 s plus a 6 s backdate), the CA
    // 50.7 s after its issue (a third of 88 s left: 80 s plus an 8 s backdate), the old CA staying in the
    // caBundle until it expires. Serving is the shortest validity the manager takes (60 s); the CA's leaves
    // the serving-only rotation 12.7 s before the second CA rotation, and the old CA trusted 29 s after it,
    // more than the 22 s a serving rotation leaves the kubelets (--sync-frequency 10 s) to hand every gateway
    // pod its new certificate before the old one expires.
    const tlsSecretPath = `/api/v1/namespaces/${namespace}/secrets/${gatewayName}-tls`;
    // The same gateway pods all along (this upgrade rolls the manager only): the upgrade before has finished
    // replacing them, so the per-pod counters and handshakes below cover every replica that serves.
    const gateways = await gatewayRolledOut();
    const secrets = recordWatch<TlsSecret>(
      hub,
      `/api/v1/namespaces/${namespace}/secrets?fieldSelector=metadata.name=${gatewayName}-tls`,
    );
    await secrets.ready;
    const initial = pemsOf(await hub.get<TlsSecret>(tlsSecretPath));
    const proxiedBefore = await proxiedByInstalledGateway('cluster1');
    const started = Date.now();
    const stop = new AbortController();
    const requests = { sent: 0, ok: 0, failed: [] as string[] };
    const stamp = () => `${seconds(Date.now() - started)} s`;

    // Requests through the hub's kube-aggregator to the installed gateway and on to cluster1, back to back.
    const proxiedPath =
      '/apis/cluster.core.oam.dev/v1alpha1/clustergateways/cluster1/proxy/api/v1/namespaces/default';
    const sender = async () => {
      while (!stop.signal.aborted) {
        requests.sent++;
        try {
          const obj = await hub.get(proxiedPath);
          if (obj.kind === 'Namespace') requests.ok++;
          else requests.failed.push(`${stamp()}: got ${obj.kind}`);
        } catch (err) {
          requests.failed.push(`${stamp()}: ${(err as Error).message}`);
        }
      }
    };
    // A watch through the same path, opened before the rotations: a reload must not cut open connections.
    let watchEnded: string | undefined;
    const watch = (async () => {
      try {
        for await (const _ of hub.watch(
          '/apis/cluster.core.oam.dev/v1alpha1/clustergateways/cluster1/proxy/api/v1/namespaces?timeoutSeconds=900',
          stop.signal,
        )) {
          // events and bookmarks: the watch is alive
        }
        if (!stop.signal.aborted) watchEnded = `${stamp()}: ended by the server`;
      } catch (err) {
        if (!stop.signal.aborted) watchEnded = `${stamp()}: ${(err as Error).message}`;
      }
    })();
    // New TLS connections to every gateway pod (each reloads the Secret its kubelet updates in its volume),
    // verified as the aggregator verifies them: against the APIService's caBundle of the moment and the
    // Service's DNS name. Any failure is a request the aggregator would fail.
    const handshakes = { checked: 0, failed: [] as string[] };
    const served: { at: number; pod: string; fingerprint: string; issuer: string }[] = [];
    const sampler = async () => {
      while (!stop.signal.aborted) {
        const api = await hub.get<ApiService>(apiServicePath).catch(() => undefined);
        const bundle = Buffer.from(api?.spec.caBundle ?? '', 'base64').toString();
        const pods = await gatewayPods().catch(() => []);
        for (const pod of pods) {
          try {
            const peer = await gatewayCertificate(pod.ip, bundle);
            handshakes.checked++;
            const issuer =
              certificatesOf(bundle).find((ca) => {
                const x = new X509Certificate(ca);
                return peer.checkIssued(x) && peer.verify(x.publicKey);
              }) ?? '';
            served.push({
              at: Date.now(),
              pod: pod.metadata.name,
              fingerprint: peer.fingerprint256,
              issuer: issuer.trim(),
            });
          } catch (err) {
            handshakes.failed.push(`${stamp()} ${pod.metadata.name}: ${(err as Error).message}`);
          }
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    };
    const running = [sender(), sender(), sender(), sampler(), watch];

    const versions = () => {
      const seen = [initial];
      for (const e of secrets.events) {
        const next = pemsOf(e.object);
        const last = seen.at(-1);
        if (next.ca !== last?.ca || next.leaf !== last?.leaf) seen.push({ ...next, at: e.at });
      }
      return seen;
    };
    /** Each change of CA, with the version before it. */
    const caRotations = () =>
      versions().flatMap((rotation, i, all) => {
        const previous = all[i - 1];
        return previous && rotation.ca !== previous.ca ? [{ previous, rotation }] : [];
      });
    const servingRotations = () =>
      versions().filter((v, i, all) => i > 0 && v.ca === all[i - 1]?.ca && v.leaf !== all[i - 1]?.leaf);
    const fingerprintOf = (pem: string) => new X509Certificate(pem).fingerprint256;
    try {
      await helm(
        'upgrade',
        release,
        chart,
        '--namespace',
        namespace,
        // The previous test's values, so that only the manager rolls (the gateway's pod template is unchanged).
        ...values([
          ...podSettings,
          'gateway.replicas=3',
          'gateway.logLevel=info',
          'gateway.healthCheck.intervalSeconds=3',
          'gateway.certificate.caValiditySeconds=80',
          'gateway.certificate.validitySeconds=60',
        ]),
      );
      await waitFor(
        'the CA rotated by the new validity, then a serving rotation and a CA rotation, the last served by every gateway pod',
        () => {
          const latest = versions().at(-1);
          return (
            caRotations().length >= 2 &&
            servingRotations().length >= 1 &&
            latest !== undefined &&
            // Each pod reads the Secret from the volume its kubelet updates: every one of them reloads it.
            gateways.every((g) =>
              served.some((s) => s.pod === g.metadata.name && s.fingerprint === fingerprintOf(latest.leaf)),
            )
          );
        },
        { timeoutMs: 240_000, intervalMs: 500 },
      );
      // Traffic goes on for a few seconds more on the last certificate.
      await new Promise((r) => setTimeout(r, 5_000));
    } finally {
      stop.abort();
      await Promise.all(running);
      await secrets.stop();
    }
    const duration = seconds(Date.now() - started);
    const cas = caRotations();
    const timeline = versions()
      .slice(1)
      .map(
        (v, i, all) =>
          `${v.ca !== (all[i - 1] ?? initial).ca ? 'CA' : 'serving'} at ${seconds((v.at ?? 0) - started)} s`,
      );
    console.log(
      `[chart-install] rotations in ${duration} s (${timeline.join(', ')}): ${cas.length} CA (the first by the lowered validity), ` +
        `${servingRotations().length} serving-only; ${requests.sent} requests through the aggregator, ` +
        `${requests.failed.length} failed; ${handshakes.checked} new TLS connections to the gateway checked against ` +
        `the caBundle, ${handshakes.failed.length} failed; ${new Set(served.map((s) => s.fingerprint)).size} ` +
        `serving certificates seen; a watch through the gateway ${watchEnded ? `ended: ${watchEnded}` : 'open throughout'}`,
    );

    assert.deepEqual(requests.failed.slice(0, 10), [], `failed requests of ${requests.sent}`);
    assert.deepEqual(handshakes.failed.slice(0, 10), [], 'handshakes the aggregator would have failed');
    assert.equal(watchEnded, undefined, 'the watch opened before the rotations stays open');
    assert.ok(requests.ok > 100, `${requests.ok} requests succeeded`);
    assert.ok(
      (await proxiedByInstalledGateway('cluster1')) - proxiedBefore >= requests.ok,
      'every request went through the installed gateway',
    );
    assert.notEqual(versions().at(-1)?.ca, initial.ca, 'the CA changed');
    assert.deepEqual(
      (await gatewayPods()).map((p) => p.metadata.name).sort(),
      gateways.map((p) => p.metadata.name).sort(),
      'the same gateway pods served throughout (a rotation reloads, it does not restart)',
    );
    // Each new CA was in the caBundle, next to the one before it, before the gateway served a certificate
    // it signed: the aggregator never met a certificate it could not verify.
    for (const [i, { previous, rotation }] of cas.entries()) {
      const bothTrusted = apiServiceEvents.find((e) => {
        const bundle = certificatesOf(Buffer.from(e.object.spec.caBundle ?? '', 'base64').toString());
        return e.at >= started && bundle.includes(rotation.ca.trim()) && bundle.includes(previous.ca.trim());
      });
      const firstServed = served.find((s) => s.issuer === rotation.ca.trim());
      assert.ok(bothTrusted, `CA rotation ${i + 1}: a caBundle with the new and the old CA`);
      assert.ok(firstServed, `CA rotation ${i + 1}: the gateway served a certificate of the new CA`);
      assert.ok(
        bothTrusted.at <= firstServed.at,
        `CA rotation ${i + 1}: both CAs trusted ${firstServed.at - bothTrusted.at} ms before the gateway served the new CA's certificate`,
      );
    }
    // The APIService stayed Available all along (the recorder of `before` saw every change of it).
    const unavailable = apiServiceEvents.filter(
      (e) => e.at >= started && (e.type === 'DELETED' || !isAvailable(e.object)),
    );
    assert.deepEqual(
      unavailable.map((e) => `${e.type} ${JSON.stringify(e.object.status?.conditions)}`),
      [],
      'APIService Available throughout',
    );
  });

  test('helm uninstall: the APIService goes first, then the gateway; hub discovery stays healthy', async () => {
    const started = Date.now();
    await helm('uninstall', release, '--namespace', namespace);
    installed = false;
    await waitFor(
      'the APIService and the gateway Deployment to be gone',
      async () =>
        !(await hub.getOptional(apiServicePath)) && !(await hub.getOptional(deploymentPath(gatewayName))),
      { timeoutMs: 60_000 },
    );
    console.log(
      `[chart-install] helm uninstall -> APIService and gateway gone: ${seconds(Date.now() - started)} s`,
    );
    // A GET can see an object gone before its watch delivers the DELETED event: wait for both events.
    const deleted = (events: Recorded<KubeObject>[]) =>
      events.find((e) => e.type === 'DELETED' && e.at >= started);
    const [apiDeleted, gatewayDeleted] = await waitFor(
      'both deletions recorded by the watches',
      async () => {
        const api = deleted(apiServiceEvents as Recorded<KubeObject>[]);
        const gateway = deleted(gatewayEvents as Recorded<KubeObject>[]);
        return api && gateway ? ([api, gateway] as const) : undefined;
      },
      { timeoutMs: 10_000 },
    );
    assert.ok(
      apiDeleted.at <= gatewayDeleted.at,
      `APIService deleted ${gatewayDeleted.at - apiDeleted.at} ms before the gateway Deployment`,
    );
    assert.ok(await discoveryHealthy(), 'kubectl api-resources exits 0');
    // The ClusterManagementAddOn goes with the release, every ManagedClusterAddOn with it, and every agent
    // with its ManifestWork (removed by OCM's work agent on the managed cluster).
    await waitFor(
      'the ClusterManagementAddOn, the ManagedClusterAddOns and the agents gone',
      async () => {
        if (await hub.getOptional(cmaPath)) return false;
        for (const c of clusters) if (await hub.getOptional(mcaPath(c))) return false;
        for (const c of spokes) if (await c.getOptional(agentDeploymentPath)) return false;
        return true;
      },
      { timeoutMs: 90_000 },
    );
    console.log(`[chart-install] helm uninstall -> agents gone: ${seconds(Date.now() - started)} s`);
    assert.equal(await hub.getOptional(webhookConfigPath), undefined, 'the webhook registration went too');
    for (const kind of ['clusterroles', 'clusterrolebindings']) {
      const left = await hub.list(
        `/apis/rbac.authorization.k8s.io/v1/${kind}?labelSelector=${encodeURIComponent('app.kubernetes.io/component=gateway')}`,
      );
      await waitFor(`the gateway's ${kind} gone`, async () => {
        const now = await hub.list(
          `/apis/rbac.authorization.k8s.io/v1/${kind}?labelSelector=${encodeURIComponent('app.kubernetes.io/component=gateway')}`,
        );
        return now.items.length === 0;
      }).catch(() => assert.fail(`${kind} left: ${left.items.map((i) => i.metadata?.name).join(', ')}`));
    }
  });
});

/** The CA and serving certificate (PEM) of the gateway's Secret. */
function pemsOf(secret: TlsSecret): { ca: string; leaf: string; at?: number } {
  const pem = (key: string) => Buffer.from(secret.data?.[key] ?? '', 'base64').toString();
  return { ca: pem('ca.crt'), leaf: pem('tls.crt') };
}

/** The PEM certificates of a bundle, trimmed. */
function certificatesOf(bundle: string): string[] {
  return (bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map((c) =>
    c.trim(),
  );
}

/**
 * The certificate the installed gateway's pod at `ip` serves a new connection, verified as the aggregator
 * verifies it: against `caBundle`, for the gateway Service's DNS name.
 */
function gatewayCertificate(ip: string, caBundle: string): Promise<X509Certificate> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect(
      { host: ip, port: gatewayPort, ca: caBundle, servername: `${gatewayName}.${namespace}.svc` },
      () => {
        const peer = socket.getPeerX509Certificate();
        socket.destroy();
        if (peer) resolve(peer);
        else reject(new Error('no peer certificate'));
      },
    );
    socket.setTimeout(10_000, () => socket.destroy(new Error('TLS handshake timed out')));
    socket.on('error', reject);
  });
}

function sameService(a: ApiService, b: ApiService): boolean {
  return JSON.stringify(a.spec.service) === JSON.stringify(b.spec.service);
}

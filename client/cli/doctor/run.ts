/**
 * The doctor's checks, in the order a person fixes things: the hub's front door (APIService, gateway pods,
 * the aggregator's verdict, the caBundle), the addon manager, the ClusterManagementAddOn; then, for each cluster,
 * the addon, its ManifestWork, the agent, its heartbeat, the tunnel, the caller's permission and a proxied
 * /healthz.
 *
 * Every read starts at once (reads.ts shares them), every check awaits only its own, and the results are
 * reported in order as soon as each one and those before it are known. A check whose dependency failed is
 * skipped (it could only repeat the failure), so the first failing line is the cause.
 */
import type { KubeClient } from '../../../shared/kube/client.ts';
import {
  type AccessReview,
  accessReviewBody,
  healthzAnswers,
  proxyAllowed,
  type SelfSubjectReview,
} from './access.ts';
import {
  addonExists,
  agentLocation,
  agentRuns,
  type ClusterGateway,
  type HeartbeatLease,
  heartbeatFresh,
  type ManagedClusterAddOn,
  type ManifestWork,
  tunnelUp,
  workApplied,
} from './agent.ts';
import {
  type APIService,
  apiServiceAvailable,
  apiServiceExists,
  caBundleVerifies,
  type Deployment,
  gatewayPodsReady,
  type Pod,
} from './apiservice.ts';
import {
  type ClusterManagementAddOn,
  cmaExists,
  type Lease,
  managerLeader,
  type WebhookConfiguration,
  webhookRegistered,
} from './manager.ts';
import { type AddonLayout, type CheckResult, defaultLayout, type Verdict } from './model.ts';
import { foundValue, type Read, Reads, readPath, sendAndRead } from './reads.ts';

export interface CheckDefinition {
  name: string;
  title: string;
  cluster?: string;
  /** Names of earlier checks (of the hub, or of the same cluster) this one means nothing without. */
  after: string[];
  run: () => Promise<Verdict>;
}

/** How long the proxied /healthz may take. */
export const doctorHealthzTimeoutMs = 5000;

const addonApi = '/apis/addon.open-cluster-management.io/v1alpha1';
const gatewayApi = '/apis/cluster.core.oam.dev/v1alpha1';
const q = encodeURIComponent;

/** Names and namespaces from the hub's objects: the APIService's Service, the chart's release namespace. */
export function layoutFrom(
  apiService: APIService | undefined,
  cma: ClusterManagementAddOn | undefined,
  base: AddonLayout = defaultLayout,
): AddonLayout {
  const svc = apiService?.spec?.service;
  const gatewayNamespace = svc?.namespace ?? base.gatewayNamespace;
  const release = cma?.metadata.annotations?.['meta.helm.sh/release-namespace'];
  return {
    ...base,
    gatewayNamespace,
    gatewayName: svc?.name ?? base.gatewayName,
    managerNamespace: release ?? gatewayNamespace,
  };
}

export interface DoctorPlan {
  layout: AddonLayout;
  clusters: string[];
  checks: CheckDefinition[];
  /** Why no cluster was found, when none was. */
  clusterNote?: string;
  /** Set when the hub did not answer or refused the credential: nothing can be checked. */
  connectionProblem: string | undefined;
}

/** Reads what decides the layout and the clusters, then defines every check (their reads start at once). */
export async function planDoctor(
  client: Pick<KubeClient, 'send'>,
  clusterArgs: string[],
): Promise<DoctorPlan> {
  const reads = new Reads(client);
  const l0 = defaultLayout;
  const [apiServiceRead, cmaRead, addonsRead, gatewaysRead] = await Promise.all([
    reads.get<APIService>(
      `/apis/apiregistration.k8s.io/v1/apiservices/${l0.apiServiceName}`,
      'get apiservices.apiregistration.k8s.io',
    ),
    reads.get<ClusterManagementAddOn>(
      `${addonApi}/clustermanagementaddons/${l0.addonName}`,
      'get clustermanagementaddons.addon.open-cluster-management.io',
    ),
    clusterArgs.length
      ? Promise.resolve(undefined)
      : reads.get<{ items: ManagedClusterAddOn[] }>(
          `${addonApi}/managedclusteraddons?fieldSelector=${q(`metadata.name=${l0.addonName}`)}`,
          'list managedclusteraddons.addon.open-cluster-management.io in all namespaces',
        ),
    clusterArgs.length
      ? Promise.resolve(undefined)
      : reads.get<{ items: ClusterGateway[] }>(
          `${gatewayApi}/clustergateways`,
          'list clustergateways.cluster.core.oam.dev',
        ),
  ]);
  const l = layoutFrom(foundValue(apiServiceRead), foundValue(cmaRead));

  let clusters = clusterArgs;
  let clusterNote: string | undefined;
  if (!clusterArgs.length) {
    const found = new Set<string>();
    for (const a of (addonsRead && foundValue(addonsRead)?.items) ?? []) found.add(a.metadata.namespace);
    for (const g of (gatewaysRead && foundValue(gatewaysRead)?.items) ?? []) found.add(g.metadata.name);
    clusters = [...found].sort();
    if (!clusters.length) {
      const why: string[] = [];
      for (const r of [addonsRead, gatewaysRead] as (Read<unknown> | undefined)[]) {
        if (r?.state === 'forbidden') why.push(`you may not ${r.permission}`);
        else if (r?.state === 'error') why.push(r.message);
      }
      clusterNote = `no cluster has the addon and the gateway serves none${why.length ? ` (${why.join('; ')})` : ''}: name clusters as arguments to check them`;
    }
  }

  // Hub reads, started now.
  const gatewayDeploymentPath = `/apis/apps/v1/namespaces/${l.gatewayNamespace}/deployments/${l.gatewayName}`;
  const gatewayDeployment = reads.get<Deployment>(
    gatewayDeploymentPath,
    `get deployments in ${l.gatewayNamespace}`,
  );
  const gatewayPods = gatewayDeployment.then((d) => {
    const labels = foundValue(d)?.spec?.selector?.matchLabels;
    const selector = labels
      ? Object.entries(labels)
          .map(([k, v]) => `${k}=${v}`)
          .join(',')
      : `app.kubernetes.io/component=gateway,app.kubernetes.io/name=${l.gatewayName}`;
    return reads.get<{ items: Pod[] }>(
      `/api/v1/namespaces/${l.gatewayNamespace}/pods?labelSelector=${q(selector)}`,
      `list pods in ${l.gatewayNamespace}`,
    );
  });
  const discovery = readPath<unknown>(client, `${gatewayApi}`, 'get /apis/cluster.core.oam.dev/v1alpha1');
  const managerLease = reads.get<Lease>(
    `/apis/coordination.k8s.io/v1/namespaces/${l.managerNamespace}/leases/${l.managerLeaseName}`,
    `get leases in ${l.managerNamespace}`,
  );
  const managerPods = reads.get<{ items: Pod[] }>(
    `/api/v1/namespaces/${l.managerNamespace}/pods?labelSelector=${q(l.managerSelector)}`,
    `list pods in ${l.managerNamespace}`,
  );
  const webhook = reads.get<WebhookConfiguration>(
    `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${l.webhookName}`,
    'get mutatingwebhookconfigurations.admissionregistration.k8s.io',
  );
  const selfReview = clusters.length
    ? sendAndRead<SelfSubjectReview>(
        client,
        'POST',
        '/apis/authentication.k8s.io/v1/selfsubjectreviews',
        { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
        'create selfsubjectreviews.authentication.k8s.io',
      )
    : Promise.resolve<Read<SelfSubjectReview>>({ state: 'missing', hubTime: Date.now() });

  const perCluster = clusters.map((c) => {
    const addon = reads.get<ManagedClusterAddOn>(
      `${addonApi}/namespaces/${q(c)}/managedclusteraddons/${l.addonName}`,
      `get managedclusteraddons.addon.open-cluster-management.io in ${c}`,
    );
    const works = reads.get<{ items: ManifestWork[] }>(
      `/apis/work.open-cluster-management.io/v1/namespaces/${q(c)}/manifestworks?labelSelector=${q(`open-cluster-management.io/addon-name=${l.addonName}`)}`,
      `list manifestworks.work.open-cluster-management.io in ${c}`,
    );
    const heartbeat = reads.get<HeartbeatLease>(
      `/apis/coordination.k8s.io/v1/namespaces/${q(c)}/leases/${l.addonName}`,
      `get leases in ${c}`,
    );
    const gateway = reads.get<ClusterGateway>(
      `${gatewayApi}/clustergateways/${q(c)}`,
      'get clustergateways.cluster.core.oam.dev',
    );
    const review = sendAndRead<AccessReview>(
      client,
      'POST',
      '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
      accessReviewBody(c),
      'create selfsubjectaccessreviews.authorization.k8s.io',
    );
    return { cluster: c, addon, works, heartbeat, gateway, review };
  });
  const healthModes = async () => {
    const modes: string[] = [];
    for (const p of perCluster) {
      const mode = foundValue(await p.addon)?.status?.healthCheck?.mode;
      if (mode) modes.push(mode);
    }
    return modes;
  };

  const checks: CheckDefinition[] = [
    {
      name: 'apiservice-exists',
      title: `APIService ${l.apiServiceName} exists`,
      after: [],
      run: async () => apiServiceExists(apiServiceRead, l),
    },
    {
      name: 'gateway-pods-ready',
      title: 'gateway pods ready',
      after: [],
      run: async () => gatewayPodsReady(await gatewayDeployment, await gatewayPods, l),
    },
    {
      name: 'apiservice-available',
      title: 'APIService Available',
      after: ['apiservice-exists', 'gateway-pods-ready'],
      run: async () =>
        apiServiceAvailable(
          apiServiceRead,
          l,
          apiServiceRead.state === 'found' ? apiServiceRead.hubTime : undefined,
        ),
    },
    {
      name: 'apiservice-cabundle',
      title: "caBundle verifies the gateway's certificate",
      after: ['apiservice-available'],
      run: async () => caBundleVerifies(apiServiceRead, await discovery, l),
    },
    {
      name: 'manager-leader',
      title: 'addon manager is leader',
      after: [],
      run: async () => managerLeader(await managerLease, await managerPods, l),
    },
    {
      name: 'manager-webhook',
      title: "manager's webhook registered",
      after: ['manager-leader'],
      run: async () => webhookRegistered(await webhook, await healthModes(), l),
    },
    {
      name: 'clustermanagementaddon',
      title: `ClusterManagementAddOn ${l.addonName} exists`,
      after: [],
      run: async () => cmaExists(cmaRead, l),
    },
  ];

  for (const p of perCluster) {
    const c = p.cluster;
    const agentAt = async () =>
      agentLocation(foundValue(await p.addon), foundValue(await p.works)?.items[0], l);
    const healthz = (async () => {
      const start = performance.now();
      const read = await readPath<unknown>(
        client,
        `${gatewayApi}/clustergateways/${q(c)}/proxy/healthz`,
        proxyPermissionText(c),
        doctorHealthzTimeoutMs,
      );
      return { read, milliseconds: Math.round(performance.now() - start) };
    })();
    checks.push(
      {
        name: 'addon-enabled',
        title: 'ManagedClusterAddOn exists',
        cluster: c,
        after: ['clustermanagementaddon'],
        run: async () => addonExists(c, await p.addon, foundValue(await p.gateway), l),
      },
      {
        name: 'manifestwork-applied',
        title: 'ManifestWork applied',
        cluster: c,
        after: ['addon-enabled'],
        run: async () => workApplied(c, await p.works, l),
      },
      {
        name: 'agent-running',
        title: 'agent runs',
        cluster: c,
        after: ['manifestwork-applied'],
        run: async () => agentRuns(c, await p.works, foundValue(await p.addon), await p.heartbeat, l),
      },
      {
        name: 'heartbeat-fresh',
        title: 'heartbeat Lease fresh',
        cluster: c,
        after: ['agent-running'],
        run: async () =>
          heartbeatFresh(c, await p.heartbeat, await agentAt(), foundValue(await p.gateway), l),
      },
      {
        name: 'tunnel-up',
        title: 'tunnel up',
        cluster: c,
        after: ['apiservice-cabundle'],
        run: async () => tunnelUp(c, await p.gateway, await agentAt()),
      },
      {
        name: 'proxy-permission',
        title: 'you may get clustergateways/proxy',
        cluster: c,
        after: [],
        run: async () => proxyAllowed(c, await p.review, await selfReview),
      },
      {
        name: 'proxied-healthz',
        title: 'proxied /healthz answers',
        cluster: c,
        after: ['apiservice-cabundle', 'tunnel-up', 'proxy-permission'],
        run: async () => {
          const h = await healthz;
          return healthzAnswers(c, h.read, h.milliseconds, foundValue(await p.gateway));
        },
      },
    );
  }
  return {
    layout: l,
    clusters,
    checks,
    connectionProblem: connectionProblem([apiServiceRead, cmaRead]),
    ...(clusterNote ? { clusterNote } : {}),
  };
}

function proxyPermissionText(cluster: string): string {
  return `get clustergateways.cluster.core.oam.dev/proxy on ${cluster}`;
}

/**
 * The hub did not answer at all, or refused the caller's credential: exit 2, not a failed check. Given the
 * first reads (the APIService and the ClusterManagementAddOn), which every caller who can reach the hub answers.
 */
export function connectionProblem(reads: Read<unknown>[]): string | undefined {
  const unauthorized = reads.find((r) => r.state === 'error' && r.code === 401);
  if (unauthorized?.state === 'error')
    return `the hub refused your credential (401): ${unauthorized.message}`;
  const unreachable = reads.filter((r) => r.state === 'error' && r.connection);
  if (reads.length > 0 && unreachable.length === reads.length) {
    const first = unreachable[0];
    return first?.state === 'error' ? first.message : undefined;
  }
  return undefined;
}

/**
 * Runs the checks at once and yields their results in order. A check whose dependency failed (or was skipped
 * as not applicable) is reported as skipped, naming the dependency.
 */
export async function* runChecks(checks: CheckDefinition[]): AsyncGenerator<CheckResult> {
  const started = checks.map((check) => {
    const start = performance.now();
    return check
      .run()
      .catch(
        (err: unknown): Verdict => ({
          result: 'fail',
          message: `the check could not run: ${err instanceof Error ? err.message : String(err)}`,
          object: check.cluster ? `cluster ${check.cluster}` : 'the hub',
          fix: 'retry; if it stays, report it with this output',
        }),
      )
      .then((verdict) => ({ verdict, durationMs: Math.round(performance.now() - start) }));
  });
  const done = new Map<string, { result: CheckResult; blocks: boolean }>();
  const key = (name: string, cluster?: string) => `${cluster ?? ''}/${name}`;
  for (const [i, check] of checks.entries()) {
    const { verdict, durationMs } = await (started[i] as Promise<{ verdict: Verdict; durationMs: number }>);
    const blocking = check.after
      .map((name) => ({ name, dep: done.get(key(name, check.cluster)) ?? done.get(key(name)) }))
      .find((d) => d.dep?.blocks);
    let result: CheckResult;
    if (blocking) {
      const dep = blocking.dep?.result;
      result = {
        name: check.name,
        ...(check.cluster ? { cluster: check.cluster } : {}),
        result: 'skipped',
        message: `skipped: ${checkTitle(checks, blocking.name)} ${dep?.result === 'fail' ? 'failed' : 'was skipped'}`,
        durationMs,
      };
    } else {
      result = {
        name: check.name,
        ...(check.cluster ? { cluster: check.cluster } : {}),
        result: verdict.result,
        message: verdict.message,
        ...(verdict.object ? { object: verdict.object } : {}),
        ...(verdict.fix ? { fix: verdict.fix } : {}),
        durationMs,
      };
    }
    const blocks =
      result.result === 'fail' ||
      (result.result === 'skipped' && (blocking !== undefined || verdict.cascade === true));
    done.set(key(check.name, check.cluster), { result, blocks });
    yield result;
  }
}

export function checkTitle(checks: CheckDefinition[], name: string): string {
  return checks.find((c) => c.name === name)?.title ?? name;
}

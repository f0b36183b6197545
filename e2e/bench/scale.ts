/**
 * Scale benchmark (`npm run bench:scale`): one gateway with thousands of
 * clusters registered.
 *
 * Starts its own local environment (hub, cluster1 and cluster2, the gateway
 * as the environment starts it: --health-check-interval=2) in .local/bench-scale,
 * measures it with its two clusters, then for each count N (default 1000,
 * then 5000) registers N more clusters that point at cluster1's real
 * kube-apiserver under distinct names, and reports what follows. With
 * --layout=ocm (the default, what an OCM hub holds) each is a ManagedCluster
 * (accepted, joined and available, cluster1's URL and CA in
 * managedClusterClientConfigs) plus a credential Secret holding only
 * cluster1's token; with --layout=secrets each is a credential Secret alone
 * (a copy of cluster1's with its endpoint and CA):
 *
 *   - registration: time until the gateway lists all of them, until all
 *     read healthy, and until its prober has probed each one once (the
 *     gateway's cluster_gateway_health_clusters{state="unprobed"} is 0);
 *   - at rest (once all are probed, after a settle period, over --idle seconds): the gateway's RSS,
 *     its V8 heap in use and committed and its external memory (its /metrics) and peak RSS, its CPU (share of one core), the hub API requests the
 *     gateway's ServiceAccount made per minute and the /healthz probes
 *     cluster1 received per minute (both from the audit logs), the gateway's
 *     open connections to cluster1;
 *   - `kubectl get clustergateways` through the aggregator (median of 5);
 *   - proxied GET /api/v1/namespaces/default on cluster1, straight to the
 *     gateway with the front-proxy certificate, one at a time for
 *     --latency-seconds: p50, p99, max (a probe-round stall shows in max);
 *   - a restart: the gateway stopped and started again with the same flags
 *     plus --reject-unhealthy: time to /readyz, time until every cluster
 *     reads healthy and until each was probed again, the most clusters seen reading unhealthy (not unknown)
 *     meanwhile, and proxied GETs answered 503 meanwhile;
 *   - after deleting the N clusters (from the restarted gateway): connections to cluster1 and RSS
 *     just before, 5 s and 45 s later (pools idle out after 30 s), and V8's heap and external memory.
 *
 * Flags: --counts=1000,5000 --layout=ocm|secrets --idle=30 --latency-seconds=10 --settle=15 --keep
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { auditLogPath } from '../../hack/localenv/apiserver.ts';
import { builtBinDir, repoRoot } from '../../hack/localenv/binaries.ts';
import { type Environment, startEnvironment } from '../../hack/localenv/environment.ts';
import { credentialNamespace } from '../../hack/localenv/gateway.ts';
import type { ManagedProcess } from '../../hack/localenv/supervisor.ts';
import type { KubeClient, KubeObject } from '../../shared/kube/client.ts';
import { loadKubeconfig } from '../../shared/kube/kubeconfig.ts';
import { eventLoopSamplingMs } from '../../shared/process-metrics.ts';
import { auditSince, connectionsTo, cpuUsage, fileEnd, median, percentile, rssKb } from './measure.ts';

const stateDir = path.join(repoRoot, '.local', 'bench-scale');
const group = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways';
const benchLabel = 'bench.cluster-gateway.local/scale';
const gatewayUser = 'system:serviceaccount:cluster-gateway-system:cluster-gateway';

type Layout = 'ocm' | 'secrets';

interface Flags {
  counts: number[];
  layout: Layout;
  idle: number;
  latencySeconds: number;
  settle: number;
  keep: boolean;
}

function parseFlags(argv: string[]): Flags {
  const flags: Flags = {
    counts: [1000, 5000],
    layout: 'ocm',
    idle: 30,
    latencySeconds: 10,
    settle: 15,
    keep: false,
  };
  for (const arg of argv) {
    const [name, value = ''] = arg.replace(/^--/, '').split('=', 2) as [string, string | undefined];
    const positive = (v: string) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1) throw new Error(`bad value in ${arg}`);
      return n;
    };
    if (name === 'keep') flags.keep = true;
    else if (name === 'counts') flags.counts = value.split(',').map(positive);
    else if (name === 'layout' && (value === 'ocm' || value === 'secrets')) flags.layout = value;
    else if (name === 'idle') flags.idle = positive(value);
    else if (name === 'latency-seconds') flags.latencySeconds = positive(value);
    else if (name === 'settle') flags.settle = positive(value);
    else
      throw new Error(
        `unknown flag ${arg}; use --counts=1000,5000 --layout=ocm|secrets --idle=S --latency-seconds=S --settle=S --keep`,
      );
  }
  return flags;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);

/** One GET, its body read whole; no answer in 30 s is an error. */
function httpsGet(
  agent: https.Agent,
  url: URL,
  headers: Record<string, string>,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, { agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.setTimeout(30_000, () => req.destroy(new Error(`GET ${url.pathname}: no answer in 30 s`)));
    req.on('error', reject);
    req.end();
  });
}

/** Talks to the gateway directly, as the aggregator does (front-proxy certificate, X-Remote-* headers). */
class GatewayCaller {
  readonly agent: https.Agent;
  url: string;

  constructor(url: string) {
    this.url = url;
    this.agent = new https.Agent({
      keepAlive: true,
      maxSockets: 4,
      ca: readFileSync(path.join(stateDir, 'hub', 'ca.crt')),
      cert: readFileSync(path.join(stateDir, 'hub', 'front-proxy-client.crt')),
      key: readFileSync(path.join(stateDir, 'hub', 'front-proxy-client.key')),
    });
  }

  get(pathname: string): Promise<{ status: number; body: string }> {
    return httpsGet(this.agent, new URL(pathname, this.url), {
      'X-Remote-User': 'admin',
      'X-Remote-Group': 'system:masters',
      accept: 'application/json',
    });
  }

  async list(): Promise<{ name: string; healthy: boolean; reason: string }[]> {
    const { status, body } = await this.get(group);
    if (status !== 200) throw new Error(`LIST clustergateways: ${status} ${body.slice(0, 300)}`);
    const list = JSON.parse(body) as {
      items: { metadata: { name: string }; status?: { healthy?: boolean; healthyReason?: string } }[];
    };
    return list.items.map((i) => ({
      name: i.metadata.name,
      healthy: i.status?.healthy === true,
      reason: i.status?.healthyReason ?? '',
    }));
  }

  /** One sample of the gateway's own /metrics, e.g. `nodejs_heap_size_used_bytes`. */
  async metric(series: string): Promise<number | undefined> {
    try {
      const { status, body } = await this.get('/metrics');
      const line = body.split('\n').find((l) => l.startsWith(`${series} `));
      return status === 200 && line ? Number(line.slice(series.length + 1)) : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * V8's heap in use and committed, and the memory V8 counts outside it (Buffers, TLS and other
   * native objects it knows of), in MB: what of the gateway's RSS is JavaScript, what V8 keeps
   * reserved, and what is native memory V8 does not see (RSS minus the two).
   */
  async memoryMb(): Promise<Memory> {
    const mb = async (series: string) => {
      const bytes = await this.metric(series);
      return bytes === undefined ? undefined : bytes / 1024 / 1024;
    };
    return {
      heapUsed: await mb('nodejs_heap_size_used_bytes'),
      heapTotal: await mb('nodejs_heap_size_total_bytes'),
      external: await mb('nodejs_external_memory_bytes'),
      spaces: await this.heapSpaces(),
    };
  }

  /** V8's committed heap by space, largest first, in MB, e.g. `old 31, large_object 9, new 6`. */
  async heapSpaces(): Promise<string> {
    const prefix = 'nodejs_heap_space_size_total_bytes{space="';
    try {
      const { status, body } = await this.get('/metrics');
      if (status !== 200) return '—';
      const spaces = body
        .split('\n')
        .filter((l) => l.startsWith(prefix))
        .map((l) => {
          const [space = '', value = ''] = l.slice(prefix.length).split('"} ');
          return { space, mb: Number(value) / 1024 / 1024 };
        })
        .filter((s) => s.mb >= 0.5)
        .sort((a, b) => b.mb - a.mb);
      return spaces.map((s) => `${s.space} ${s.mb.toFixed(0)}`).join(', ') || '—';
    } catch {
      return '—';
    }
  }

  /**
   * Garbage collections of the gateway that took 10 ms or more, and 100 ms or more, since it
   * started, of any kind (prom-client's nodejs_gc_duration_seconds, buckets 1, 10, 100 ms...). Its
   * /metrics is read once here, which also restarts the event-loop delay window.
   */
  async gcPauses(): Promise<{ over10ms: number; over100ms: number }> {
    const { body } = await this.get('/metrics');
    const counts = { all: 0, le10ms: 0, le100ms: 0 };
    for (const line of body.split('\n')) {
      if (!line.startsWith('nodejs_gc_duration_seconds_bucket{')) continue;
      const value = Number(line.slice(line.lastIndexOf(' ') + 1));
      if (line.includes('le="+Inf"')) counts.all += value;
      else if (line.includes('le="0.01"')) counts.le10ms += value;
      else if (line.includes('le="0.1"')) counts.le100ms += value;
    }
    return { over10ms: counts.all - counts.le10ms, over100ms: counts.all - counts.le100ms };
  }

  /** Clusters the gateway's prober has not probed yet. */
  unprobed(): Promise<number | undefined> {
    return this.metric('cluster_gateway_health_clusters{state="unprobed"}');
  }

  async ready(): Promise<boolean> {
    try {
      return (await this.get('/readyz')).status === 200;
    } catch {
      return false;
    }
  }
}

interface Memory {
  heapUsed: number | undefined;
  heapTotal: number | undefined;
  external: number | undefined;
  /** Committed heap by space (heapSpaces()). */
  spaces: string;
}

interface Rest {
  rssMb: number;
  memory: Memory;
  peakMb: number;
  cpuPercent: number;
  hubCallsPerMin: number;
  hubCallsDetail: string;
  probesPerMin: number;
  connections: number;
}

/** The gateway at rest, over `seconds`: CPU share, hub API calls and cluster1 probes per minute (audit logs). */
async function atRest(
  gatewayPid: number,
  caller: GatewayCaller,
  cluster1Port: number,
  seconds: number,
): Promise<Rest> {
  const hubAudit = auditLogPath(stateDir, 'hub');
  const c1Audit = auditLogPath(stateDir, 'cluster1');
  const hubFrom = fileEnd(hubAudit);
  const c1From = fileEnd(c1Audit);
  const cpuBefore = cpuUsage(gatewayPid).cpuMs;
  const started = performance.now();
  await sleep(seconds * 1000);
  const elapsedMin = (performance.now() - started) / 60_000;
  const cpuMs = cpuUsage(gatewayPid).cpuMs - cpuBefore;
  const hub = auditSince(hubAudit, hubFrom).events.filter((e) => e.user.username === gatewayUser);
  const byKind = new Map<string, number>();
  for (const e of hub) {
    const key = `${e.verb} ${e.objectRef?.resource ?? e.requestURI}`;
    byKind.set(key, (byKind.get(key) ?? 0) + 1);
  }
  const probes = auditSince(c1Audit, c1From).events.filter(
    (e) => e.requestURI === '/healthz' && e.verb === 'get',
  ).length;
  return {
    rssMb: rssKb(gatewayPid) / 1024,
    memory: await caller.memoryMb(),
    peakMb: rssKb(gatewayPid, 'VmHWM') / 1024,
    cpuPercent: (cpuMs / (elapsedMin * 60_000)) * 100,
    hubCallsPerMin: hub.length / elapsedMin,
    hubCallsDetail: [...byKind].map(([k, v]) => `${k}: ${v}`).join(', ') || 'none',
    probesPerMin: probes / elapsedMin,
    connections: await connectionsTo(gatewayPid, cluster1Port),
  };
}

/** GET on cluster1's kube-apiserver itself, with its admin certificate: the environment's own latency. */
class DirectCaller {
  readonly agent: https.Agent;
  readonly server: string;

  constructor(kubeconfig: string) {
    const { server, options } = loadKubeconfig(kubeconfig);
    this.server = server;
    const { ca, cert, key } = options;
    this.agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca, cert, key });
  }

  async get(pathname: string): Promise<number> {
    return (await httpsGet(this.agent, new URL(pathname, this.server), {})).status;
  }
}

interface Latencies {
  n: number;
  p50: number;
  p99: number;
  max: number;
}

function summarize(latencies: number[]): Latencies {
  const sorted = Float64Array.from(latencies).sort();
  return {
    n: sorted.length,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted[sorted.length - 1] ?? Number.NaN,
  };
}

/**
 * Proxied GETs to cluster1, one at a time, for `seconds`, each followed by the same GET straight
 * to cluster1: a max the direct column shares is the machine's, not the gateway's. Over the same
 * window, from the gateway's /metrics: its event loop's longest stall (prom-client's
 * monitorEventLoopDelay, reset by each scrape, so the scrape before the window starts it) and its
 * garbage collections of 10 ms or more; and its main thread's run-queue wait (/proc schedstat).
 */
async function proxiedLatency(
  caller: GatewayCaller,
  direct: DirectCaller,
  gatewayPid: number,
  seconds: number,
) {
  const objectPath = '/api/v1/namespaces/default';
  const proxied: number[] = [];
  const straight: number[] = [];
  const gcBefore = await caller.gcPauses();
  const waitBefore = cpuUsage(gatewayPid).waitMs;
  const until = performance.now() + seconds * 1000;
  while (performance.now() < until) {
    let started = performance.now();
    const { status, body } = await caller.get(`${group}/cluster1/proxy${objectPath}`);
    proxied.push(performance.now() - started);
    if (status !== 200) throw new Error(`proxied GET answered ${status}: ${body.slice(0, 300)}`);
    started = performance.now();
    const directStatus = await direct.get(objectPath);
    straight.push(performance.now() - started);
    if (directStatus !== 200) throw new Error(`direct GET answered ${directStatus}`);
  }
  // The histogram records whole sampling periods: a stall of S ms reads between S and S + the period.
  const lagMax = (await caller.metric('nodejs_eventloop_lag_max_seconds')) ?? Number.NaN;
  const lagMaxMs = Math.max(0, lagMax * 1000 - eventLoopSamplingMs);
  const gcAfter = await caller.gcPauses();
  return {
    ...summarize(proxied),
    direct: summarize(straight),
    lagMaxMs,
    gcOver10ms: gcAfter.over10ms - gcBefore.over10ms,
    gcOver100ms: gcAfter.over100ms - gcBefore.over100ms,
    runQueueWaitMs: cpuUsage(gatewayPid).waitMs - waitBefore,
  };
}

/** `kubectl get clustergateways` through the aggregator: median wall time of 5, in ms. */
function kubectlGet(hubKubeconfig: string): number {
  const kubectl = path.join(builtBinDir, 'kubectl');
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const started = performance.now();
    execFileSync(kubectl, ['--kubeconfig', hubKubeconfig, 'get', 'clustergateways', '--no-headers'], {
      stdio: ['ignore', 'ignore', 'inherit'],
      maxBuffer: 64 * 1024 * 1024,
    });
    times.push(performance.now() - started);
  }
  return median(times);
}

/** Waits until `check` passes, polling; returns the time it took (ms). */
async function timeUntil(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs = 600_000,
  describe?: () => Promise<string>,
): Promise<number> {
  const started = performance.now();
  while (!(await check().catch(() => false))) {
    if (performance.now() - started > timeoutMs) {
      const detail = describe ? `: ${await describe().catch((err: Error) => err.message)}` : '';
      throw new Error(`timed out waiting for ${what}${detail}`);
    }
    await sleep(100);
  }
  return performance.now() - started;
}

type SecretObject = KubeObject & { data: Record<string, string> };
const managedClusters = '/apis/cluster.open-cluster-management.io/v1/managedclusters';

/**
 * What each registered cluster copies from cluster1: its credential Secret holds only its token
 * (the OCM layout: the endpoint comes from the ManagedCluster), so the Secret-only layout adds
 * cluster1's URL and CA to the copies.
 */
async function clusterTemplate(
  hub: KubeClient,
): Promise<{ tokenSecret: SecretObject; fullSecret: SecretObject; url: string; caBundle: string }> {
  const secret = await hub.get<SecretObject>(`/api/v1/namespaces/${credentialNamespace}/secrets/cluster1`);
  const mc = await hub.get<
    KubeObject & { spec: { managedClusterClientConfigs: { url: string; caBundle: string }[] } }
  >(`${managedClusters}/cluster1`);
  const config = mc.spec.managedClusterClientConfigs[0];
  if (!config) throw new Error('ManagedCluster cluster1 has no managedClusterClientConfigs');
  return {
    tokenSecret: secret,
    fullSecret: {
      ...secret,
      data: {
        ...secret.data,
        endpoint: Buffer.from(config.url).toString('base64'),
        'ca.crt': config.caBundle,
      },
    },
    url: config.url,
    caBundle: config.caBundle,
  };
}

type Template = Awaited<ReturnType<typeof clusterTemplate>>;

async function registerClusters(
  hub: KubeClient,
  template: Template,
  layout: Layout,
  count: number,
): Promise<void> {
  const ns = credentialNamespace;
  const secret = layout === 'ocm' ? template.tokenSecret : template.fullSecret;
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const condition = (type: string, reason: string) => ({
    type,
    status: 'True',
    reason,
    message: 'registered by the scale benchmark',
    lastTransitionTime: now,
  });
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const name = `scale-${String(i).padStart(5, '0')}`;
      if (layout === 'ocm') {
        // Accepted, joined and available, as the registration agent and the hub leave a healthy cluster.
        // A lease of an hour: the hub's lease controller would mark it Unknown 5 lease durations
        // after the last renewal, and no agent renews these.
        await hub.create(managedClusters, {
          apiVersion: 'cluster.open-cluster-management.io/v1',
          kind: 'ManagedCluster',
          metadata: { name, labels: { [benchLabel]: 'true' } },
          spec: {
            hubAcceptsClient: true,
            leaseDurationSeconds: 3600,
            managedClusterClientConfigs: [{ url: template.url, caBundle: template.caBundle }],
          },
        } as KubeObject);
        await hub.mergePatch(`${managedClusters}/${name}/status`, {
          status: {
            conditions: [
              condition('ManagedClusterJoined', 'ManagedClusterJoined'),
              condition('ManagedClusterConditionAvailable', 'ManagedClusterAvailable'),
            ],
          },
        });
      }
      await hub.create(`/api/v1/namespaces/${ns}/secrets`, {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name, namespace: ns, labels: { ...secret.metadata?.labels, [benchLabel]: 'true' } },
        type: secret.type,
        data: secret.data,
      } as KubeObject);
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
}

/** Deletes what registerClusters made; the hub's cleanup finalizers are dropped so the benchmark need not wait for them. */
async function deleteClusters(hub: KubeClient, layout: Layout): Promise<void> {
  const selector = `labelSelector=${encodeURIComponent(`${benchLabel}=true`)}`;
  await hub.request('DELETE', `/api/v1/namespaces/${credentialNamespace}/secrets?${selector}`);
  if (layout !== 'ocm') return;
  await hub.request('DELETE', `${managedClusters}?${selector}`);
  const list = await hub.get<{ items: KubeObject[] }>(`${managedClusters}?${selector}`);
  let next = 0;
  const worker = async () => {
    while (next < list.items.length) {
      const name = list.items[next++]?.metadata?.name;
      if (name)
        await hub
          .mergePatch(`${managedClusters}/${name}`, { metadata: { finalizers: null } })
          .catch(() => {});
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
}

interface Restart {
  readyMs: number;
  allHealthyMs: number;
  /** Until the prober had probed every cluster once. */
  allProbedMs: number;
  maxUnhealthy: number;
  rejected: number;
  proxiedDuring: number;
}

/**
 * Stops the gateway and starts it again on the same port (the APIService
 * keeps working), with --reject-unhealthy added; watches the clusters'
 * health and proxies to the last registered one until all read healthy.
 */
async function restartGateway(
  env: Environment,
  current: ManagedProcess,
  caller: GatewayCaller,
  expected: number,
  probeCluster: string,
  generation: number,
): Promise<{ process: ManagedProcess; result: Restart }> {
  const args = current.child.spawnargs.slice(1).filter((a) => !a.startsWith('--reject-unhealthy'));
  await current.stop();
  const started = performance.now();
  const next = env.supervisor.start(`hub-cluster-gateway-restart-${generation}`, process.execPath, {
    args: [...args, '--reject-unhealthy=true'],
  });
  await timeUntil('the restarted gateway to be ready', async () => {
    next.assertRunning();
    return caller.ready();
  });
  const readyMs = performance.now() - started;
  let maxUnhealthy = 0;
  let rejected = 0;
  let proxied = 0;
  let stopProxying = false;
  const proxying = (async () => {
    let done = false;
    while (!done) {
      const { status } = await caller.get(`${group}/${probeCluster}/proxy/api/v1/namespaces/default`);
      proxied++;
      if (status === 503) rejected++;
      done = stopProxying;
    }
  })();
  // Until every cluster reads healthy and the prober has probed each one since the restart: a
  // verdict it reaches from incomplete data would show meanwhile (maxUnhealthy).
  let allHealthyMs: number | undefined;
  await timeUntil(
    'every cluster to read healthy, and be probed, after the restart',
    async () => {
      const items = await caller.list();
      const unhealthy = items.filter((i) => !i.healthy && !i.reason.startsWith('Unknown:')).length;
      maxUnhealthy = Math.max(maxUnhealthy, unhealthy);
      const healthy = items.length === expected && items.every((i) => i.healthy);
      if (healthy) allHealthyMs ??= performance.now() - started;
      else allHealthyMs = undefined;
      return healthy && (await caller.unprobed()) === 0;
    },
    600_000,
  );
  const allProbedMs = performance.now() - started;
  stopProxying = true;
  await proxying;
  return {
    process: next,
    result: {
      readyMs,
      allHealthyMs: allHealthyMs ?? allProbedMs,
      allProbedMs,
      maxUnhealthy,
      rejected,
      proxiedDuring: proxied,
    },
  };
}

// ---------------------------------------------------------------------------

const flags = parseFlags(process.argv.slice(2));
const env = await startEnvironment({
  stateDir,
  managedClusters: ['cluster1', 'cluster2'],
  log: (line) => process.stderr.write(`[bench env] ${line}\n`),
}).catch((err: Error) => {
  console.error(`\nthe environment did not start: ${err.message}`);
  process.exit(1);
});

interface Row {
  label: string;
  registerMs?: number;
  listedMs?: number;
  healthyMs?: number;
  probedMs?: number;
  rest: Rest;
  kubectlMs: number;
  latency: Awaited<ReturnType<typeof proxiedLatency>>;
  restart?: Restart;
  afterDelete?: {
    connections5s: number;
    connections45s: number;
    rss5s: number;
    rssBefore: number;
    rss45s: number;
    memory45s: Memory;
  };
}

let failed = false;
try {
  const gateway = env.gateway;
  const cluster1 = env.managed.find((c) => c.name === 'cluster1');
  if (!gateway || !cluster1) throw new Error('the environment has no gateway or no cluster1');
  const cluster1Port = Number(new URL(cluster1.server).port);
  const hub = env.hub.client;
  const caller = new GatewayCaller(gateway.url);
  const direct = new DirectCaller(cluster1.kubeconfig);
  let gatewayProcess = gateway.process;
  const template = await clusterTemplate(hub);
  const base = 2;
  const rows: Row[] = [];

  const measure = async (label: string, expected: number): Promise<Omit<Row, 'label'>> => {
    log(`${label}: settling ${flags.settle} s, then ${flags.idle} s at rest`);
    await sleep(flags.settle * 1000);
    const rest = await atRest(gatewayProcess.pid, caller, cluster1Port, flags.idle);
    log(`${label}: kubectl get clustergateways ×5`);
    const kubectlMs = kubectlGet(env.hub.kubeconfig);
    log(`${label}: proxied GETs for ${flags.latencySeconds} s`);
    const latency = await proxiedLatency(caller, direct, gatewayProcess.pid, flags.latencySeconds);
    const listed = (await caller.list()).length;
    if (listed !== expected)
      throw new Error(`${label}: the gateway lists ${listed} clusters, not ${expected}`);
    return { rest, kubectlMs, latency };
  };

  await timeUntil('both clusters healthy', async () => (await caller.list()).every((i) => i.healthy));
  rows.push({ label: `${base} clusters`, ...(await measure(`${base} clusters`, base)) });

  let generation = 0;
  for (const count of flags.counts) {
    const total = base + count;
    const label = `${total} clusters`;
    log(
      `${label}: registering ${count} clusters (${flags.layout === 'ocm' ? 'ManagedClusters and token Secrets' : 'Secrets'})`,
    );
    const started = performance.now();
    const listedWatch = timeUntil(`the gateway to list ${total} clusters`, async () => {
      return (await caller.list()).length === total;
    });
    await registerClusters(hub, template, flags.layout, count);
    const registerMs = performance.now() - started;
    await listedWatch;
    const listedMs = performance.now() - started;
    await timeUntil(
      `all ${total} clusters healthy`,
      async () => (await caller.list()).every((i) => i.healthy),
      600_000,
      async () => {
        const sick = (await caller.list()).filter((i) => !i.healthy);
        return `${sick.length} not healthy, e.g. ${sick[0]?.name}: ${sick[0]?.reason}`;
      },
    );
    const healthyMs = performance.now() - started;
    // At rest means after every cluster's first probe: ManagedClusters read healthy from their
    // condition before it, and the first round (TLS contexts, full handshakes) is not the steady state.
    await timeUntil(`all ${total} clusters probed`, async () => (await caller.unprobed()) === 0, 600_000);
    const probedMs = performance.now() - started;
    const row: Row = { label, registerMs, listedMs, healthyMs, probedMs, ...(await measure(label, total)) };

    log(`${label}: restarting the gateway`);
    const restarted = await restartGateway(
      env,
      gatewayProcess,
      caller,
      total,
      `scale-${String(count - 1).padStart(5, '0')}`,
      ++generation,
    );
    gatewayProcess = restarted.process;
    row.restart = restarted.result;

    log(`${label}: deleting the ${count} clusters`);
    const rssBefore = rssKb(gatewayProcess.pid) / 1024;
    await deleteClusters(hub, flags.layout);
    await timeUntil(
      `the gateway to list ${base} clusters`,
      async () => (await caller.list()).length === base,
    );
    await sleep(5_000);
    const connections5s = await connectionsTo(gatewayProcess.pid, cluster1Port);
    const rss5s = rssKb(gatewayProcess.pid) / 1024;
    await sleep(40_000);
    row.afterDelete = {
      connections5s,
      rss5s,
      connections45s: await connectionsTo(gatewayProcess.pid, cluster1Port),
      rssBefore,
      rss45s: rssKb(gatewayProcess.pid) / 1024,
      memory45s: await caller.memoryMb(),
    };
    rows.push(row);
  }

  const f0 = (v: number | undefined) => (v === undefined ? '—' : v.toFixed(0));
  const f1 = (v: number | undefined) => (v === undefined ? '—' : v.toFixed(1));
  const s1 = (ms: number | undefined) => (ms === undefined ? '—' : (ms / 1000).toFixed(1));
  const memory = (m: Memory) => `${f0(m.heapUsed)} / ${f0(m.heapTotal)}, ${f0(m.external)}`;
  const row = (name: string, cell: (r: Row) => string) => `| ${name} | ${rows.map(cell).join(' | ')} |`;
  const table = [
    `| figure | ${rows.map((r) => r.label).join(' | ')} |`,
    `|---|${rows.map(() => '---:').join('|')}|`,
    row(`${flags.layout === 'ocm' ? 'ManagedClusters and Secrets' : 'Secrets'} created in (s)`, (r) =>
      s1(r.registerMs),
    ),
    row('all listed by the gateway after (s)', (r) => s1(r.listedMs)),
    row('all healthy after (s)', (r) => s1(r.healthyMs)),
    row('all probed once after (s)', (r) => s1(r.probedMs)),
    row('RSS at rest (MB)', (r) => f0(r.rest.rssMb)),
    row('V8 heap used / committed, external at rest (MB)', (r) => memory(r.rest.memory)),
    row('V8 committed by space at rest (MB)', (r) => r.rest.memory.spaces),
    row('peak RSS so far (MB)', (r) => f0(r.rest.peakMb)),
    row('idle CPU (% of a core)', (r) => f1(r.rest.cpuPercent)),
    row('/healthz probes on cluster1 per min', (r) => f0(r.rest.probesPerMin)),
    row('hub API calls per min (gateway SA)', (r) => f1(r.rest.hubCallsPerMin)),
    row('open connections to cluster1', (r) => String(r.rest.connections)),
    row('`kubectl get clustergateways` median (ms)', (r) => f0(r.kubectlMs)),
    row('proxied GET p50 (ms)', (r) => r.latency.p50.toFixed(2)),
    row('proxied GET p99 (ms)', (r) => r.latency.p99.toFixed(2)),
    row('proxied GET max (ms)', (r) => r.latency.max.toFixed(2)),
    row('proxied GETs measured', (r) => String(r.latency.n)),
    row('direct GET to cluster1 p50 / p99 / max (ms), interleaved', (r) =>
      [r.latency.direct.p50, r.latency.direct.p99, r.latency.direct.max].map((v) => v.toFixed(2)).join(' / '),
    ),
    row(`gateway meanwhile: longest event-loop stall (ms, up to ${eventLoopSamplingMs} more)`, (r) =>
      f0(r.latency.lagMaxMs),
    ),
    row(
      'gateway meanwhile: GCs ≥ 10 ms / ≥ 100 ms',
      (r) => `${r.latency.gcOver10ms} / ${r.latency.gcOver100ms}`,
    ),
    row('gateway meanwhile: main thread waiting for a CPU (ms)', (r) => f0(r.latency.runQueueWaitMs)),
    row('restart: ready after (s)', (r) => s1(r.restart?.readyMs)),
    row('restart: all healthy after (s)', (r) => s1(r.restart?.allHealthyMs)),
    row('restart: all probed after (s)', (r) => s1(r.restart?.allProbedMs)),
    row('restart: most clusters read unhealthy (not unknown)', (r) => String(r.restart?.maxUnhealthy ?? '—')),
    row('restart: 503s / proxied GETs (--reject-unhealthy)', (r) =>
      r.restart ? `${r.restart.rejected} / ${r.restart.proxiedDuring}` : '—',
    ),
    row('deleted: connections to cluster1 after 5 s / 45 s', (r) =>
      r.afterDelete ? `${r.afterDelete.connections5s} / ${r.afterDelete.connections45s}` : '—',
    ),
    row('deleted: RSS before / after 5 s / 45 s (MB)', (r) =>
      r.afterDelete
        ? `${f0(r.afterDelete.rssBefore)} / ${f0(r.afterDelete.rss5s)} / ${f0(r.afterDelete.rss45s)}`
        : '—',
    ),
    row('deleted: V8 heap used / committed, external after 45 s (MB)', (r) =>
      r.afterDelete ? memory(r.afterDelete.memory45s) : '—',
    ),
    row('deleted: V8 committed by space after 45 s (MB)', (r) => r.afterDelete?.memory45s.spaces ?? '—'),
  ];
  console.log(`\n${table.join('\n')}\n`);
  console.log('hub API calls by the gateway at rest, per window:');
  for (const r of rows) console.log(`  ${r.label}: ${r.rest.hubCallsDetail}`);

  if (flags.keep) {
    console.log(`\n--keep: the environment stays up until Ctrl-C (hub kubeconfig ${env.hub.kubeconfig}).`);
    await new Promise(() => {});
  }
} catch (err) {
  failed = true;
  console.error(`\nbenchmark failed: ${(err as Error).stack ?? err}`);
} finally {
  if (!flags.keep || failed) {
    await env.stop();
    process.exit(failed ? 1 : 0);
  }
}

/**
 * Gateway replicas (`npm run bench:replicas`): does the gateway's capacity grow with its replicas?
 *
 * Starts its own local environment with a real node per cluster (hub + cluster1, in
 * .local/bench-replicas). As `npm start` does, the environment runs no gateway of its own (only
 * cluster1's credential Secret): the hub's APIService is the chart's alone, so every request through the
 * aggregator reaches the pods measured, and no other gateway takes a share of the cores. It adds
 * --clusters credential Secrets, copies of cluster1's with its URL and CA, so a LIST carries that many
 * ClusterGateways and the gateway probes that many healthy clusters, then `helm install`s
 * charts/cluster-gateway in open-cluster-management-addon with the node values of hack/localenv/chart.ts
 * (the image built here) but the chart's own log levels and probe interval. The manager deploys the
 * gateway pods on the hub's node and registers the APIService at their Service once one serves.
 *
 * For each replica count (helm upgrade with gateway.replicas=N; then exactly N gateway pods Ready and no
 * other left, the Service's EndpointSlices listing those N, the APIService at the chart's Service and
 * Available; then 10 s for the new pods' start-up work), --idle seconds without load (each pod's CPU at
 * rest: health probes, informers, leases), then four cells of the same load:
 *   get    GET  /apis/cluster.core.oam.dev/v1alpha1/clustergateways/cluster1
 *   list   LIST /apis/cluster.core.oam.dev/v1alpha1/clustergateways (clusters + 1 objects)
 * each
 *   aggregator  through the hub's kube-apiserver (its URL, the admin client certificate); the aggregator
 *               picks a gateway pod per request among the Service's endpoints (--enable-aggregator-routing);
 *   direct      straight to the pod IPs, round-robin per request, authenticated as the aggregator is (the
 *               hub's front-proxy client certificate, X-Remote-User: admin, X-Remote-Group:
 *               system:masters); the serving certificate checked against the manager's CA for the
 *               Service's DNS name, as the aggregator checks it.
 * --concurrency requests in flight on keep-alive connections, --warmup seconds unmeasured, then --seconds
 * measured. The replica counts are gone through --reps times (1, 2, 3, 1, 2, 3, ...: helm upgrade scales
 * down too), and the table gives the medians: other work on a shared machine comes in bursts, which then
 * spoil one repetition of a cell, not the figure.
 *
 * Per cell: req/s; p50/p99 latency (request sent to last body byte); gateway CPU per request (utime + stime
 * of every process of every gateway container over the measured window, 10 ms ticks, / requests), also net
 * of the pods' CPU at rest; the hub kube-apiserver's CPU per request; the load generator's own; how busy
 * the machine's cores were (/proc/stat) and how much of that was none of these three (etcd, cluster1's
 * apiserver, kubelets, or anything else running: the log names the largest); each pod's share: of the
 * requests (direct: counted here) and of the gateway's CPU net of rest (the gateway counts no requests to
 * its own API, so for the aggregator rows that is the only view of how it spread them).
 *
 * On a machine with few cores (the one this was written on has 2), the load generator, etcd, the
 * kube-apiservers, the kubelets and the gateway pods all share them: once the cores are busy, throughput
 * cannot grow with replicas, whatever the gateway does. What the run says about replicas is then CPU per
 * request (whether N replicas cost more per request than one) and the spread over the pods; the output
 * says so.
 *
 * Flags: --replicas=1,2,3 --reps=3 --seconds=10 --warmup=3 --idle=10 --concurrency=16 --clusters=50 --keep
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from '../../hack/localenv/binaries.ts';
import {
  chartDir,
  defaultNamespace,
  defaultRelease,
  helm,
  nodeChartValues,
} from '../../hack/localenv/chart.ts';
import { startEnvironment } from '../../hack/localenv/environment.ts';
import { credentialNamespace } from '../../hack/localenv/gateway.ts';
import { containerPids, type Pod, podReady, podsOf } from '../../hack/localenv/pods.ts';
import { type Rollout, rolloutComplete, serviceEndpoints } from '../../hack/localenv/rollout.ts';
import { waitFor } from '../../hack/localenv/wait.ts';
import { apiServicePath, gatewayLabelSelector } from '../../manager/addon/gateway-deploy/names.ts';
import type { KubeClient, KubeObject } from '../../shared/kube/client.ts';
import { loadKubeconfig } from '../../shared/kube/kubeconfig.ts';
import { median, percentile } from './measure.ts';

const stateDir = path.join(repoRoot, '.local', 'bench-replicas');
const release = defaultRelease;
const namespace = defaultNamespace;
/** The chart's gateway.name: Deployment, Service and the `-tls` Secret of the manager's CA. */
const gatewayName = 'cluster-gateway';
const apiPrefix = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways';
const benchLabel = 'bench.cluster-gateway.oam.dev/replicas';
/** Seconds between the rollout and the measurements at rest. */
const settleSeconds = 10;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);

interface Flags {
  replicas: number[];
  reps: number;
  seconds: number;
  warmup: number;
  idle: number;
  concurrency: number;
  clusters: number;
  keep: boolean;
}

function parseFlags(argv: string[]): Flags {
  const flags: Flags = {
    replicas: [1, 2, 3],
    reps: 3,
    seconds: 10,
    warmup: 3,
    idle: 10,
    concurrency: 16,
    clusters: 50,
    keep: false,
  };
  const positive = (arg: string, value: string, integer: boolean) => {
    const n = Number(value);
    if (!(n > 0) || (integer && !Number.isInteger(n))) throw new Error(`bad value in ${arg}`);
    return n;
  };
  for (const arg of argv) {
    const [name, value = ''] = arg.replace(/^--/, '').split('=', 2) as [string, string | undefined];
    if (name === 'keep') flags.keep = true;
    else if (name === 'replicas') flags.replicas = value.split(',').map((v) => positive(arg, v, true));
    else if (name === 'seconds' || name === 'warmup' || name === 'idle')
      flags[name] = positive(arg, value, false);
    else if (name === 'concurrency' || name === 'clusters' || name === 'reps')
      flags[name] = positive(arg, value, true);
    else
      throw new Error(
        `unknown flag ${arg}; use --replicas=1,2,3 --reps=N --seconds=S --warmup=S --idle=S --concurrency=N --clusters=N --keep`,
      );
  }
  return flags;
}

// ---------------------------------------------------------------------------
// Setup: the clusters, the chart, a rollout of N replicas.

type Condition = { type: string; status: string };
type ApiService = KubeObject & {
  spec: { service?: { namespace: string; name: string } };
  status?: { conditions?: Condition[] };
};
type SecretObject = KubeObject & { type?: string; data: Record<string, string> };

/**
 * `count` credential Secrets in the Go original's layout with an endpoint (what a hub admin writes for a
 * cluster outside OCM): cluster1's token, URL (as pods reach it) and CA, so each is a healthy cluster the
 * gateway probes and lists like a real one. Before the chart: the gateway's first list holds them all.
 */
async function createClusters(hub: KubeClient, count: number): Promise<void> {
  const secret = await hub.get<SecretObject>(`/api/v1/namespaces/${credentialNamespace}/secrets/cluster1`);
  const mc = await hub.get<
    KubeObject & { spec: { managedClusterClientConfigs: { url: string; caBundle: string }[] } }
  >('/apis/cluster.open-cluster-management.io/v1/managedclusters/cluster1');
  const config = mc.spec.managedClusterClientConfigs[0];
  if (!config) throw new Error('ManagedCluster cluster1 has no managedClusterClientConfigs');
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const name = `bench-${String(next++).padStart(3, '0')}`;
      await hub.create(`/api/v1/namespaces/${credentialNamespace}/secrets`, {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: {
          name,
          namespace: credentialNamespace,
          labels: { ...secret.metadata?.labels, [benchLabel]: 'true' },
        },
        type: secret.type,
        data: {
          ...secret.data,
          endpoint: Buffer.from(config.url).toString('base64'),
          'ca.crt': config.caBundle,
        },
      } as KubeObject);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
}

/**
 * The chart's values for this run: the node values (the image built here), then the chart's own defaults
 * for what hack/localenv/chart.ts turns up to make the environment quick to watch (debug logs, a 2 s
 * probe interval), so the pods do per request and at rest what an installed gateway does.
 */
function chartValues(images: { image: string }, replicas: number): string[] {
  return nodeChartValues(images, [
    'manager.logLevel=info',
    'gateway.logLevel=info',
    'gateway.healthCheck.intervalSeconds=10',
    `gateway.replicas=${replicas}`,
  ]);
}

interface GatewayPod {
  name: string;
  ip: string;
  port: number;
  containerId: string;
  restarts: number;
}

/**
 * Waits until the gateway runs exactly `replicas` pods, all Ready, of its latest template, none other left
 * (not even terminating); the Service's EndpointSlices list exactly their IPs, ready (what the aggregator
 * picks from); the APIService points at the chart's Service and is Available. As
 * e2e/chart-install.test.ts waits for a rollout and for the APIService to point at the install.
 */
async function rolledOut(hub: KubeClient, replicas: number): Promise<GatewayPod[]> {
  let state = 'nothing read yet';
  return waitFor(
    `exactly ${replicas} gateway pods Ready, in the Service's endpoints, the APIService Available`,
    async () => {
      const d = await hub.getOptional<Rollout>(
        `/apis/apps/v1/namespaces/${namespace}/deployments/${gatewayName}`,
      );
      const st = d?.status;
      state = `Deployment ${JSON.stringify({ spec: d?.spec.replicas, ...st })}`;
      if (!rolloutComplete(d, replicas)) return undefined;
      const all = await podsOf(hub, namespace, gatewayLabelSelector);
      const ready = all.filter(podReady);
      state = `${all.length} gateway pods, ${ready.length} Ready`;
      if (all.length !== replicas || ready.length !== replicas) return undefined;
      const endpoints = (await serviceEndpoints(hub, namespace, gatewayName))
        .filter((e) => e.ready)
        .map((e) => e.address)
        .sort();
      const ips = ready.map((p) => p.status?.podIP ?? '').sort();
      state = `endpoints [${endpoints.join(', ')}], pod IPs [${ips.join(', ')}]`;
      if (JSON.stringify(endpoints) !== JSON.stringify(ips)) return undefined;
      const api = await hub.getOptional<ApiService>(apiServicePath);
      state = `APIService ${JSON.stringify({ service: api?.spec.service, conditions: api?.status?.conditions })}`;
      const pointsAtInstall =
        api?.spec.service?.namespace === namespace && api.spec.service.name === gatewayName;
      const available = api?.status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True');
      if (!pointsAtInstall || !available) return undefined;
      return ready.map(gatewayPod);
    },
    { timeoutMs: 240_000, intervalMs: 500 },
  ).catch((err: Error) => {
    throw new Error(`${err.message}; last seen: ${state}`);
  });
}

function gatewayPod(pod: Pod): GatewayPod {
  const status = pod.status?.containerStatuses?.find((s) => s.name === 'gateway');
  const container = pod.spec?.containers?.find((c) => c.name === 'gateway');
  const port = container?.ports?.find((p) => p.name === 'https')?.containerPort;
  if (!status?.containerID || !pod.status?.podIP || !port) {
    throw new Error(`gateway pod ${pod.metadata.name}: no container id, pod IP or https port yet`);
  }
  return {
    name: pod.metadata.name,
    ip: pod.status.podIP,
    port,
    containerId: status.containerID,
    restarts: status.restartCount,
  };
}

// ---------------------------------------------------------------------------
// Load.

/** Where requests go: one target through the aggregator, one per pod straight. */
interface Target {
  name: string;
  base: string;
  agent: https.Agent;
  headers: Record<string, string>;
}

interface Route {
  name: 'aggregator' | 'direct';
  targets: Target[];
}

interface Load {
  latencies: number[];
  /** Requests completed per target, in `targets` order. */
  perTarget: number[];
  bytes: number;
  wallMs: number;
}

/** One request; resolves at the last byte of the body, with its status and size. */
function request(target: Target, pathname: string): Promise<{ status: number; bytes: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      `${target.base}${pathname}`,
      { agent: target.agent, headers: { ...target.headers, accept: 'application/json' } },
      (res) => {
        let bytes = 0;
        const kept: Buffer[] = [];
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          if (res.statusCode !== 200 && bytes < 4096) kept.push(chunk);
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, bytes, body: Buffer.concat(kept).toString() }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/**
 * `concurrency` workers, each sending its next request when the previous one is answered, until `seconds`
 * have passed; each request goes to the route's next target (round-robin). The wall time runs until the
 * last answer, so requests / wall time is the rate the measured CPU paid for.
 */
async function drive(route: Route, pathname: string, seconds: number, concurrency: number): Promise<Load> {
  const latencies: number[] = [];
  const perTarget = route.targets.map(() => 0);
  let bytes = 0;
  let next = 0;
  let failure: Error | undefined;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  const worker = async () => {
    while (!failure && performance.now() < deadline) {
      const index = next++ % route.targets.length;
      const target = route.targets[index] as Target;
      const sent = performance.now();
      try {
        const res = await request(target, pathname);
        if (res.status !== 200)
          throw new Error(`${route.name} ${target.name} GET ${pathname}: ${res.status} ${res.body}`);
        latencies.push(performance.now() - sent);
        perTarget[index] = (perTarget[index] ?? 0) + 1;
        bytes += res.bytes;
      } catch (err) {
        // One failure stops every worker: a cell with errors measures something else.
        failure ??= err as Error;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  if (failure) throw failure;
  return { latencies, perTarget, bytes, wallMs: performance.now() - started };
}

// ---------------------------------------------------------------------------
// CPU.

/** Busy and total jiffies of the whole machine (/proc/stat's first line): busy is all but idle and iowait. */
function machineJiffies(): { busy: number; total: number } {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '')
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const total = fields.slice(0, 8).reduce((a, b) => a + b, 0); // user .. steal (guest is inside user)
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { busy: total - idle, total };
}

/**
 * Every process's name and CPU ms (utime + stime, all threads), as measure.ts's cpuUsage reads them: the
 * gateway pods' and the hub apiserver's figures, and what else ran (the machine is shared, and the
 * environment's other processes take their part of the cores too).
 */
function processTable(): Map<number, { comm: string; ms: number }> {
  const table = new Map<number, { comm: string; ms: number }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const fields = stat.slice(close + 2).split(' '); // from field 3 (state) on
      table.set(Number(entry), {
        comm: stat.slice(stat.indexOf('(') + 1, close),
        ms: (Number(fields[11]) + Number(fields[12])) * 10,
      });
    } catch {} // exited meanwhile
  }
  return table;
}

interface Snapshot {
  /** The processes of each gateway pod's container. */
  podPids: Map<string, number[]>;
  processes: Map<number, { comm: string; ms: number }>;
  clientUs: number;
  machine: { busy: number; total: number };
}

function snapshot(pods: GatewayPod[]): Snapshot {
  const podPids = new Map(pods.map((p) => [p.name, containerPids(p.containerId)]));
  const usage = process.cpuUsage();
  return {
    podPids,
    processes: processTable(),
    clientUs: usage.user + usage.system,
    machine: machineJiffies(),
  };
}

interface Spent {
  /** CPU ms of each pod, in the order of the pods given. */
  podMs: number[];
  hubMs: number;
  clientMs: number;
  /** Share of the machine's cores that were busy, 0..1. */
  machineBusy: number;
  /** The share of the machine's cores used by neither the gateway, the hub apiserver nor this process, 0..1. */
  othersBusy: number;
  /** The processes (not the above) that used most CPU, as "name: % of a core". */
  topOthers: string[];
}

/**
 * CPU between two snapshots. A pod's figure is over its container's processes present in both (the
 * kubelet's probes are HTTP GETs: the gateway's own process is all a container runs).
 */
function spent(pods: GatewayPod[], before: Snapshot, after: Snapshot, names: Map<number, string>): Spent {
  const delta = (pid: number) => {
    const a = before.processes.get(pid);
    const b = after.processes.get(pid);
    return a && b && a.comm === b.comm ? b.ms - a.ms : 0;
  };
  const mine = new Set<number>([process.pid]);
  const podMs = pods.map((p) => {
    const pids = after.podPids.get(p.name) ?? [];
    if (pids.length === 0) throw new Error(`gateway pod ${p.name}: its container runs no more`);
    for (const pid of pids) mine.add(pid);
    return pids.reduce((sum, pid) => sum + delta(pid), 0);
  });
  const hubPid = [...names].find(([, name]) => name === 'hub kube-apiserver')?.[0] ?? -1;
  mine.add(hubPid);
  const total = after.machine.total - before.machine.total;
  const wallMs = (total * 10) / cores; // jiffies of 10 ms, summed over the cores
  const busyMs = (after.machine.busy - before.machine.busy) * 10;
  const clientMs = (after.clientUs - before.clientUs) / 1000;
  const hubMs = delta(hubPid);
  const gatewayMs = podMs.reduce((a, b) => a + b, 0);
  const topOthers = [...after.processes.keys()]
    .filter((pid) => !mine.has(pid))
    .map((pid) => ({ pid, ms: delta(pid) }))
    .filter((o) => o.ms > 0)
    .sort((a, b) => b.ms - a.ms)
    .slice(0, 4)
    .map(
      (o) =>
        `${names.get(o.pid) ?? `${after.processes.get(o.pid)?.comm}[${o.pid}]`} ${fixed((o.ms / wallMs) * 100)} %`,
    );
  return {
    podMs,
    hubMs,
    clientMs,
    machineBusy: total > 0 ? busyMs / (total * 10) : 0,
    othersBusy: total > 0 ? Math.max(0, busyMs - gatewayMs - hubMs - clientMs) / (total * 10) : 0,
    topOthers,
  };
}

// ---------------------------------------------------------------------------
// Figures.

interface Cell {
  rep: number;
  replicas: number;
  op: string;
  route: string;
  requests: number;
  reqPerSec: number;
  p50: number;
  p99: number;
  bodyBytes: number;
  gatewayUs: number;
  gatewayNetUs: number;
  hubUs: number;
  clientUs: number;
  machineBusy: number;
  othersBusy: number;
  /** Per pod, 0..1: of the requests (direct only), of the gateway CPU net of idle. */
  requestShare?: number[];
  cpuShare: number[];
}

interface Idle {
  replicas: number;
  /** Each pod's idle CPU, ms per second (= thousandths of a core). */
  podMsPerSec: number[];
  hubMsPerSec: number;
}

function fixed(v: number, digits = 0): string {
  return Number.isFinite(v)
    ? v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : '—';
}
const shares = (values: number[]) => values.map((v) => fixed(v * 100)).join('/');

/** One row of medians over the repetitions of a cell, with the range of req/s. */
function medianRow(runs: Cell[]): string {
  const m = (f: (c: Cell) => number) => median(runs.map(f));
  const first = runs[0] as Cell;
  const rates = runs.map((c) => c.reqPerSec);
  const range = runs.length > 1 ? ` (${fixed(Math.min(...rates))}–${fixed(Math.max(...rates))})` : '';
  const hub = fixed(m((c) => c.hubUs));
  // The direct rows sent each pod its round-robin share, exactly; the CPU shares say what each pod did.
  const share = [
    first.requestShare ? `req ${fixed(100 / first.requestShare.length)} each` : '',
    `CPU ${runs.map((c) => shares(c.cpuShare)).join(', ')}`,
  ]
    .filter(Boolean)
    .join('; ');
  return (
    `| ${first.replicas} | ${first.op} | ${first.route} | ${fixed(m((c) => c.reqPerSec))}${range} | ` +
    `${fixed(
      m((c) => c.p50),
      1,
    )} / ${fixed(
      m((c) => c.p99),
      1,
    )} | ${fixed(m((c) => c.gatewayUs))} | ` +
    `${fixed(m((c) => c.gatewayNetUs))} | ${first.route === 'aggregator' ? hub : `(${hub})`} | ` +
    `${fixed(m((c) => c.clientUs))} | ${fixed(m((c) => c.machineBusy) * 100)} % (${fixed(m((c) => c.othersBusy) * 100)} %) | ${share} |`
  );
}

const tableHeader = [
  '| replicas | op | path | req/s (range) | p50 / p99 ms | gateway CPU µs/req | net of idle | hub apiserver CPU µs/req | client CPU µs/req | cores busy (others) | per-pod share, % |',
  '|--:|:--|:--|--:|--:|--:|--:|--:|--:|--:|:--|',
];

// ---------------------------------------------------------------------------

const flags = parseFlags(process.argv.slice(2));
const cores = os.availableParallelism();
const runStarted = Date.now();
const env = await startEnvironment({
  stateDir,
  managedClusters: ['cluster1'],
  // As `npm start`: no gateway of the environment's own, only cluster1's credential Secret; the chart's
  // manager registers the APIService at its gateway's Service.
  gateway: false,
  clusterCredentials: true,
  nodes: true,
  log: (line) => process.stderr.write(`[bench env] ${line}\n`),
}).catch((err: Error) => {
  console.error(`\nthe environment did not start: ${err.message}`);
  process.exit(1);
});
let failed = false;
const agents: https.Agent[] = [];
try {
  const hub = env.hub.client;
  if (!env.images) throw new Error('the environment has no image (nodes)');
  const images = env.images;
  // Names for the processes the environment started, in the list of what else used the cores.
  const names = new Map<number, string>(
    [env.hub, ...env.managed].map((c) => [c.apiserver.pid, `${c.name} kube-apiserver`]),
  );

  log(`creating ${flags.clusters} cluster credential Secrets (copies of cluster1's, with its URL and CA)`);
  await createClusters(hub, flags.clusters);
  const clusterCount = flags.clusters + 1;

  const first = flags.replicas[0] ?? 1;
  log(`helm install ${release} charts/cluster-gateway --namespace ${namespace} (gateway.replicas=${first})`);
  await helm(
    env.hub.kubeconfig,
    'install',
    release,
    chartDir,
    '--namespace',
    namespace,
    '--create-namespace',
    ...chartValues(images, first),
  );

  // The aggregator's route: the hub's URL with the admin kubeconfig's client certificate.
  const admin = loadKubeconfig(env.hub.kubeconfig);
  const aggregatorAgent = new https.Agent({
    keepAlive: true,
    maxSockets: flags.concurrency,
    ca: admin.options.ca,
    cert: admin.options.cert,
    key: admin.options.key,
  });
  agents.push(aggregatorAgent);
  const aggregator: Route = {
    name: 'aggregator',
    targets: [{ name: 'hub', base: env.hub.server, agent: aggregatorAgent, headers: {} }],
  };
  // The direct route's credentials: what the aggregator presents, and the CA it checks the gateway with.
  const frontProxy = {
    cert: readFileSync(path.join(stateDir, 'hub', 'front-proxy-client.crt')),
    key: readFileSync(path.join(stateDir, 'hub', 'front-proxy-client.key')),
  };
  const asAggregator = { 'X-Remote-User': 'admin', 'X-Remote-Group': 'system:masters' };

  const operations = [
    { op: 'get', pathname: `${apiPrefix}/cluster1` },
    { op: 'list', pathname: apiPrefix },
  ];
  const cells: Cell[] = [];
  const idles: Idle[] = [];
  let installedReplicas = first;

  // Each repetition goes through every replica count (1, 2, 3, then 1, 2, 3 again): a burst of other work
  // on the machine then spoils one repetition of a cell, and the median leaves it out.
  for (let rep = 1; rep <= flags.reps; rep++) {
    for (const replicas of flags.replicas) {
      if (replicas !== installedReplicas) {
        log(`helm upgrade: gateway.replicas=${replicas}`);
        await helm(
          env.hub.kubeconfig,
          'upgrade',
          release,
          chartDir,
          '--namespace',
          namespace,
          ...chartValues(images, replicas),
        );
        installedReplicas = replicas;
      }
      const pods = await rolledOut(hub, replicas);
      log(`rep ${rep}: ${replicas} gateway pods Ready: ${pods.map((p) => `${p.name} ${p.ip}`).join(', ')}`);
      // The first request after the APIService turned Available may still race the aggregator's discovery;
      // and every cluster is listed once the pods' informers have synced.
      await waitFor(
        `a LIST through the aggregator to return ${clusterCount} ClusterGateways`,
        async () => {
          const list = await hub.list(apiPrefix).catch(() => undefined);
          return list?.items.length === clusterCount;
        },
        { timeoutMs: 60_000, intervalMs: 500 },
      );
      // New pods are busy for a while after Ready (first probes, the informers' lists, the manager's own
      // rollout after an upgrade): that is not what they cost at rest.
      await sleep(settleSeconds * 1000);

      const tls = await hub.get<SecretObject>(`/api/v1/namespaces/${namespace}/secrets/${gatewayName}-tls`);
      const ca = Buffer.from(tls.data['ca.crt'] ?? '', 'base64').toString();
      const direct: Route = {
        name: 'direct',
        targets: pods.map((p) => {
          const agent = new https.Agent({
            keepAlive: true,
            maxSockets: flags.concurrency,
            ca,
            servername: `${gatewayName}.${namespace}.svc`,
            ...frontProxy,
          });
          agents.push(agent);
          return { name: p.name, base: `https://${p.ip}:${p.port}`, agent, headers: asAggregator };
        }),
      };

      // At rest first: what N replicas cost with no request (health probes, informers, leases),
      // which every cell below also pays and the "net of idle" figures take out.
      const restBefore = snapshot(pods);
      const restStarted = performance.now();
      await sleep(flags.idle * 1000);
      const restSeconds = (performance.now() - restStarted) / 1000;
      const rest = spent(pods, restBefore, snapshot(pods), names);
      const idle: Idle = {
        replicas,
        podMsPerSec: rest.podMs.map((ms) => ms / restSeconds),
        hubMsPerSec: rest.hubMs / restSeconds,
      };
      idles.push(idle);
      log(
        `rep ${rep}: ${replicas} replicas at rest (${flags.idle} s): gateway pods ${idle.podMsPerSec.map((v) => `${fixed(v / 10, 1)} %`).join(', ')} of a core; hub apiserver ${fixed(idle.hubMsPerSec / 10, 1)} %; top others: ${rest.topOthers.join(', ')}`,
      );

      for (const { op, pathname } of operations) {
        for (const route of [aggregator, direct]) {
          // Warm-up: connections open to every pod, JIT warm, heaps at working size.
          await drive(route, pathname, flags.warmup, flags.concurrency);
          const before = snapshot(pods);
          const load = await drive(route, pathname, flags.seconds, flags.concurrency);
          const used = spent(pods, before, snapshot(pods), names);
          const seconds = load.wallMs / 1000;
          const requests = load.latencies.length;
          const gatewayMs = used.podMs.reduce((a, b) => a + b, 0);
          const netMs = used.podMs.map((ms, i) => Math.max(0, ms - (idle.podMsPerSec[i] ?? 0) * seconds));
          const netTotal = netMs.reduce((a, b) => a + b, 0);
          const sorted = Float64Array.from(load.latencies).sort();
          const cell: Cell = {
            rep,
            replicas,
            op,
            route: route.name,
            requests,
            reqPerSec: requests / seconds,
            p50: percentile(sorted, 50),
            p99: percentile(sorted, 99),
            bodyBytes: load.bytes / requests,
            gatewayUs: (gatewayMs * 1000) / requests,
            gatewayNetUs: (netTotal * 1000) / requests,
            hubUs: (used.hubMs * 1000) / requests,
            clientUs: (used.clientMs * 1000) / requests,
            machineBusy: used.machineBusy,
            othersBusy: used.othersBusy,
            ...(route.name === 'direct' ? { requestShare: load.perTarget.map((n) => n / requests) } : {}),
            cpuShare: netMs.map((ms) => (netTotal > 0 ? ms / netTotal : 0)),
          };
          cells.push(cell);
          log(
            `rep ${rep}: ${replicas} replica(s) ${op} ${route.name}: ${fixed(cell.reqPerSec)} req/s, p50 ${fixed(cell.p50, 2)} ms, p99 ${fixed(cell.p99, 2)} ms; ` +
              `µs/req: gateway ${fixed(cell.gatewayUs)} (net ${fixed(cell.gatewayNetUs)}), hub ${fixed(cell.hubUs)}, client ${fixed(cell.clientUs)}; ` +
              `cores ${fixed(cell.machineBusy * 100)} % busy, others ${fixed(cell.othersBusy * 100)} % (${used.topOthers.join(', ')}); body ${fixed(cell.bodyBytes)} B; ` +
              `${cell.requestShare ? `requests ${shares(cell.requestShare)} %, ` : ''}CPU ${shares(cell.cpuShare)} %`,
          );
          await sleep(1000);
        }
      }
      // The same pods served every cell: a restart would have put a cold process in the figures.
      const now = (await podsOf(hub, namespace, gatewayLabelSelector)).filter(podReady).map(gatewayPod);
      for (const p of pods) {
        const same = now.find((q) => q.name === p.name);
        if (!same || same.containerId !== p.containerId || same.restarts !== p.restarts) {
          throw new Error(`gateway pod ${p.name} restarted or went away during the cells`);
        }
      }
      for (const t of direct.targets) t.agent.destroy();
    }
  }

  const bodies = operations.map(({ op }) => {
    const c = cells.find((x) => x.op === op);
    return `${op} ${fixed(c?.bodyBytes ?? Number.NaN)} B`;
  });
  const busiest = Math.max(...cells.map((c) => c.machineBusy));
  console.log(
    `\n${os.cpus()[0]?.model ?? 'unknown CPU'}, ${cores} cores; Node ${process.version}. ${clusterCount} ClusterGateways ` +
      `(bodies: ${bodies.join(', ')}); ${flags.concurrency} requests in flight; per cell ${flags.warmup} s warm-up, ` +
      `${flags.seconds} s measured; medians of ${flags.reps} repetitions, each through ${flags.replicas.join(', ')} replicas in turn.`,
  );
  console.log(
    `\nEvery process shares these ${cores} cores: the load generator (this process), etcd, the kube-apiservers, the ` +
      `kubelets and the gateway pods. The cells kept up to ${fixed(busiest * 100)} % of them busy: once they are, req/s is ` +
      'capped by the cores, not by the gateway replicas, and a replica more cannot add throughput here. What answers the ' +
      'question on this machine is gateway CPU per request (does a replica more cost more per request?) and the per-pod ' +
      'shares (are requests spread over the replicas?).',
  );
  console.log(
    '\nGateway CPU: utime + stime of the gateway containers, all pods, over the measured window (10 ms ticks), per ' +
      "request; net of idle: less the pods' CPU at rest. Hub apiserver CPU: all it did in the window, per request (the " +
      "aggregator's work, and whatever the gateway asked of it); in brackets in the direct rows, where the aggregator has " +
      'no part. Cores busy: of the ' +
      'whole machine (/proc/stat); in brackets the share used by none of the gateway, the hub apiserver and the load ' +
      "generator (etcd, cluster1's apiserver that the probes reach, kubelets, anything else running). Per-pod share: req " +
      "= requests sent to each pod (direct, round-robin); CPU = each pod's share of the gateway CPU net of idle, one " +
      'group per repetition (the aggregator picks a pod per request).\n',
  );
  const keys = [...new Set(cells.map((c) => `${c.replicas} ${c.op} ${c.route}`))];
  console.log(
    [
      ...tableHeader,
      ...keys.map((k) => medianRow(cells.filter((c) => `${c.replicas} ${c.op} ${c.route}` === k))),
    ].join('\n'),
  );
  const atRest = flags.replicas.map((n) => {
    const of = idles.filter((i) => i.replicas === n);
    const pods = median(of.map((i) => i.podMsPerSec.reduce((a, b) => a + b, 0)));
    return `${n}: ${fixed(pods / 10, 1)} % of a core for all its pods (hub apiserver ${fixed(median(of.map((i) => i.hubMsPerSec)) / 10, 1)} %)`;
  });
  console.log(
    `\nAt rest (${flags.idle} s without load before the cells, ${clusterCount} clusters probed every 10 s), ` +
      `medians: ${atRest.join('; ')}.`,
  );
  console.log(
    `\nRun took ${fixed((Date.now() - runStarted) / 60_000, 1)} min (command: npm run bench:replicas${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}).`,
  );
  if (flags.keep) {
    console.log(`--keep: the environment stays up until Ctrl-C (hub kubeconfig ${env.hub.kubeconfig}).`);
    await new Promise(() => {});
  }
} catch (err) {
  failed = true;
  console.error(`\nbenchmark failed: ${(err as Error).stack ?? err}`);
} finally {
  if (!flags.keep || failed) {
    for (const agent of agents) agent.destroy();
    await env.stop();
    // The environment's stop undoes what the nodes changed on the host; the pods' bridge going is the sign.
    let bridge = '';
    try {
      bridge = execFileSync('ip', ['link', 'show', 'cgw0'], {
        stdio: ['ignore', 'pipe', 'ignore'],
      }).toString();
    } catch {} // `ip` exits 1: the link does not exist
    if (bridge) {
      console.error('the bridge cgw0 is still there after the stop: the host was not fully restored');
      failed = true;
    } else log('stopped; the host is restored (no cgw0 bridge)');
    process.exit(failed ? 1 : 0);
  }
}

/**
 * Three gateway replicas behind the hub's aggregator, as on a user's hub: charts/cluster-gateway installed
 * with gateway.replicas=3 (pods of the image built here, run by the hub's kubelet), every request under
 * test sent to the hub's kube-apiserver, whose kube-aggregator picks a random ready endpoint of the
 * gateway Service for each one (k8s.io/apiserver ResolveEndpoint). So consecutive requests of one client,
 * a LIST and the WATCH that follows it, a GET and the PUT that follows it, land on different replicas,
 * and what one replica answers must hold on the others:
 *
 * - a ClusterGateway's metadata.resourceVersion is derived from the hub objects it is built from (etcd
 *   revisions, decimal integers), so every replica gives an object the same one, and a GET then a PUT
 *   of the health subresource with its resourceVersion does not conflict;
 * - a PUT answers with the status it wrote; a later GET shows the merged view (the prober's false for
 *   a cluster it cannot reach);
 * - a watch from a LIST's resourceVersion delivers every later change exactly once, in order, whichever
 *   replica serves either, and `kubectl get -w` shows each change once while a replica it does not use
 *   is replaced;
 * - a watch resumed from a version whose replica is gone delivers exactly what changed since, or 410
 *   Expired after which a relist recovers; a version no replica can serve is 410 Expired, in the form
 *   kube-apiserver answers it (an ERROR event).
 *
 * Observation only (never the requests under test) goes straight to the gateway pods at their pod IPs,
 * authenticated as the aggregator is (front-proxy certificate): each replica's own view of an object,
 * and its cluster_gateway_inflight_requests gauge, which counts a watch for as long as it is open and
 * so tells which replica serves one. Which replica served a health PUT is read from the hub's audit
 * log: the PUT's replica writes the mark on the cluster's Secret itself, from its pod IP.
 *
 * The environment's own gateway keeps running in cluster-gateway-system; this file installs into
 * namespaces of its own (the release's, and a credential namespace only the installed gateway reads, OCM
 * integration off), so nothing of the environment's is read or written but the APIService, which the
 * installed manager takes over; `after` deletes what the install left (both namespaces with it) and
 * registers the environment's APIService again, exactly as e2e/chart-install.test.ts does.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { auditLogPath } from '../hack/localenv/apiserver.ts';
import { binaryPath } from '../hack/localenv/binaries.ts';
import { nodeChartValues } from '../hack/localenv/chart.ts';
import { type Pod, podsOf } from '../hack/localenv/pods.ts';
import { type Rollout, rolloutComplete, serviceEndpoints } from '../hack/localenv/rollout.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import { apiServicePath, gatewayLabelSelector } from '../manager/addon/gateway-deploy/names.ts';
import { notProbedYetReason } from '../manager/gateway/clusters/health-precedence.ts';
import type { KubeClient, KubeObject, WatchEvent } from '../shared/kube/client.ts';
import { StatusError } from '../shared/kube/status.ts';
import { clusterEndpoint, gatewayToken } from './support/credentials.ts';
import { environmentState, hubClient } from './support/environment.ts';
import { helm } from './support/helm.ts';
import { awaitInstallGone, restoreEnvironmentApiService } from './support/installed-chart.ts';
import { frontProxyClient } from './support/users.ts';

const release = 'cg-replicas';
const namespace = 'cluster-gateway-replicas';
const addon = 'cluster-gateway';
const gatewayName = 'cluster-gateway';
const replicas = 3;
const chart = path.join(import.meta.dirname, '..', 'charts', 'cluster-gateway');
/** The chart's gateway.port (its default): where each gateway pod serves, behind the Service's 443. */
const gatewayPort = 9443;
const api = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways';
const cmaPath = `/apis/addon.open-cluster-management.io/v1alpha1/clustermanagementaddons/${addon}`;
const webhookConfigPath = `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${addon}-addon-available`;
const deploymentPath = (name: string) => `/apis/apps/v1/namespaces/${namespace}/deployments/${name}`;
/**
 * The installed gateway's own credential namespace (gateway.credentialNamespace, made by the chart), and
 * OCM integration off: its replicas read and write only the Secrets made here, and nothing of the
 * environment's (whose own gateway reads open-cluster-management-credentials and the ManagedClusters).
 */
const credentialNamespace = 'cluster-gateway-replicas-credentials';
const secretsPath = `/api/v1/namespaces/${credentialNamespace}/secrets`;
const secretPath = (name: string) => `${secretsPath}/${name}`;
const gatewayServiceAccount = `system:serviceaccount:${namespace}:${gatewayName}`;
const annotationHealthy = 'status.cluster.core.oam.dev/healthy';
const annotationHealthyReason = 'status.cluster.core.oam.dev/healthy-reason';

/** Which scenario (or round) a Secret belongs to: list and watch select on it. */
const setLabel = 'cg-e2e-set';
/** Changed by each modification, so that every change is visible and tells which one it was. */
const stepLabel = 'cg-e2e-step';
/** An endpoint nothing listens on: the prober's verdict is false, at once and every time. */
const unreachableEndpoint = 'https://127.0.0.1:1';
/** Test 1's cluster, and test 2's two. */
const rvCluster = 'cg-replicas-rv';
const reachableCluster = 'cg-replicas-reachable';
const unreachableCluster = 'cg-replicas-unreachable';

const seconds = (ms: number) => Number((ms / 1000).toFixed(1));
const selector = (set: string) => `labelSelector=${encodeURIComponent(`${setLabel}=${set}`)}`;

type Condition = { type: string; status: string };
type ApiService = KubeObject & {
  spec: { service?: { namespace: string; name: string; port?: number } };
  status?: { conditions?: Condition[] };
};
type ClusterGateway = KubeObject & {
  metadata: {
    name: string;
    resourceVersion: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  status: { healthy: boolean; healthyReason?: string };
};
type Secret = KubeObject & {
  metadata: { name: string; resourceVersion: string; labels?: Record<string, string> };
};
type GatewayPod = Pod & { ip: string };
/** One change as a watcher sees it: what happened to which object, and its step label then. */
type Change = { type: string; name: string; step: string };

let hub: KubeClient;
let kubeconfig: string;
let image: string;
let environmentApiService: ApiService;
let cmaExisted = false;
let webhookExisted = false;
let installed = false;
/** The CA of the installed gateway's serving certificate (the manager's), to talk to its pods directly. */
let gatewayCa = '';
const kubectlProcesses = new Set<ChildProcess>();

const pointsAtInstall = (obj: ApiService | undefined) =>
  obj?.spec.service?.namespace === namespace && obj.spec.service.name === gatewayName;
const isAvailable = (obj: { status?: { conditions?: Condition[] } } | undefined) =>
  obj?.status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True') ?? false;
const sameService = (a: ApiService, b: ApiService) =>
  JSON.stringify(a.spec.service) === JSON.stringify(b.spec.service);

// ---------------------------------------------------------------------------------------------------
// The installed gateway's pods

/** The installed gateway's pods that run (not being deleted), with their pod IP. */
async function gatewayPods(): Promise<GatewayPod[]> {
  const pods = await podsOf(hub, namespace, gatewayLabelSelector);
  return pods.flatMap((p) =>
    p.status?.phase === 'Running' && !p.metadata.deletionTimestamp && p.status.podIP
      ? [{ ...p, ip: p.status.podIP }]
      : [],
  );
}

/**
 * Waits until the gateway Deployment's rollout is complete (every replica of its latest template Ready,
 * no other pod left, not even terminating) and the Service's EndpointSlices list exactly those pods, all
 * ready: from then on the aggregator picks among these three. Returns the pods.
 */
async function gatewayRolledOut(timeoutMs = 120_000): Promise<GatewayPod[]> {
  return waitFor(
    `the gateway rollout complete: ${replicas} Ready pods of the latest template, no other, all of them (and only them) ready endpoints`,
    async () => {
      const d = await hub.get<Rollout>(deploymentPath(gatewayName));
      if (!rolloutComplete(d, replicas)) return undefined;
      const all = await podsOf(hub, namespace, gatewayLabelSelector);
      const pods = await gatewayPods();
      if (all.length !== replicas || pods.length !== replicas) return undefined;
      const endpoints = await serviceEndpoints(hub, namespace, gatewayName);
      const ips = pods.map((p) => p.ip).sort();
      const listed = endpoints.map((e) => e.address).sort();
      const ready = endpoints.every((e) => e.ready);
      return ready && isDeepStrictEqual(listed, ips) ? pods : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

/** A request straight to one gateway pod, as the aggregator makes it (front-proxy certificate, a hub admin). */
function podRequest(ip: string, requestPath: string): Promise<{ status: number; body: string }> {
  const fp = frontProxyClient();
  return new Promise((resolve, reject) => {
    const req = https.get(
      `https://${ip}:${gatewayPort}${requestPath}`,
      {
        ca: gatewayCa,
        servername: `${gatewayName}.${namespace}.svc`,
        cert: fp.cert,
        key: fp.key,
        headers: {
          accept: 'application/json',
          'x-remote-user': 'e2e-replicas-observer',
          'x-remote-group': 'system:masters',
        },
        timeout: 10_000,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`GET ${requestPath} from ${ip}: no answer within 10 s`)));
    req.on('error', reject);
  });
}

/** One replica's own view of a ClusterGateway. */
async function viewOf(pod: GatewayPod, name: string): Promise<ClusterGateway> {
  const res = await podRequest(pod.ip, `${api}/${name}`);
  if (res.status !== 200)
    throw new Error(`${pod.metadata.name}: GET ${name} answered ${res.status}: ${res.body}`);
  return JSON.parse(res.body) as ClusterGateway;
}

/** Each pod's cluster_gateway_inflight_requests (the scrape itself counts 1), by pod name. */
async function inflight(pods: GatewayPod[]): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const pod of pods) {
    const res = await podRequest(pod.ip, '/metrics');
    if (res.status !== 200) throw new Error(`${pod.metadata.name}: /metrics answered ${res.status}`);
    const m = /^cluster_gateway_inflight_requests (\d+)$/m.exec(res.body);
    if (!m) throw new Error(`${pod.metadata.name}: no cluster_gateway_inflight_requests in /metrics`);
    counts[pod.metadata.name] = Number(m[1]);
  }
  return counts;
}

/** The in-flight counts once two consecutive readings agree (no short request of anyone in between). */
async function steadyInflight(pods: GatewayPod[]): Promise<Record<string, number>> {
  let previous: Record<string, number> | undefined;
  return waitFor(
    'two consecutive equal readings of every gateway pod in-flight request gauge',
    async () => {
      const now = await inflight(pods);
      const steady = previous && isDeepStrictEqual(previous, now);
      previous = now;
      return steady ? now : undefined;
    },
    { timeoutMs: 20_000, intervalMs: 200 },
  );
}

/**
 * The pods serving `count` watches opened since `baseline` was read: steady readings that exceed it by
 * `count` in all, on no pod less than before. A pod name appears once per watch it serves.
 */
async function podsServingNewWatches(
  pods: GatewayPod[],
  baseline: Record<string, number>,
  count: number,
): Promise<string[]> {
  let previous: Record<string, number> | undefined;
  let last: Record<string, number> = {};
  try {
    return await waitFor(
      `${count} more in-flight request(s) on the gateway pods, steady`,
      async () => {
        const now = await inflight(pods);
        last = now;
        const steady = previous && isDeepStrictEqual(previous, now);
        previous = now;
        if (!steady) return undefined;
        const serving: string[] = [];
        for (const pod of pods) {
          const delta = (now[pod.metadata.name] ?? 0) - (baseline[pod.metadata.name] ?? 0);
          if (delta < 0) return undefined;
          for (let i = 0; i < delta; i++) serving.push(pod.metadata.name);
        }
        return serving.length === count ? serving : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 200 },
    );
  } catch (err) {
    throw new Error(
      `${(err as Error).message}: baseline ${JSON.stringify(baseline)}, last reading ${JSON.stringify(last)}`,
    );
  }
}

// ---------------------------------------------------------------------------------------------------
// The hub's audit log: which gateway pod wrote a health mark

type AuditLine = {
  stage: string;
  verb: string;
  user: { username: string };
  sourceIPs?: string[];
  objectRef?: { resource?: string; namespace?: string; name?: string };
  responseStatus?: { code?: number };
};

const hubAuditLog = () => auditLogPath(environmentState().stateDir, 'hub');

function auditSize(): number {
  const fd = openSync(hubAuditLog(), 'r');
  try {
    return fstatSync(fd).size;
  } finally {
    closeSync(fd);
  }
}

/** The hub's audit events written after byte `offset` (a line being written is left for later). */
function auditSince(offset: number): AuditLine[] {
  const fd = openSync(hubAuditLog(), 'r');
  try {
    const size = fstatSync(fd).size;
    const buffer = Buffer.alloc(Math.max(0, size - offset));
    readSync(fd, buffer, 0, buffer.length, offset);
    const text = buffer.toString('utf8');
    const complete = text.slice(0, text.lastIndexOf('\n') + 1);
    return complete
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as AuditLine);
  } finally {
    closeSync(fd);
  }
}

/** The patches of Secret `name` the installed gateway made since `offset`, by source IP. */
function gatewayPatchesOf(offset: number, name: string): string[] {
  return auditSince(offset)
    .filter(
      (e) =>
        e.stage === 'ResponseComplete' &&
        e.verb === 'patch' &&
        e.user.username === gatewayServiceAccount &&
        e.objectRef?.resource === 'secrets' &&
        e.objectRef.namespace === credentialNamespace &&
        e.objectRef.name === name,
    )
    .map((e) => e.sourceIPs?.[0] ?? '?');
}

// ---------------------------------------------------------------------------------------------------
// Cluster Secrets in the credential namespace

/**
 * A cluster credential Secret at an endpoint nothing listens on, with an operator's unhealthy mark: its
 * health reads the mark whatever the prober finds, so the only changes a watcher sees are the ones
 * made here (its step label).
 */
async function createWatched(name: string, set: string, step: string): Promise<Secret> {
  return hub.create<Secret>(secretsPath, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name,
      namespace: credentialNamespace,
      labels: {
        'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken',
        [setLabel]: set,
        [stepLabel]: step,
      },
      annotations: { [annotationHealthy]: 'false', [annotationHealthyReason]: 'e2e watch fixture' },
    },
    stringData: { endpoint: unreachableEndpoint, token: 'e2e-not-a-token' },
  });
}

async function createCluster(name: string, data: Record<string, string>): Promise<void> {
  await hub.create(secretsPath, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name,
      namespace: credentialNamespace,
      labels: {
        'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken',
        [setLabel]: 'health',
      },
    },
    stringData: data,
  });
}

/** Writes made to a set of watched Secrets, in order, as the changes a watcher must see. */
class Driver {
  readonly changes: Change[] = [];
  readonly #steps = new Map<string, string>();
  readonly set: string;
  constructor(set: string) {
    this.set = set;
  }

  async create(name: string, step: string): Promise<void> {
    await createWatched(name, this.set, step);
    this.#record({ type: 'ADDED', name, step });
  }

  async relabel(name: string, step: string): Promise<void> {
    await hub.mergePatch(secretPath(name), { metadata: { labels: { [stepLabel]: step } } });
    this.#record({ type: 'MODIFIED', name, step });
  }

  async remove(name: string): Promise<void> {
    await hub.request('DELETE', secretPath(name));
    this.#record({ type: 'DELETED', name, step: this.#steps.get(name) ?? '' });
  }

  /** The state (name -> step) after the first `count` changes. */
  stateAfter(count: number): Map<string, string> {
    const state = new Map<string, string>();
    for (const c of this.changes.slice(0, count)) {
      if (c.type === 'DELETED') state.delete(c.name);
      else state.set(c.name, c.step);
    }
    return state;
  }

  #record(change: Change): void {
    this.changes.push(change);
    if (change.type === 'DELETED') this.#steps.delete(change.name);
    else this.#steps.set(change.name, change.step);
  }
}

/**
 * Splits what a watcher saw into the changes made here and others: a MODIFIED that leaves the step
 * label as it was is no change of ours (the gateway may report other changes of the object, e.g. its
 * health); anything else is one of ours, or a duplicate or stray that the comparison then shows.
 */
function ourChanges(
  seen: Change[],
  initial = new Map<string, string>(),
): { ours: Change[]; others: Change[] } {
  const state = new Map(initial);
  const ours: Change[] = [];
  const others: Change[] = [];
  for (const c of seen) {
    if (c.type === 'MODIFIED' && state.get(c.name) === c.step) {
      others.push(c);
      continue;
    }
    ours.push(c);
    if (c.type === 'DELETED') state.delete(c.name);
    else state.set(c.name, c.step);
  }
  return { ours, others };
}

const fmt = (changes: Change[]) => changes.map((c) => `${c.type} ${c.name} ${c.step}`).join(', ') || '(none)';
const changeOf = (e: WatchEvent<ClusterGateway>): Change => ({
  type: e.type,
  name: e.object.metadata?.name ?? '?',
  step: e.object.metadata?.labels?.[stepLabel] ?? '',
});

/**
 * resourceVersions of each object in the order seen (a list's first, then its events): each a decimal
 * integer, strictly increasing per object. Returns what breaks that.
 */
function resourceVersionProblems(seen: { name: string; rv: string | undefined }[]): string[] {
  const problems: string[] = [];
  const last = new Map<string, bigint>();
  for (const { name, rv } of seen) {
    if (!rv || !/^[0-9]+$/.test(rv)) {
      problems.push(`${name}: resourceVersion ${JSON.stringify(rv)} is not a decimal integer`);
      continue;
    }
    const value = BigInt(rv);
    const before = last.get(name);
    if (before !== undefined && value <= before) {
      problems.push(`${name}: resourceVersion ${rv} after ${before}`);
    }
    last.set(name, value);
  }
  return problems;
}

/**
 * A LIST, then a WATCH from its resourceVersion, against the changes `driver` made: the list is the
 * state after some prefix of them (a replica may not have seen the latest yet), and the watch brings
 * exactly the rest, in order; resourceVersions are decimal, strictly increasing per object and, for
 * events, after the list's. Returns what breaks that, and how many events were others' changes.
 */
function listThenWatchProblems(
  driver: Driver,
  list: { metadata: { resourceVersion?: string }; items: ClusterGateway[] },
  events: WatchEvent<ClusterGateway>[],
): { problems: string[]; others: number } {
  const problems: string[] = [];
  const errors = errorsOf(events);
  if (errors.length > 0) return { problems: [`the watch answered ${describeError(errors[0])}`], others: 0 };
  const listed = new Map(list.items.map((i) => [i.metadata.name, i.metadata.labels?.[stepLabel] ?? '']));
  let k = -1;
  for (let i = 0; i <= driver.changes.length; i++) {
    if (isDeepStrictEqual(driver.stateAfter(i), listed)) k = i;
  }
  if (k < 0) {
    const shown = [...listed].map(([n, s]) => `${n} ${s}`).join(', ');
    return { problems: [`the list (${shown}) is no state the Secrets went through`], others: 0 };
  }
  const split = ourChanges(events.map(changeOf), listed);
  const want = driver.changes.slice(k);
  if (!isDeepStrictEqual(split.ours, want)) {
    problems.push(`the watch delivered [${fmt(split.ours)}], the changes after the list were [${fmt(want)}]`);
  }
  problems.push(
    ...resourceVersionProblems([
      ...list.items.map((i) => ({ name: i.metadata.name, rv: i.metadata.resourceVersion })),
      ...events.map((e) => ({
        name: e.object.metadata?.name ?? '?',
        rv: e.object.metadata?.resourceVersion,
      })),
    ]),
  );
  const listRv = list.metadata.resourceVersion ?? '';
  if (/^[0-9]+$/.test(listRv)) {
    for (const e of events) {
      const rv = e.object.metadata?.resourceVersion ?? '';
      if (/^[0-9]+$/.test(rv) && BigInt(rv) <= BigInt(listRv)) {
        problems.push(`${e.type} ${e.object.metadata?.name} has resourceVersion ${rv}, not after the list's`);
      }
    }
  } else {
    problems.push(`the list's resourceVersion ${JSON.stringify(listRv)} is not a decimal integer`);
  }
  return { problems, others: split.others.length };
}

// ---------------------------------------------------------------------------------------------------
// Watches through the hub

interface WatchSession {
  events: WatchEvent<ClusterGateway>[];
  /** The stream ended (by the server, or an error) rather than by stop(). */
  readonly endedByServer: boolean;
  readonly ended: boolean;
  readonly error: string | undefined;
  stop(): Promise<void>;
}

/** A watch through the hub's aggregator (bookmarks left out); its events as they arrive. */
function openWatch(collection: string): WatchSession {
  const abort = new AbortController();
  const events: WatchEvent<ClusterGateway>[] = [];
  let ended = false;
  let endedByServer = false;
  let error: string | undefined;
  const done = (async () => {
    try {
      for await (const event of hub.watch<ClusterGateway>(collection, abort.signal)) {
        if (event.type !== 'BOOKMARK') events.push(event);
      }
    } catch (err) {
      if (!abort.signal.aborted) error = (err as Error).message;
    } finally {
      ended = true;
      endedByServer = !abort.signal.aborted;
    }
  })();
  return {
    events,
    get ended() {
      return ended;
    },
    get endedByServer() {
      return endedByServer;
    },
    get error() {
      return error;
    },
    stop: async () => {
      abort.abort();
      await done;
    },
  };
}

const errorsOf = (events: WatchEvent<ClusterGateway>[]) =>
  events.filter((e) => e.type === 'ERROR').map((e) => e.object as unknown as Record<string, unknown>);
const describeError = (s: Record<string, unknown> | undefined) =>
  s ? `ERROR ${s.code} ${s.reason}: ${s.message}` : '';

/** The first answer of a watch: its HTTP status, and the first event (or the Status body). */
async function firstWatchAnswer(
  requestPath: string,
): Promise<{ status: number; first: Record<string, unknown> | undefined; ended: boolean }> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 10_000);
  let text = '';
  let ended = false;
  let status = 0;
  try {
    const res = await hub.send('GET', requestPath, { signal: abort.signal });
    status = res.statusCode ?? 0;
    res.setEncoding('utf8');
    try {
      for await (const chunk of res) text += chunk;
      ended = true;
    } catch {
      // aborted: the stream stayed open for 10 s
    }
  } finally {
    clearTimeout(timer);
  }
  const line = text.split('\n').find((l) => l.trim());
  return { status, first: line ? (JSON.parse(line) as Record<string, unknown>) : undefined, ended };
}

// ---------------------------------------------------------------------------------------------------
// kubectl get -w

interface KubectlWatch {
  output(): string;
  stderr(): string;
  /** undefined while it runs. */
  exit(): string | undefined;
  stop(): Promise<void>;
}

function startKubectlWatch(args: string[]): KubectlWatch {
  const child = spawn(binaryPath('kubectl'), [`--kubeconfig=${kubeconfig}`, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  kubectlProcesses.add(child);
  let out = '';
  let err = '';
  let exit: string | undefined;
  child.stdout.setEncoding('utf8').on('data', (c: string) => {
    out += c;
  });
  child.stderr.setEncoding('utf8').on('data', (c: string) => {
    err += c;
  });
  const closed = new Promise<void>((resolve) => {
    child.once('close', (code, signal) => {
      exit = signal ? `killed by ${signal}` : `exited ${code}`;
      kubectlProcesses.delete(child);
      resolve();
    });
  });
  return {
    output: () => out,
    stderr: () => err,
    exit: () => exit,
    stop: async () => {
      if (exit === undefined) child.kill('SIGTERM');
      await closed;
    },
  };
}

/** The EVENT, NAME and last (the step label) columns of `kubectl get -w --output-watch-events -L` rows. */
function tableChanges(output: string): Change[] {
  return output
    .split('\n')
    .filter((l) => /^(ADDED|MODIFIED|DELETED)\s/.test(l))
    .map((l) => {
      const f = l.trim().split(/\s+/);
      return { type: f[0] ?? '', name: f[1] ?? '', step: f.at(-1) ?? '' };
    });
}

/** The lines `type name step resourceVersion` of the jsonpath watch. */
function jsonpathChanges(output: string): (Change & { rv: string })[] {
  return output
    .split('\n')
    .filter((l) => /^(ADDED|MODIFIED|DELETED) /.test(l))
    .map((l) => {
      const [type = '', name = '', step = '', rv = ''] = l.trim().split(' ');
      return { type, name, step, rv };
    });
}

// ---------------------------------------------------------------------------------------------------

describe('three gateway replicas behind the hub aggregator', () => {
  before(async () => {
    hub = await hubClient();
    const env = environmentState();
    assert.ok(env.image, 'the e2e environment runs real nodes and their image (e2e/setup.ts: nodes: true)');
    image = env.image;
    kubeconfig = env.hub.kubeconfig;
    environmentApiService = await hub.get<ApiService>(apiServicePath);
    assert.ok(isAvailable(environmentApiService), "the environment's APIService is Available to begin with");
    cmaExisted = !!(await hub.getOptional(cmaPath));
    webhookExisted = !!(await hub.getOptional(webhookConfigPath));

    const started = Date.now();
    await helm(
      'install',
      release,
      chart,
      '--namespace',
      namespace,
      '--create-namespace',
      ...nodeChartValues({ image }, [
        `gateway.replicas=${replicas}`,
        `gateway.credentialNamespace.name=${credentialNamespace}`,
        'gateway.credentialNamespace.create=true',
        'gateway.ocmIntegration=false',
      ]),
    );
    installed = true;
    await waitFor(
      'the APIService to point at the installed gateway and be Available',
      async () => {
        const obj = await hub.getOptional<ApiService>(apiServicePath);
        return pointsAtInstall(obj) && isAvailable(obj);
      },
      { timeoutMs: 120_000 },
    );
    const pods = await gatewayRolledOut(180_000);
    const tls = await hub.get<KubeObject & { data: Record<string, string> }>(
      `/api/v1/namespaces/${namespace}/secrets/${gatewayName}-tls`,
    );
    gatewayCa = Buffer.from(tls.data['ca.crt'] ?? '', 'base64').toString();
    console.log(
      `[gateway-replicas] helm install (gateway.replicas=${replicas}) -> APIService Available, ${pods.length} pods ready endpoints: ${seconds(Date.now() - started)} s`,
    );

    // Test 1's and test 2's clusters, made now so that the replicas' probers have looked at them by then.
    const cluster1 = env.managed.find((c) => c.name === 'cluster1');
    assert.ok(cluster1, 'the environment has cluster1');
    await createCluster(rvCluster, { endpoint: unreachableEndpoint, token: 'e2e-not-a-token' });
    await createCluster(unreachableCluster, { endpoint: unreachableEndpoint, token: 'e2e-not-a-token' });
    // cluster1 under another name, at the address pods reach it (the bridge), with the gateway's token for it.
    await createCluster(reachableCluster, {
      endpoint: cluster1.reachableServer,
      'ca.crt': clusterEndpoint('cluster1')['ca.crt'],
      token: await gatewayToken(hub, 'cluster1'),
    });
  });

  after(async () => {
    // Leave the environment as found (e2e/chart-install.test.ts's `after`). Every step runs whatever failed before it.
    const attempt = async (what: string, step: () => Promise<unknown>) =>
      step().catch((err: Error) => console.log(`[gateway-replicas] cleanup: ${what}: ${err.message}`));
    for (const child of kubectlProcesses) child.kill('SIGTERM');
    if (installed) await attempt('helm uninstall', () => helm('uninstall', release, '-n', namespace));
    await attempt('leftovers', async () => {
      if (!cmaExisted) await hub.delete(cmaPath);
      if (!webhookExisted) await hub.delete(webhookConfigPath);
      await hub.request(
        'DELETE',
        `/apis/certificates.k8s.io/v1/certificatesigningrequests?labelSelector=${encodeURIComponent(`open-cluster-management.io/addon-name=${addon}`)}`,
      );
      const current = await hub.getOptional<ApiService>(apiServicePath);
      if (current && !sameService(current, environmentApiService)) await hub.delete(apiServicePath);
      await hub.delete(`/api/v1/namespaces/${namespace}`);
      // The chart keeps a credential namespace it made on uninstall (it holds credentials): this one goes.
      await hub.delete(`/api/v1/namespaces/${credentialNamespace}`);
    });
    // Its pods (the manager's and the gateway's) stop on the hub's node with the namespace.
    await awaitInstallGone(hub, [namespace, credentialNamespace], attempt);
    await attempt("the environment's APIService", async () => {
      await restoreEnvironmentApiService(hub, environmentApiService.spec);
      assert.ok(sameService(await hub.get<ApiService>(apiServicePath), environmentApiService));
    });
    // Not swallowed: the files after this one need the environment's gateway behind the APIService again.
    try {
      const names = await waitFor(
        "the environment's gateway to list its clusters through the aggregator again",
        async () => {
          const list = await hub.list<ClusterGateway>(api);
          const listed = list.items.map((i) => i.metadata.name);
          return ['cluster1', 'cluster2'].every((c) => listed.includes(c)) ? listed : undefined;
        },
        { timeoutMs: 30_000 },
      );
      assert.ok(
        !names.some((n) => n.startsWith('cg-')),
        `no cluster of this file listed by the environment's gateway: ${names.join(', ')}`,
      );
    } finally {
      hub?.close();
    }
  });

  test('200 GET-then-PUT health pairs through the aggregator, spread over the 3 replicas: no 409, and every replica gives the object the same resourceVersion', async () => {
    const pods = await gatewayRolledOut();
    // Every replica's prober has given its verdict (the cluster is unreachable): nothing else changes it.
    await waitFor(
      `every replica to show ${rvCluster} probed unhealthy`,
      async () => {
        for (const pod of pods) {
          const view = await viewOf(pod, rvCluster);
          if (
            view.status.healthy ||
            !view.status.healthyReason ||
            view.status.healthyReason === notProbedYetReason
          )
            return false;
        }
        return true;
      },
      { timeoutMs: 30_000 },
    );
    const auditStart = auditSize();
    const started = Date.now();
    const pairs = 200;
    let accepted = 0;
    const conflicts: string[] = [];
    const failures: string[] = [];
    for (let i = 0; i < pairs; i++) {
      let rv = '';
      try {
        const current = await hub.get<ClusterGateway>(`${api}/${rvCluster}`);
        rv = current.metadata.resourceVersion;
        const healthy = i % 2 === 1;
        await hub.request('PUT', `${api}/${rvCluster}/health`, {
          body: {
            apiVersion: 'cluster.core.oam.dev/v1alpha1',
            kind: 'ClusterGateway',
            metadata: { name: rvCluster, resourceVersion: rv },
            status: {
              healthy,
              healthyReason: `e2e pair ${i}: ${healthy ? 'back in service' : 'maintenance'}`,
            },
          },
        });
        accepted++;
      } catch (err) {
        if (err instanceof StatusError && err.code === 409)
          conflicts.push(`pair ${i} (resourceVersion ${rv})`);
        else failures.push(`pair ${i}: ${(err as Error).message}`);
      }
    }
    const took = seconds(Date.now() - started);

    // Which replica served each accepted PUT: it patched the Secret itself, from its pod IP.
    const writers = await waitFor(
      `the hub's audit log to show a patch of ${rvCluster} by the installed gateway for each of the ${accepted} accepted PUTs`,
      () => {
        const ips = gatewayPatchesOf(auditStart, rvCluster);
        return ips.length >= accepted ? ips : undefined;
      },
      { timeoutMs: 15_000 },
    );
    const byPod = Object.fromEntries(
      pods.map((p) => [p.metadata.name, writers.filter((ip) => ip === p.ip).length]),
    );
    console.log(
      `[gateway-replicas] ${pairs} GET+PUT pairs in ${took} s: ${accepted} accepted, ${conflicts.length} 409, ` +
        `${failures.length} other failures; health marks written by pod: ${JSON.stringify(byPod)}`,
    );

    // Every replica's own view once all of them show the hub's Secret as it is now.
    type SecretWithAnnotations = KubeObject & { metadata: { annotations?: Record<string, string> } };
    const statusAnnotations = (a: Record<string, string> | undefined) =>
      Object.fromEntries(
        Object.entries(a ?? {}).filter(([k]) => k.startsWith('status.cluster.core.oam.dev/')),
      );
    const views = await waitFor(
      `every replica's view of ${rvCluster} to carry the Secret's current status annotations`,
      async () => {
        const secret = await hub.get<SecretWithAnnotations>(secretPath(rvCluster));
        const want = statusAnnotations(secret.metadata.annotations);
        const seen = new Map<string, ClusterGateway>();
        for (const pod of pods) {
          const view = await viewOf(pod, rvCluster);
          if (!isDeepStrictEqual(statusAnnotations(view.metadata.annotations), want)) return undefined;
          seen.set(pod.metadata.name, view);
        }
        return seen;
      },
      { timeoutMs: 15_000 },
    );
    const versions = Object.fromEntries([...views].map(([pod, v]) => [pod, v.metadata.resourceVersion]));

    // Every finding at once: which of them hold tells more than the first that does not.
    const problems: string[] = [];
    if (failures.length > 0)
      problems.push(
        `${failures.length} requests failed other than with 409: ${failures.slice(0, 5).join('; ')}`,
      );
    if (conflicts.length > 0) {
      problems.push(
        `${conflicts.length} of ${pairs} PUTs with the resourceVersion the GET just before returned got 409 Conflict; the first: ${conflicts.slice(0, 5).join(', ')}`,
      );
    }
    const idle = pods.filter((p) => !byPod[p.metadata.name]).map((p) => p.metadata.name);
    if (idle.length > 0) problems.push(`gateway pods that served none of the PUTs: ${idle.join(', ')}`);
    if (new Set(Object.values(versions)).size !== 1) {
      problems.push(`the replicas give ${rvCluster} different resourceVersions: ${JSON.stringify(versions)}`);
    }
    const notDecimal = Object.values(versions).filter((rv) => !/^[0-9]+$/.test(rv));
    if (notDecimal.length > 0)
      problems.push(`resourceVersions that are not decimal integers: ${notDecimal.join(', ')}`);
    assert.deepEqual(problems, []);
  });

  test('a health PUT answers with the status it wrote, on a reachable and on an unreachable cluster; a later GET shows the merged view', async () => {
    const pods = await gatewayRolledOut();
    // The prober's verdicts, on every replica: cluster1 (under another name) healthy, 127.0.0.1:1 not.
    const probeReason = await waitFor(
      `every replica to show ${reachableCluster} healthy and ${unreachableCluster} probed unhealthy`,
      async () => {
        const reasons = new Map<string, string>();
        for (const pod of pods) {
          const reachable = await viewOf(pod, reachableCluster);
          const unreachable = await viewOf(pod, unreachableCluster);
          const reason = unreachable.status.healthyReason;
          if (
            !reachable.status.healthy ||
            unreachable.status.healthy ||
            !reason ||
            reason === notProbedYetReason
          )
            return undefined;
          reasons.set(pod.metadata.name, reason);
        }
        return reasons;
      },
      { timeoutMs: 30_000 },
    );
    const probeReasons = new Set(probeReason.values());
    console.log(
      `[gateway-replicas] the prober's verdict on ${unreachableCluster}: ${[...probeReasons].join(' | ')}`,
    );

    // What each mark must look like afterwards: an unhealthy mark wins; a healthy one is shown when the
    // prober agrees, else the prober's verdict is (clusters/health-precedence.ts).
    const steps = [
      { cluster: reachableCluster, healthy: false, reason: 'e2e: maintenance window', merged: 'mark' },
      { cluster: reachableCluster, healthy: true, reason: 'e2e: back in service', merged: 'mark' },
      { cluster: unreachableCluster, healthy: true, reason: 'e2e: declared healthy', merged: 'probe' },
      { cluster: unreachableCluster, healthy: false, reason: 'e2e: retired', merged: 'mark' },
      { cluster: unreachableCluster, healthy: true, reason: 'e2e: declared healthy again', merged: 'probe' },
    ] as const;
    const answers: string[] = [];
    const wrongAnswers: string[] = [];
    const wrongViews: string[] = [];
    for (const step of steps) {
      const written = { healthy: step.healthy, healthyReason: step.reason };
      const answer = await hub.request<ClusterGateway>('PUT', `${api}/${step.cluster}/health`, {
        body: {
          apiVersion: 'cluster.core.oam.dev/v1alpha1',
          kind: 'ClusterGateway',
          metadata: { name: step.cluster },
          status: written,
        },
      });
      const answered = { healthy: answer.status.healthy, healthyReason: answer.status.healthyReason };
      answers.push(`${step.cluster} ${JSON.stringify(written)} -> ${JSON.stringify(answered)}`);
      if (!isDeepStrictEqual(answered, written)) {
        wrongAnswers.push(
          `PUT ${step.cluster} ${JSON.stringify(written)} answered ${JSON.stringify(answered)}`,
        );
      }

      // Later GETs: once a replica shows the mark among its annotations it has read the write; its view is then the merged one.
      await waitFor(
        `every replica to have read the mark ${JSON.stringify(step.reason)} on ${step.cluster}`,
        async () => {
          for (const pod of pods) {
            const view = await viewOf(pod, step.cluster);
            if (view.metadata.annotations?.[annotationHealthyReason] !== step.reason) return false;
          }
          return true;
        },
        { timeoutMs: 15_000 },
      );
      for (const pod of pods) {
        const view = await viewOf(pod, step.cluster);
        const want =
          step.merged === 'mark'
            ? written
            : { healthy: false, healthyReason: probeReason.get(pod.metadata.name) ?? '(no probe reason)' };
        const shown = { healthy: view.status.healthy, healthyReason: view.status.healthyReason };
        if (!isDeepStrictEqual(shown, want)) {
          wrongViews.push(
            `${pod.metadata.name} after ${step.cluster} ${JSON.stringify(written)}: ${JSON.stringify(shown)}, want ${JSON.stringify(want)}`,
          );
        }
      }
      // And through the aggregator, as a client reads it.
      const got = await hub.get<ClusterGateway>(`${api}/${step.cluster}`);
      const shown = { healthy: got.status.healthy, healthyReason: got.status.healthyReason };
      const ok =
        step.merged === 'mark'
          ? isDeepStrictEqual(shown, written)
          : !shown.healthy && probeReasons.has(shown.healthyReason ?? '');
      if (!ok) {
        wrongViews.push(
          `GET ${step.cluster} through the aggregator after ${JSON.stringify(written)}: ${JSON.stringify(shown)}`,
        );
      }
    }
    console.log(`[gateway-replicas] health PUT answers: ${answers.join('; ')}`);
    assert.deepEqual(
      wrongAnswers,
      [],
      'every PUT answers with status.healthy and status.healthyReason as written',
    );
    assert.deepEqual(wrongViews, [], 'a later GET shows the merged view');
  });

  test('50 rounds of LIST then WATCH from its resourceVersion through the aggregator while Secrets are added, relabelled and deleted: every later change exactly once, in order', async () => {
    await gatewayRolledOut();
    const rounds = 50;
    const failures: string[] = [];
    let events = 0;
    let others = 0;
    let expired = 0;
    let timedOut = 0;
    const failedRounds = new Set<number>();
    const started = Date.now();
    for (let r = 0; r < rounds && timedOut < 5; r++) {
      const set = `watch-${r}`;
      const name = (x: string) => `cg-rw-${r}-${x}`;
      const driver = new Driver(set);
      await driver.create(name('a'), 'a0');
      await driver.create(name('b'), 'b0');
      const list = await hub.list<ClusterGateway>(`${api}?${selector(set)}`);
      const listRv = list.metadata.resourceVersion ?? '';
      // The watch and the changes at the same time: some land before the watch is open, some after.
      const watch = openWatch(`${api}?${selector(set)}&resourceVersion=${encodeURIComponent(listRv)}`);
      await driver.create(name('c'), 'c0');
      await driver.relabel(name('a'), 'a1');
      await driver.remove(name('b'));
      await driver.relabel(name('c'), 'c1');
      await driver.relabel(name('a'), 'a2');
      await driver.create(name('d'), 'd0'); // the last change: once its event is in, every earlier one is
      const last = await waitFor(
        `round ${r}: the ADDED event of the last change, or the end of the watch`,
        () =>
          watch.ended ||
          watch.events.some(
            (e) => e.type === 'ERROR' || (e.type === 'ADDED' && e.object.metadata?.name === name('d')),
          ),
        { timeoutMs: 5_000 },
      ).catch(() => false);
      await watch.stop();
      const hubSecrets = await hub.list<Secret>(`${secretsPath}?${selector(set)}`);
      await hub.request('DELETE', `${secretsPath}?${selector(set)}`);

      const fail = (what: string) => {
        failures.push(`round ${r} (list resourceVersion ${listRv}): ${what}`);
        failedRounds.add(r);
      };
      events += watch.events.length;
      if (errorsOf(watch.events)[0]?.code === 410) expired++;
      if (!last && errorsOf(watch.events).length === 0) {
        timedOut++;
        fail(`no event for the last change within 5 s; events: ${fmt(watch.events.map(changeOf))}`);
        continue;
      }
      if (watch.error) {
        fail(`the watch failed: ${watch.error}`);
        continue;
      }
      // The list is the state after some prefix of the changes; the watch must bring exactly the rest.
      const checked = listThenWatchProblems(driver, list, watch.events);
      others += checked.others;
      for (const problem of checked.problems) fail(problem);
      if (errorsOf(watch.events).length > 0) continue;
      // The state built from the list and the events is the hub's: names and labels.
      const built = new Map(list.items.map((i) => [i.metadata.name, i.metadata.labels ?? {}]));
      for (const e of watch.events) {
        const n = e.object.metadata?.name ?? '?';
        if (e.type === 'DELETED') built.delete(n);
        else built.set(n, e.object.metadata?.labels ?? {});
      }
      const onHub = new Map(hubSecrets.items.map((s) => [s.metadata.name, s.metadata.labels ?? {}]));
      const sorted = (m: Map<string, Record<string, string>>) => [...m].sort(([a], [b]) => (a < b ? -1 : 1));
      if (!isDeepStrictEqual(sorted(built), sorted(onHub))) {
        fail(
          `list + events end at ${JSON.stringify(sorted(built).map(([n, l]) => [n, l[stepLabel]]))}, the hub has ${JSON.stringify(sorted(onHub).map(([n, l]) => [n, l[stepLabel]]))}`,
        );
      }
    }
    console.log(
      `[gateway-replicas] ${rounds} list+watch rounds in ${seconds(Date.now() - started)} s: ${events} events ` +
        `(${others} not ours), ${failedRounds.size} rounds failed (${expired} answered 410, ${timedOut} without the last event)`,
    );
    assert.ok(timedOut < 5, `gave up after 5 rounds whose watch never delivered the last change`);
    assert.deepEqual(
      failures.slice(0, 12),
      [],
      `${failedRounds.size} of ${rounds} rounds failed; their first findings`,
    );
  });

  test('kubectl get clustergateways -w keeps showing every change exactly once while a replica it does not use is replaced', async () => {
    const set = 'kubectl';
    const name = (i: number) => `cg-rk-${i}`;
    const driver = new Driver(set);
    await driver.create(name(1), 's0');
    const pods = await gatewayRolledOut();
    const baseline = await steadyInflight(pods);
    const watchArgs = ['get', 'clustergateways', '-w', '--output-watch-events', '-l', `${setLabel}=${set}`];
    // What users see (a table, with the step label as a column), and the same with each resourceVersion.
    const table = startKubectlWatch([...watchArgs, '-L', stepLabel]);
    const json = startKubectlWatch([
      ...watchArgs,
      '-o',
      `jsonpath={.type} {.object.metadata.name} {.object.metadata.labels.${stepLabel}} {.object.metadata.resourceVersion}{"\\n"}`,
    ]);
    const both = [
      { what: 'kubectl get -w (table)', kubectl: table, changes: () => tableChanges(table.output()) },
      { what: 'kubectl get -w (jsonpath)', kubectl: json, changes: () => jsonpathChanges(json.output()) },
    ];
    const shown = async (what: string, change: Change) => {
      const same = (c: Change) => c.type === change.type && c.name === change.name && c.step === change.step;
      await waitFor(
        `both kubectl watches to show ${what}: ${fmt([change])}`,
        () => both.every((k) => k.changes().some(same)),
        {
          timeoutMs: 15_000,
          failFast: () => {
            for (const k of both) {
              if (k.kubectl.exit() !== undefined)
                throw new Error(`${k.what} ${k.kubectl.exit()}: ${k.kubectl.stderr().trim()}`);
            }
          },
        },
      ).catch((err: Error) => {
        throw new Error(
          `${err.message}; table: [${fmt(both[0]?.changes() ?? [])}], jsonpath: [${fmt(both[1]?.changes() ?? [])}]; stderr: ${table.stderr().trim()} ${json.stderr().trim()}`,
        );
      });
    };
    try {
      await shown('the listed cluster', { type: 'ADDED', name: name(1), step: 's0' });
      const serving = await podsServingNewWatches(pods, baseline, 2);
      const victim = pods.find((p) => !serving.includes(p.metadata.name));
      assert.ok(victim, `a replica serves neither kubectl watch (they are on ${serving.join(', ')})`);
      console.log(
        `[gateway-replicas] kubectl watches served by ${serving.join(' and ')}; deleting ${victim.metadata.name}`,
      );

      // Before.
      await driver.relabel(name(1), 's1');
      await driver.create(name(2), 's0');
      await shown('the changes before the deletion', { type: 'ADDED', name: name(2), step: 's0' });
      // During: the replica is deleted, its replacement not yet running.
      await hub.delete(`/api/v1/namespaces/${namespace}/pods/${victim.metadata.name}`);
      await driver.relabel(name(2), 's1');
      await driver.create(name(3), 's0');
      await driver.remove(name(1));
      const replaced = await gatewayRolledOut();
      assert.ok(
        !replaced.some((p) => p.metadata.name === victim.metadata.name),
        'the deleted replica is gone',
      );
      for (const s of serving) {
        assert.ok(
          replaced.some((p) => p.metadata.name === s),
          `${s}, serving a kubectl watch, still runs`,
        );
      }
      // After: the replacement serves.
      await driver.relabel(name(3), 's1');
      await driver.remove(name(2));
      await driver.create(name(4), 's0');
      await shown('every change', { type: 'ADDED', name: name(4), step: 's0' });

      const problems: string[] = [];
      for (const k of both) {
        if (k.kubectl.exit() !== undefined)
          problems.push(`${k.what} ${k.kubectl.exit()}: ${k.kubectl.stderr()}`);
      }
      const fromTable = ourChanges(tableChanges(table.output()));
      const fromJson = ourChanges(jsonpathChanges(json.output()));
      console.log(
        `[gateway-replicas] kubectl table rows: ${fmt(tableChanges(table.output()))}; others than ours: table ${fromTable.others.length}, jsonpath ${fromJson.others.length}`,
      );
      if (fmt(fromTable.ours) !== fmt(driver.changes)) {
        problems.push(`the table showed [${fmt(fromTable.ours)}], the changes were [${fmt(driver.changes)}]`);
      }
      if (fmt(fromJson.ours) !== fmt(driver.changes)) {
        problems.push(
          `the jsonpath output showed [${fmt(fromJson.ours)}], the changes were [${fmt(driver.changes)}]`,
        );
      }
      problems.push(
        ...resourceVersionProblems(jsonpathChanges(json.output())).map((p) => `jsonpath output: ${p}`),
      );
      assert.deepEqual(problems, [], 'each change shown exactly once, in order, by both kubectl watches');
    } finally {
      await table.stop();
      await json.stop();
    }
  });

  test('a watch resumed from the last resourceVersion after its replica is deleted: exactly the changes since, or 410 Expired and a relist that recovers', async () => {
    const set = 'resume';
    const name = (i: number) => `cg-rr-${i}`;
    const driver = new Driver(set);
    await driver.create(name(1), 's0');
    const pods = await gatewayRolledOut();
    const baseline = await steadyInflight(pods);
    // A watch from now (the current state, then changes): one replica serves it throughout.
    const first = openWatch(`${api}?${selector(set)}`);
    let lastRv = '';
    try {
      await waitFor('the first watch to show the cluster', () =>
        first.events.some((e) => e.type === 'ADDED' && e.object.metadata?.name === name(1)),
      );
      await driver.relabel(name(1), 's1');
      const modified = await waitFor('the first watch to deliver the change', () =>
        first.events.find((e) => e.type === 'MODIFIED' && e.object.metadata?.labels?.[stepLabel] === 's1'),
      );
      lastRv = modified.object.metadata.resourceVersion;
      const [serving] = await podsServingNewWatches(pods, baseline, 1);
      assert.ok(serving);
      console.log(
        `[gateway-replicas] the first watch is served by ${serving}, last resourceVersion ${lastRv}; deleting it`,
      );
      await hub.delete(`/api/v1/namespaces/${namespace}/pods/${serving}`);
      // Its replica gone, the watch ends: proof that it was the one serving it.
      await waitFor('the watch served by the deleted replica to end', () => first.ended, {
        timeoutMs: 45_000,
      });
      assert.deepEqual(errorsOf(first.events), [], 'the first watch saw no ERROR');
    } finally {
      await first.stop();
    }
    const doneBefore = driver.changes.length;
    // Changes while the replica is replaced.
    await driver.relabel(name(1), 's2');
    await driver.create(name(2), 's0');
    await gatewayRolledOut();

    const resumed = openWatch(`${api}?${selector(set)}&resourceVersion=${encodeURIComponent(lastRv)}`);
    let outcome = '';
    try {
      const since = driver.changes.slice(doneBefore);
      const arrived = await waitFor(
        `the resumed watch to deliver the ${since.length} changes since ${lastRv}, or an ERROR, or end`,
        () =>
          resumed.ended ||
          errorsOf(resumed.events).length > 0 ||
          ourChanges(resumed.events.map(changeOf), new Map([[name(1), 's1']])).ours.length >= since.length,
        { timeoutMs: 10_000 },
      ).catch(() => false);
      const error = errorsOf(resumed.events)[0];
      if (error) {
        // client-go's answer to 410: relist, then watch from the list.
        outcome = describeError(error);
        assert.equal(error.code, 410, `the resumed watch's ERROR: ${describeError(error)}`);
        assert.equal(error.reason, 'Expired');
        await resumed.stop();
        const list = await hub.list<ClusterGateway>(`${api}?${selector(set)}`);
        const rewatch = openWatch(
          `${api}?${selector(set)}&resourceVersion=${encodeURIComponent(list.metadata.resourceVersion ?? '')}`,
        );
        try {
          await driver.remove(name(1));
          await waitFor(
            'the watch from the relist to deliver the deletion, or end',
            () =>
              rewatch.ended ||
              rewatch.events.some(
                (e) => e.type === 'ERROR' || (e.type === 'DELETED' && e.object.metadata?.name === name(1)),
              ),
            { timeoutMs: 10_000 },
          ).catch(() => false);
          assert.deepEqual(
            listThenWatchProblems(driver, list, rewatch.events).problems,
            [],
            'the relist and the watch from it show every change once',
          );
        } finally {
          await rewatch.stop();
        }
      } else {
        outcome = 'resumed';
        assert.ok(arrived, `the resumed watch delivered [${fmt(resumed.events.map(changeOf))}] within 10 s`);
        assert.equal(resumed.error, undefined, 'the resumed watch did not fail');
        const from = driver.changes.length;
        await driver.remove(name(1));
        await waitFor(
          'the resumed watch to deliver the deletion made after it opened',
          () =>
            resumed.ended ||
            resumed.events.some((e) => e.type === 'DELETED' && e.object.metadata?.name === name(1)),
          { timeoutMs: 10_000 },
        ).catch(() => false);
        assert.equal(
          fmt(ourChanges(resumed.events.map(changeOf), new Map([[name(1), 's1']])).ours),
          fmt(driver.changes.slice(doneBefore)),
          `the resumed watch delivers exactly the changes after ${lastRv} (${from - doneBefore} before it opened, 1 after)`,
        );
        const problems = resourceVersionProblems([
          { name: name(1), rv: lastRv },
          ...resumed.events.map((e) => ({
            name: e.object.metadata?.name ?? '?',
            rv: e.object.metadata?.resourceVersion,
          })),
        ]);
        assert.deepEqual(problems, [], 'resourceVersions strictly increase from the one resumed from');
      }
    } finally {
      await resumed.stop();
      console.log(`[gateway-replicas] the resumed watch: ${outcome || 'failed'}`);
    }
  });

  test('a watch from a resourceVersion no replica can serve is 410 Expired as kube-apiserver answers it; a relist and a watch from it then work', async () => {
    await gatewayRolledOut();
    // What kube-apiserver sends for a watch from a version it no longer has (k8s.io/apiserver: the watch
    // cache's "too old resource version", etcd's compaction; errors.NewResourceExpired): HTTP 200, one ERROR
    // event whose object is a 410 Expired Status, then the end of the stream. (This hub's etcd still holds
    // revision 1 when the file runs early, so the hub itself cannot be asked for a reference here.)
    const want = {
      http: 200,
      type: 'ERROR',
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      reason: 'Expired',
      code: 410,
      ended: true,
    };
    const shape = (answer: Awaited<ReturnType<typeof firstWatchAnswer>>) => {
      const status = (answer.status === 200 ? answer.first?.object : answer.first) as
        | Record<string, unknown>
        | undefined;
      return {
        http: answer.status,
        type: answer.status === 200 ? answer.first?.type : undefined,
        kind: status?.kind,
        apiVersion: status?.apiVersion,
        status: status?.status,
        reason: status?.reason,
        code: status?.code,
        ended: answer.ended,
      };
    };
    const set = 'expired';
    const driver = new Driver(set);
    const problems: string[] = [];
    for (let cycle = 0; cycle < 5; cycle++) {
      const answer = await firstWatchAnswer(`${api}?watch=true&resourceVersion=1&${selector(set)}`);
      const got = shape(answer);
      if (!isDeepStrictEqual(got, want)) {
        problems.push(
          `cycle ${cycle}: the watch from 1 answered ${JSON.stringify(got)} (${JSON.stringify(answer.first)}), want ${JSON.stringify(want)}`,
        );
      }
      // The relist, and a watch from it.
      const list = await hub.list<ClusterGateway>(`${api}?${selector(set)}`);
      const watch = openWatch(
        `${api}?${selector(set)}&resourceVersion=${encodeURIComponent(list.metadata.resourceVersion ?? '')}`,
      );
      try {
        await driver.create(`cg-re-${cycle}`, 's0');
        await waitFor(
          `cycle ${cycle}: the watch from the relist to deliver the new cluster, or end`,
          () =>
            watch.ended ||
            watch.events.some(
              (e) =>
                e.type === 'ERROR' || (e.type === 'ADDED' && e.object.metadata?.name === `cg-re-${cycle}`),
            ),
          { timeoutMs: 5_000 },
        ).catch(() => false);
        for (const problem of listThenWatchProblems(driver, list, watch.events).problems) {
          problems.push(
            `cycle ${cycle}, the relist (${list.metadata.resourceVersion}) and a watch from it: ${problem}`,
          );
        }
      } finally {
        await watch.stop();
      }
    }
    assert.deepEqual(problems, []);
  });
});

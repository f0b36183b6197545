/**
 * Proxy latency benchmark (`npm run bench:proxy`): what the gateway adds to
 * a small GET, on loopback, against real components.
 *
 * Starts its own local environment (hub + cluster1, gateway behind the real
 * kube-aggregator) in .local/bench and measures `GET /api/v1/namespaces/default`
 * on cluster1 three ways, each over keep-alive HTTPS with client certificates:
 *
 *   a. direct to cluster1's kube-apiserver (its admin certificate);
 *   b. straight to the gateway's proxy subresource, authenticating as the
 *      aggregator does (front-proxy certificate + X-Remote-User/-Group);
 *   c. through the hub's kube-aggregator, then the gateway (hub admin certificate).
 *
 * Plus b2: like b, but as a user outside system:masters, so every request
 * goes through the SubjectAccessReview cache (system:masters skips review).
 *
 * Per path it prints req/s, latency percentiles, the gateway's RSS before and
 * after, its CPU time per request (all threads) and how long its main thread
 * waited for a CPU per request (the machine is small and shared); and, for
 * b, b2 and c, how many hub API requests that the gateway could make
 * (TokenReview, SubjectAccessReview, Secret and ManagedCluster reads) the
 * hub served meanwhile: the hot path should make none.
 *
 * Flags: --requests=N (2000) --concurrency=C (8) --warmup=W (1000, per path)
 *        --profile  also CPU-profile an extra gateway process (node --cpu-prof)
 *                   under run b and print where its time goes
 *        --keep     leave the environment running (Ctrl-C stops it)
 */
import { readdirSync, readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { repoRoot } from '../../hack/localenv/binaries.ts';
import { type Environment, startEnvironment } from '../../hack/localenv/environment.ts';
import { freePort } from '../../hack/localenv/ports.ts';
import type { ManagedProcess } from '../../hack/localenv/supervisor.ts';
import { waitFor } from '../../hack/localenv/wait.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import { loadKubeconfig } from '../../shared/kube/kubeconfig.ts';
import { cpuUsage, percentile, rssKb } from './measure.ts';

const stateDir = path.join(repoRoot, '.local', 'bench');
const objectPath = '/api/v1/namespaces/default';
const proxyPrefix = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways/cluster1/proxy';
/** Hub requests the gateway would make if auth or cluster lookup were not cached. */
const watchedResources = new Set(['tokenreviews', 'subjectaccessreviews', 'secrets', 'managedclusters']);
/** apiserver_request_total's verb label is upper case, and POST for create. */
const watchedVerbs = new Map([
  ['POST', 'create'],
  ['LIST', 'list'],
  ['GET', 'get'],
]);
const benchUser = 'bench-viewer';

interface Flags {
  requests: number;
  concurrency: number;
  warmup: number;
  keep: boolean;
  profile: boolean;
}

function parseFlags(argv: string[]): Flags {
  const flags: Flags = { requests: 2000, concurrency: 8, warmup: 1000, keep: false, profile: false };
  for (const arg of argv) {
    const [name, value] = arg.replace(/^--/, '').split('=', 2) as [string, string | undefined];
    if (name === 'keep' || name === 'profile') flags[name] = true;
    else if ((name === 'requests' || name === 'concurrency' || name === 'warmup') && value !== undefined) {
      const n = Number(value);
      if (!Number.isInteger(n) || n < (name === 'warmup' ? 0 : 1)) throw new Error(`bad value in ${arg}`);
      flags[name] = n;
    } else {
      throw new Error(`unknown flag ${arg}; use --requests=N --concurrency=C --warmup=W --profile --keep`);
    }
  }
  return flags;
}

interface Tls {
  ca: string | Buffer;
  cert: string | Buffer;
  key: string | Buffer;
}

interface Target {
  name: string;
  url: URL;
  tls: Tls;
  headers: Record<string, string>;
}

interface Result {
  target: string;
  requests: number;
  concurrency: number;
  reqPerSec: number;
  /** Latencies in ms, sorted. */
  latencies: Float64Array;
  rssBeforeKb: number;
  rssAfterKb: number;
  /** Gateway process CPU time (all threads) and its main thread's run-queue wait, during the measured requests. */
  gatewayCpuMs: number;
  gatewayWaitMs: number;
}

async function kubeconfigTls(file: string): Promise<{ server: string; tls: Tls }> {
  const { server, options } = loadKubeconfig(file);
  if (!options.ca || !options.cert || !options.key) throw new Error(`${file} has no client certificate`);
  return {
    server,
    tls: { ca: options.ca as string | Buffer, cert: options.cert as string, key: options.key as string },
  };
}

function get(
  agent: https.Agent,
  target: Target,
  keepBody: boolean,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      target.url,
      { agent, method: 'GET', headers: { accept: 'application/json', ...target.headers } },
      (res) => {
        let body = '';
        if (keepBody || res.statusCode !== 200) {
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            body += chunk;
          });
        } else {
          res.resume();
        }
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** N requests from C workers over one keep-alive agent; each worker waits for its answer before the next. */
async function load(agent: https.Agent, target: Target, total: number, concurrency: number) {
  const latencies = new Float64Array(total);
  let issued = 0;
  const worker = async () => {
    while (issued < total) {
      const i = issued++;
      const started = performance.now();
      const { status, body } = await get(agent, target, false);
      latencies[i] = performance.now() - started;
      if (status !== 200)
        throw new Error(`${target.name}: request ${i} answered ${status}: ${body.slice(0, 500)}`);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, worker));
  const seconds = (performance.now() - started) / 1000;
  return { latencies: latencies.sort(), reqPerSec: total / seconds };
}

function agentFor(target: Target, concurrency: number): https.Agent {
  return new https.Agent({ keepAlive: true, maxSockets: concurrency, ...target.tls });
}

/** The first request must return the namespace itself; anything else aborts with the body. */
async function verify(agent: https.Agent, target: Target): Promise<void> {
  const { status, body } = await get(agent, target, true);
  let ok = false;
  try {
    const obj = JSON.parse(body) as { kind?: string; metadata?: { name?: string } };
    ok = status === 200 && obj.kind === 'Namespace' && obj.metadata?.name === 'default';
  } catch {}
  if (!ok) throw new Error(`${target.name}: expected 200 and Namespace "default", got ${status}:\n${body}`);
}

async function measure(target: Target, flags: Flags, gatewayPid: number): Promise<Result> {
  const agent = agentFor(target, flags.concurrency);
  try {
    await verify(agent, target);
    // Warm-up: opens all C connections (TLS handshakes), warms the JITs on both sides and
    // lets the gateway's heap grow to its working size (it starts cold; b runs first).
    if (flags.warmup > 0) await load(agent, target, flags.warmup, flags.concurrency);
    const rssBeforeKb = rssKb(gatewayPid);
    const cpuBefore = cpuUsage(gatewayPid);
    const { latencies, reqPerSec } = await load(agent, target, flags.requests, flags.concurrency);
    const cpuAfter = cpuUsage(gatewayPid);
    return {
      target: target.name,
      requests: flags.requests,
      concurrency: flags.concurrency,
      reqPerSec,
      latencies,
      rssBeforeKb,
      rssAfterKb: rssKb(gatewayPid),
      gatewayCpuMs: cpuAfter.cpuMs - cpuBefore.cpuMs,
      gatewayWaitMs: cpuAfter.waitMs - cpuBefore.waitMs,
    };
  } finally {
    agent.destroy();
  }
}

/** Sum of apiserver_request_total on the hub for the resources and verbs the gateway could call, by key. */
async function hubRequestCounts(hub: KubeClient): Promise<Map<string, number>> {
  const text = await hub.request<string>('GET', '/metrics');
  const counts = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const close = line.lastIndexOf('}');
    const labels = Object.fromEntries(
      [...line.slice(line.indexOf('{') + 1, close).matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [
        m[1],
        m[2],
      ]),
    ) as Record<string, string>;
    const resource = labels['resource'] ?? '';
    const verb = watchedVerbs.get(labels['verb'] ?? '');
    if (!watchedResources.has(resource) || !verb) continue;
    const subresource = labels['subresource'] ? `/${labels['subresource']}` : '';
    const key = `${resource}${subresource} ${verb}`;
    counts.set(key, (counts.get(key) ?? 0) + Number(line.slice(close + 1).trim()));
  }
  return counts;
}

function countDelta(before: Map<string, number>, after: Map<string, number>): Map<string, number> {
  const delta = new Map<string, number>();
  for (const [key, value] of after) {
    const d = value - (before.get(key) ?? 0);
    if (d !== 0) delta.set(key, d);
  }
  return delta;
}

function describeDelta(delta: Map<string, number>): string {
  if (delta.size === 0) return '0';
  let total = 0;
  for (const v of delta.values()) total += v;
  return `${total} (${[...delta].map(([k, v]) => `${k}: ${v}`).join(', ')})`;
}

/** Lets `benchUser` (not in system:masters) proxy to any ClusterGateway, and nothing else. */
async function grantBenchUser(hub: KubeClient): Promise<void> {
  const manager = 'bench-proxy-latency';
  await hub.apply(
    '/apis/rbac.authorization.k8s.io/v1/clusterroles/bench-clustergateway-proxy',
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'bench-clustergateway-proxy' },
      rules: [
        {
          apiGroups: ['cluster.core.oam.dev'],
          resources: ['clustergateways/proxy'],
          verbs: ['get'],
        },
      ],
    },
    manager,
  );
  await hub.apply(
    '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/bench-clustergateway-proxy',
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'bench-clustergateway-proxy' },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: 'bench-clustergateway-proxy',
      },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: benchUser }],
    },
    manager,
  );
}

function table(results: Result[]): string {
  const ms = (v: number) => v.toFixed(2);
  const perRequest = (totalMs: number, r: Result) => ((totalMs * 1000) / r.requests).toFixed(0);
  const mb = (kb: number) => (kb / 1024).toFixed(1);
  const rows = [
    [
      'path',
      'requests',
      'concurrency',
      'req/s',
      'p50 ms',
      'p90',
      'p99',
      'max',
      'gateway RSS MB (before → after)',
      'gateway CPU µs/req',
      'gateway CPU wait µs/req',
    ],
    ...results.map((r) => [
      r.target,
      String(r.requests),
      String(r.concurrency),
      r.reqPerSec.toFixed(0),
      ms(percentile(r.latencies, 50)),
      ms(percentile(r.latencies, 90)),
      ms(percentile(r.latencies, 99)),
      ms(r.latencies[r.latencies.length - 1] ?? Number.NaN),
      `${mb(r.rssBeforeKb)} → ${mb(r.rssAfterKb)}`,
      perRequest(r.gatewayCpuMs, r),
      perRequest(r.gatewayWaitMs, r),
    ]),
  ];
  const widths = rows[0]!.map((_, col) => Math.max(...rows.map((row) => row[col]!.length)));
  const line = (row: string[]) =>
    `| ${row.map((cell, col) => (col === 0 || col === 8 ? cell.padEnd(widths[col]!) : cell.padStart(widths[col]!))).join(' | ')} |`;
  const rule = `|${widths.map((w, col) => (col === 0 || col === 8 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [line(rows[0]!), rule, ...rows.slice(1).map(line)].join('\n');
}

function difference(label: string, over: Result, base: Result): string {
  const d = (p: number) => percentile(over.latencies, p) - percentile(base.latencies, p);
  const sign = (v: number) => `${v >= 0 ? '+' : ''}${v.toFixed(2)} ms`;
  return `${label}: p50 ${sign(d(50))}, p99 ${sign(d(99))}`;
}

// ---------------------------------------------------------------------------
// --profile: a second gateway process under `node --cpu-prof`, same flags.

interface CpuProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: CpuProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

async function startProfiledGateway(
  env: Environment,
  profileDir: string,
): Promise<{ process: ManagedProcess; url: string }> {
  const original = env.gateway!.process.child.spawnargs.slice(1); // [main.ts, ...flags]
  const port = await freePort();
  const args = original.map((arg) => (arg.startsWith('--secure-port=') ? `--secure-port=${port}` : arg));
  const process_ = env.supervisor.start('bench-gateway-profiled', process.execPath, {
    args: ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, ...args],
  });
  const url = `https://127.0.0.1:${port}`;
  const ca = readFileSync(env.hub.files.ca);
  await waitFor(
    'the profiled gateway to be ready',
    () =>
      new Promise<boolean>((resolve) => {
        https
          .get(`${url}/readyz`, { ca }, (res) => {
            res.resume();
            resolve(res.statusCode === 200);
          })
          .on('error', () => resolve(false));
      }),
    { timeoutMs: 60_000, failFast: () => process_.assertRunning() },
  );
  return { process: process_, url };
}

/** Self and inclusive CPU time per function, counting only samples within [fromUs, toUs] (monotonic µs). */
function summarizeProfile(profile: CpuProfile, fromUs: number, toUs: number): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const name = (n: CpuProfileNode) => {
    const { functionName, url, lineNumber } = n.callFrame;
    const file = url ? url.replace(/^file:\/\//, '').replace(`${repoRoot}/`, '') : '';
    return `${functionName || '(anonymous)'}${file ? ` ${file}:${lineNumber + 1}` : ''}`;
  };
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let t = profile.startTime;
  let total = 0;
  let idle = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0;
    const dt = profile.timeDeltas[i + 1] ?? 0; // a sample's weight: the time until the next one
    if (t < fromUs || t > toUs) continue;
    const node = byId.get(profile.samples[i]!);
    if (!node) continue;
    const key = name(node);
    if (node.callFrame.functionName === '(idle)') {
      idle += dt;
      continue;
    }
    total += dt;
    self.set(key, (self.get(key) ?? 0) + dt);
    const seen = new Set<string>();
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      const k = name(byId.get(id)!);
      if (seen.has(k)) continue;
      seen.add(k);
      inclusive.set(k, (inclusive.get(k) ?? 0) + dt);
    }
  }
  const pct = (v: number) => `${((100 * v) / total).toFixed(1).padStart(5)}%`;
  const top = (m: Map<string, number>, n: number, filter: (k: string) => boolean = () => true) =>
    [...m]
      .filter(([k]) => filter(k))
      .sort((x, y) => y[1] - x[1])
      .slice(0, n)
      .map(([k, v]) => `  ${pct(v)}  ${k}`)
      .join('\n');
  const ours = (k: string) => /\s(manager|shared)\//.test(k);
  return [
    `non-idle samples ${(total / 1000).toFixed(0)} ms, idle ${(idle / 1000).toFixed(0)} ms; shares are of non-idle`,
    'top self time:',
    top(self, 25),
    'top inclusive time, gateway code (manager/, shared/):',
    top(inclusive, 20, ours),
  ].join('\n');
}

async function profileRun(env: Environment, target: Target, flags: Flags): Promise<void> {
  const profileDir = path.join(stateDir, 'profile');
  const profiled = await startProfiledGateway(env, profileDir);
  const profTarget: Target = {
    ...target,
    name: `${target.name} (profiled)`,
    url: new URL(target.url.pathname, profiled.url),
  };
  const result = await (async () => {
    const agent = agentFor(profTarget, flags.concurrency);
    try {
      await verify(agent, profTarget);
      if (flags.warmup > 0) await load(agent, profTarget, flags.warmup, flags.concurrency);
      const from = Number(process.hrtime.bigint() / 1000n);
      const cpuBefore = cpuUsage(profiled.process.pid);
      const run = await load(agent, profTarget, flags.requests, flags.concurrency);
      const to = Number(process.hrtime.bigint() / 1000n);
      const cpuAfter = cpuUsage(profiled.process.pid);
      const cpu = { cpuMs: cpuAfter.cpuMs - cpuBefore.cpuMs, waitMs: cpuAfter.waitMs - cpuBefore.waitMs };
      return { ...run, from, to, cpu };
    } finally {
      agent.destroy();
    }
  })();
  await profiled.process.stop(); // SIGTERM: the gateway exits and node writes the profile
  const file = readdirSync(profileDir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => path.join(profileDir, f))
    .sort()
    .pop();
  console.log(
    `\nCPU profile of a second gateway under run ${profTarget.name}: ${result.reqPerSec.toFixed(0)} req/s, ` +
      `p50 ${percentile(result.latencies, 50).toFixed(2)} ms, p99 ${percentile(result.latencies, 99).toFixed(2)} ms (profiler on)`,
  );
  if (!file) {
    console.log(`no .cpuprofile written in ${profileDir}`);
    return;
  }
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  console.log(`profile: ${path.relative(process.cwd(), file)}`);
  const wallMs = (result.to - result.from) / 1000;
  console.log(
    `measured window ${wallMs.toFixed(0)} ms: gateway CPU ${result.cpu.cpuMs} ms (all threads), ` +
      `main thread runnable but waiting for a CPU ${result.cpu.waitMs.toFixed(0)} ms`,
  );
  console.log(
    "V8 samples by wall clock: a function's share includes time the thread was preempted in it (after a\n" +
      'loopback write wakes the receiving process, for instance), not only CPU it used.',
  );
  console.log(summarizeProfile(profile, result.from, result.to));
}

// ---------------------------------------------------------------------------

const flags = parseFlags(process.argv.slice(2));
const log = (line: string) => process.stderr.write(`[bench env] ${line}\n`);
const env = await startEnvironment({ stateDir, managedClusters: ['cluster1'], log }).catch((err: Error) => {
  console.error(`\nthe environment did not start: ${err.message}`);
  process.exit(1);
});
let failed = false;
try {
  const gateway = env.gateway;
  const cluster1 = env.managed[0];
  if (!gateway || !cluster1) throw new Error('the environment has no gateway or no cluster1');
  const gatewayPid = gateway.process.pid;
  await grantBenchUser(env.hub.client);

  const direct = await kubeconfigTls(cluster1.kubeconfig);
  const hubAdmin = await kubeconfigTls(env.hub.kubeconfig);
  const frontProxy: Tls = {
    ca: readFileSync(env.hub.files.ca), // the gateway's serving certificate comes from the hub CA
    cert: readFileSync(path.join(stateDir, 'hub', 'front-proxy-client.crt')),
    key: readFileSync(path.join(stateDir, 'hub', 'front-proxy-client.key')),
  };
  const targets = {
    direct: { name: 'a. direct', url: new URL(objectPath, direct.server), tls: direct.tls, headers: {} },
    gateway: {
      name: 'b. gateway',
      url: new URL(proxyPrefix + objectPath, gateway.url),
      tls: frontProxy,
      headers: { 'X-Remote-User': 'admin', 'X-Remote-Group': 'system:masters' },
    },
    gatewaySar: {
      name: 'b2. gateway, non-admin (SAR cache)',
      url: new URL(proxyPrefix + objectPath, gateway.url),
      tls: frontProxy,
      headers: { 'X-Remote-User': benchUser, 'X-Remote-Group': 'system:authenticated' },
    },
    aggregator: {
      name: 'c. aggregator + gateway',
      url: new URL(proxyPrefix + objectPath, hubAdmin.server),
      tls: hubAdmin.tls,
      headers: {},
    },
  } satisfies Record<string, Target>;

  console.log(
    `\nGET ${objectPath} on cluster1: ${flags.requests} requests (after ${flags.warmup} warm-up) at concurrency ${flags.concurrency}, keep-alive HTTPS, client certificates`,
  );
  const results: Result[] = [];
  const hubCalls: string[] = [];
  for (const target of [targets.direct, targets.gateway, targets.gatewaySar, targets.aggregator]) {
    process.stderr.write(`[bench] ${target.name} ...\n`);
    const before = await hubRequestCounts(env.hub.client);
    const started = performance.now();
    const result = await measure(target, flags, gatewayPid);
    const seconds = (performance.now() - started) / 1000;
    const delta = countDelta(before, await hubRequestCounts(env.hub.client));
    results.push(result);
    if (target !== targets.direct) {
      hubCalls.push(
        `  ${target.name.padEnd(36)} ${describeDelta(delta)}   [${seconds.toFixed(1)} s incl. warm-up]`,
      );
    }
  }
  const [a, b, b2, c] = results as [Result, Result, Result, Result];
  console.log(`\n${table(results)}\n`);
  console.log(difference('gateway adds (b − a)', b, a));
  console.log(difference('SAR-cached user adds (b2 − b)', b2, b));
  console.log(difference('aggregator adds (c − b)', c, b));
  console.log(
    '\nhub API requests during each run (apiserver_request_total, tokenreviews/subjectaccessreviews/secrets/managedclusters, create/list/get, whoever made them):',
  );
  console.log(hubCalls.join('\n'));
  console.log(
    '  system:masters callers (b, c) are never reviewed; others get one SubjectAccessReview per distinct\n' +
      '  request attributes per --authorization-allow-ttl (10 s): a run longer than that shows one more per 10 s.',
  );

  if (flags.profile) await profileRun(env, targets.gateway, flags);

  if (flags.keep) {
    console.log('\n--keep: the environment stays up until Ctrl-C. Kubeconfigs:');
    console.log(`  hub       ${env.hub.kubeconfig}`);
    console.log(`  cluster1  ${cluster1.kubeconfig}`);
    console.log(
      `  gateway   ${gateway.kubeconfig} (the gateway's own ServiceAccount; direct URL ${gateway.url})`,
    );
    // Like npm start: stay up, and fail loudly if a component dies.
    setInterval(() => {
      try {
        env.supervisor.assertAllRunning();
      } catch (err) {
        console.error(`\n${(err as Error).message}`);
        void env.stop().then(() => process.exit(1));
      }
    }, 2000);
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

/**
 * Side-by-side benchmark (`npm run bench:compare`): the gateway against the Go
 * original, github.com/oam-dev/cluster-gateway's cmd/apiserver, at the version
 * pinned in hack/tools/cluster-gateway-go (built by
 * hack/build-cluster-gateway-go.sh into .cache/, only for this benchmark).
 *
 * Starts its own local environment (hub + cluster1, the gateway as the
 * environment starts it) in .local/bench-compare, starts the Go server beside
 * it against the same hub (the hub admin kubeconfig, the same credential
 * Secret namespace, --ocm-integration as the credential Secret has no
 * endpoint, APF off: its client libraries predate the hub's flowcontrol API),
 * and calls both straight, as the aggregator does (the hub's
 * front-proxy certificate plus X-Remote-User: admin, X-Remote-Group:
 * system:masters), as e2e/bench/proxy-latency.ts does. "direct" is cluster1's
 * kube-apiserver with its admin certificate. Every workload runs against the
 * three targets in turn, the order rotating, --reps times; each figure is the
 * median over the repetitions. CPU is the proxy process's (utime + stime of all
 * threads, 10 ms ticks) over the measured operations, divided by their number;
 * RSS is VmRSS after the runs.
 *
 * Workloads (on cluster1):
 *   get-c1, get-c8     GET /api/v1/namespaces/default, 1 and 8 at a time
 *   list500-c1, -c8    LIST of 500 ConfigMaps (about 514 KB)
 *   stream-10mb        LIST of 10 ConfigMaps of 1 MB each (10 MB body), 1 at a time
 *   watch-start        a watch opened at the current resourceVersion, until its headers
 *   watch-100          100 watches open, 100 ConfigMap updates: per delivered event
 *   exec-rtt           one exec session (`cat`, SPDY) into a container on cluster1's real node:
 *                      32-byte round trips over stdin/stdout
 *
 * Two more targets give the floor, what Node itself can do on this machine in the same run
 * (floor-relay.ts, each a process of its own): `tls-floor`, a bare TLS relay to cluster1 (no HTTP),
 * and `h2-floor`, a bare HTTPS/1.1-to-HTTP/2 relay of the gateway's shape (no auth, no log). The
 * h2 floor does no upgrades, so it has no exec figure. And `gateway-h2`: a second gateway process
 * with --upstream-passthrough=false, reads over HTTP/2 as before they passed through, for the
 * change's effect in the same run.
 *
 * Flags: --reps=3 --scale=1 (multiplies the operation counts) --only=get-c1,...
 *        --targets=direct,tls-floor,h2-floor,gateway,go --keep
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import https from 'node:https';
import { connect as netConnect } from 'node:net';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import type { LocalCluster } from '../../hack/localenv/apiserver.ts';
import { repoRoot } from '../../hack/localenv/binaries.ts';
import { compileCacheEnv } from '../../hack/localenv/compile-cache.ts';
import { type Environment, startEnvironment } from '../../hack/localenv/environment.ts';
import { credentialNamespace } from '../../hack/localenv/gateway.ts';
import { freePort } from '../../hack/localenv/ports.ts';
import type { ManagedProcess } from '../../hack/localenv/supervisor.ts';
import { waitFor } from '../../hack/localenv/wait.ts';
import { gatewayNodeFlags } from '../../manager/addon/gateway-deploy/workload.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import { loadKubeconfig } from '../../shared/kube/kubeconfig.ts';
import { SpdyConnection } from '../support/spdy/spdy.ts';
import { startWorkload } from '../support/workload.ts';
import { cpuUsage, median, percentile, rssKb } from './measure.ts';

const stateDir = path.join(repoRoot, '.local', 'bench-compare');
const proxyPrefix = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways/cluster1/proxy';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);

const targetNames = ['direct', 'tls-floor', 'h2-floor', 'gateway', 'gateway-h2', 'go'] as const;
type TargetName = (typeof targetNames)[number];

interface Flags {
  reps: number;
  scale: number;
  only?: Set<string>;
  targets: Set<TargetName>;
  keep: boolean;
}

function parseFlags(argv: string[]): Flags {
  const flags: Flags = { reps: 3, scale: 1, keep: false, targets: new Set(targetNames) };
  for (const arg of argv) {
    const [name, value = ''] = arg.replace(/^--/, '').split('=', 2) as [string, string | undefined];
    if (name === 'keep') flags.keep = true;
    else if (name === 'only') flags.only = new Set(value.split(','));
    else if (name === 'targets') {
      const names = value.split(',');
      const unknown = names.filter((t) => !(targetNames as readonly string[]).includes(t));
      if (unknown.length)
        throw new Error(`unknown target ${unknown.join(',')}; targets are ${targetNames.join(',')}`);
      flags.targets = new Set(names as TargetName[]);
    } else if (name === 'reps' || name === 'scale') {
      const n = Number(value);
      if (!(n > 0) || (name === 'reps' && !Number.isInteger(n))) throw new Error(`bad value in ${arg}`);
      flags[name] = n;
    } else throw new Error(`unknown flag ${arg}; use --reps=N --scale=X --only=a,b --targets=a,b --keep`);
  }
  return flags;
}

interface Tls {
  ca: string | Buffer;
  cert: string | Buffer;
  key: string | Buffer;
}

interface Target {
  name: TargetName;
  /** Base URL plus the path prefix that reaches cluster1. */
  base: string;
  tls: Tls;
  headers: Record<string, string>;
  /** The proxy process whose CPU and memory are measured (none for direct). */
  pid?: number;
}

/** One operation's outcome: latency in ms, body bytes. */
interface Sample {
  ms: number;
  bytes: number;
}

interface Run {
  samples: Sample[];
  wallMs: number;
  /** The proxy's CPU over the measured operations (warm-up excluded); undefined for direct. */
  cpuMs?: number;
}

/** Starts measuring: call the result when the measured operations are done. */
function measured(target: Target): (samples: Sample[]) => Run {
  const started = performance.now();
  const cpuBefore = target.pid ? cpuUsage(target.pid).cpuMs : undefined;
  return (samples) => ({
    samples,
    wallMs: performance.now() - started,
    ...(target.pid && cpuBefore !== undefined ? { cpuMs: cpuUsage(target.pid).cpuMs - cpuBefore } : {}),
  });
}

interface Workload {
  name: string;
  /** Targets that cannot run it (the h2 floor does no upgrades). */
  skip?: TargetName[];
  /** What one operation is, and several, for the table. */
  unit: string;
  units: string;
  run(target: Target, scale: number): Promise<Run>;
}

function agentFor(target: Target, sockets: number): https.Agent {
  return new https.Agent({ keepAlive: true, maxSockets: sockets, ...target.tls });
}

/** One request; resolves at the last byte of the body. */
function request(
  agent: https.Agent,
  target: Target,
  pathname: string,
): Promise<{ status: number; bytes: number; body?: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      `${target.base}${pathname}`,
      { agent, headers: { ...target.headers, accept: 'application/json' } },
      (res) => {
        let bytes = 0;
        const keep: Buffer[] = [];
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          if (res.statusCode !== 200 && bytes < 4096) keep.push(chunk);
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, bytes, body: Buffer.concat(keep).toString() }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** `total` GETs from `concurrency` workers, each waiting for its answer before the next. */
async function getLoad(target: Target, pathname: string, total: number, concurrency: number): Promise<Run> {
  const agent = agentFor(target, concurrency);
  try {
    // Warm-up: every connection opened, JITs warm, heaps at working size.
    await runWorkers(agent, target, pathname, Math.max(concurrency * 4, Math.ceil(total / 5)), concurrency);
    const done = measured(target);
    return done(await runWorkers(agent, target, pathname, total, concurrency));
  } finally {
    agent.destroy();
  }
}

async function runWorkers(
  agent: https.Agent,
  target: Target,
  pathname: string,
  total: number,
  concurrency: number,
): Promise<Sample[]> {
  const samples: Sample[] = [];
  let issued = 0;
  const worker = async () => {
    while (issued < total) {
      issued++;
      const started = performance.now();
      const { status, bytes, body } = await request(agent, target, pathname);
      if (status !== 200) throw new Error(`${target.name} GET ${pathname}: ${status} ${body}`);
      samples.push({ ms: performance.now() - started, bytes });
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, worker));
  return samples;
}

/** Opens a watch and resolves with the response once its headers are in. */
function openWatch(agent: https.Agent | false, target: Target, pathname: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      `${target.base}${pathname}`,
      {
        agent,
        ...(agent === false ? target.tls : {}),
        headers: { ...target.headers, accept: 'application/json' },
      },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          reject(new Error(`${target.name} WATCH ${pathname}: ${res.statusCode}`));
          return;
        }
        resolve(res);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

function workloads(spoke: KubeClient, exec: ExecTarget): Workload[] {
  const n = (base: number, scale: number) => Math.max(1, Math.round(base * scale));
  return [
    {
      name: 'get-c1',
      unit: 'request',
      units: 'requests',
      run: (t, s) => getLoad(t, '/api/v1/namespaces/default', n(1000, s), 1),
    },
    {
      name: 'get-c8',
      unit: 'request',
      units: 'requests',
      run: (t, s) => getLoad(t, '/api/v1/namespaces/default', n(2000, s), 8),
    },
    {
      name: 'list500-c1',
      unit: 'request',
      units: 'requests',
      run: (t, s) => getLoad(t, '/api/v1/namespaces/bench-list/configmaps', n(150, s), 1),
    },
    {
      name: 'list500-c8',
      unit: 'request',
      units: 'requests',
      run: (t, s) => getLoad(t, '/api/v1/namespaces/bench-list/configmaps', n(300, s), 8),
    },
    {
      name: 'stream-10mb',
      unit: 'response of 10 MB',
      units: 'responses',
      run: (t, s) => getLoad(t, '/api/v1/namespaces/bench-big/configmaps', n(12, s), 1),
    },
    {
      name: 'watch-start',
      unit: 'watch',
      units: 'watches',
      run: async (t, s) => {
        const agent = agentFor(t, 1);
        try {
          const rv = (await spoke.list('/api/v1/namespaces/bench-watch/configmaps')).metadata.resourceVersion;
          const pathname = `/api/v1/namespaces/bench-watch/configmaps?watch=true&resourceVersion=${rv}`;
          const once = async () => {
            const started = performance.now();
            const res = await openWatch(agent, t, pathname);
            const ms = performance.now() - started;
            res.destroy();
            return { ms, bytes: 0 };
          };
          for (let i = 0; i < 20; i++) await once();
          const samples: Sample[] = [];
          const done = measured(t);
          for (let i = 0; i < n(200, s); i++) samples.push(await once());
          return done(samples);
        } finally {
          agent.destroy();
        }
      },
    },
    {
      name: 'watch-100',
      unit: 'event delivered',
      units: 'events delivered',
      run: (t, s) => watchFanOut(t, spoke, 100, n(100, s)),
    },
    {
      name: 'exec-rtt',
      skip: ['h2-floor'],
      unit: 'round trip',
      units: 'round trips',
      run: (t, s) => execRoundTrips(t, exec, n(1000, s)),
    },
  ];
}

/**
 * `watchers` watches on bench-watch, then `updates` patches of one ConfigMap
 * 20 ms apart, each carrying its send time; a sample per event per watch:
 * from the patch being sent to the event arriving.
 */
async function watchFanOut(
  target: Target,
  spoke: KubeClient,
  watchers: number,
  updates: number,
): Promise<Run> {
  const cm = '/api/v1/namespaces/bench-watch/configmaps/fan-out';
  const rv = (await spoke.get(cm)).metadata?.resourceVersion ?? '';
  const pathname = `/api/v1/namespaces/bench-watch/configmaps?watch=true&resourceVersion=${rv}&fieldSelector=metadata.name%3Dfan-out`;
  const samples: Sample[] = [];
  const responses = await Promise.all(
    Array.from({ length: watchers }, () => openWatch(false, target, pathname)),
  );
  const done = responses.map(
    (res) =>
      new Promise<void>((resolve, reject) => {
        let buffered = '';
        let seen = 0;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          buffered += chunk;
          let newline = buffered.indexOf('\n');
          while (newline >= 0) {
            const line = buffered.slice(0, newline);
            buffered = buffered.slice(newline + 1);
            newline = buffered.indexOf('\n');
            const event = JSON.parse(line) as { object?: { data?: { sent?: string } } };
            const sent = Number(event.object?.data?.sent);
            if (!sent) continue;
            samples.push({ ms: performance.timeOrigin + performance.now() - sent, bytes: line.length });
            if (++seen === updates) {
              res.destroy();
              resolve();
            }
          }
        });
        res.on('error', reject);
      }),
  );
  const finish = measured(target);
  for (let i = 0; i < updates; i++) {
    await spoke.mergePatch(cm, { data: { sent: String(performance.timeOrigin + performance.now()) } });
    await sleep(20);
  }
  await Promise.race([
    Promise.all(done),
    sleep(60_000).then(() => {
      throw new Error(`${target.name}: not every watch saw every event within 60 s`);
    }),
  ]);
  return finish(samples);
}

interface ExecTarget {
  namespace: string;
  pod: string;
  container: string;
}

/** One `cat` session over SPDY (as kubectl exec falls back to it), then `count` 32-byte round trips. */
async function execRoundTrips(target: Target, pod: ExecTarget, count: number): Promise<Run> {
  const query = new URLSearchParams({ container: pod.container, command: 'cat' });
  for (const k of ['stdin', 'stdout', 'stderr']) query.set(k, 'true');
  const url = `${target.base}/api/v1/namespaces/${pod.namespace}/pods/${pod.pod}/exec?${query}`;
  const socket = await new Promise<{ socket: Duplex; head: Buffer }>((resolve, reject) => {
    const req = https.request(url, {
      method: 'POST',
      ...target.tls,
      agent: false,
      headers: {
        ...target.headers,
        Connection: 'Upgrade',
        Upgrade: 'SPDY/3.1',
        'X-Stream-Protocol-Version': ['v4.channel.k8s.io'],
        'Content-Length': '0',
      },
    });
    req.on('upgrade', (_res, s: Duplex, head: Buffer) => resolve({ socket: s, head }));
    req.on('response', (res) => {
      res.resume();
      reject(new Error(`${target.name} exec: ${res.statusCode} instead of 101`));
    });
    req.on('error', reject);
    req.end();
  });
  const connection = new SpdyConnection(socket.socket, { role: 'client' }, socket.head);
  try {
    await connection.createStream({ streamType: 'error' });
    const stdin = await connection.createStream({ streamType: 'stdin' });
    const stdout = await connection.createStream({ streamType: 'stdout' });
    await connection.createStream({ streamType: 'stderr' });
    const payload = Buffer.alloc(32, 'x');
    let received = 0;
    let waiting: (() => void) | undefined;
    stdout.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (received >= payload.length) {
        received -= payload.length;
        waiting?.();
      }
    });
    const roundTrip = async () => {
      const started = performance.now();
      await new Promise<void>((resolve) => {
        waiting = resolve;
        stdin.write(payload);
      });
      return { ms: performance.now() - started, bytes: payload.length };
    };
    for (let i = 0; i < 30; i++) await roundTrip();
    const samples: Sample[] = [];
    const done = measured(target);
    for (let i = 0; i < count; i++) samples.push(await roundTrip());
    const run = done(samples);
    stdin.end();
    return run;
  } finally {
    await connection.close();
  }
}

// ---------------------------------------------------------------------------
// Setup: data on cluster1, a pod to exec into, the Go server.

async function seed(spoke: KubeClient): Promise<void> {
  const ensureNs = async (name: string) => {
    await spoke
      .create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } })
      .catch(() => undefined);
  };
  for (const ns of ['bench-list', 'bench-big', 'bench-watch']) await ensureNs(ns);
  // 500 ConfigMaps of about 1 KB: a LIST of about 514 KB, as in the issue.
  const small = 'v'.repeat(880);
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < 500) {
        const i = next++;
        await spoke.create('/api/v1/namespaces/bench-list/configmaps', {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: `cm-${String(i).padStart(3, '0')}` },
          data: { value: small },
        });
      }
    }),
  );
  // 10 ConfigMaps of 1,000,000 bytes: a 10 MB LIST.
  const big = 'b'.repeat(1_000_000);
  for (let i = 0; i < 10; i++) {
    await spoke.create('/api/v1/namespaces/bench-big/configmaps', {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: `big-${i}` },
      data: { value: big },
    });
  }
  await spoke.create('/api/v1/namespaces/bench-watch/configmaps', {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'fan-out' },
    data: { sent: '0' },
  });
}

async function startExecTarget(
  cluster: LocalCluster,
  image: string,
): Promise<{ pod: ExecTarget; stop: () => Promise<void> }> {
  const workload = await startWorkload(cluster.client, { image });
  return {
    pod: { namespace: workload.pod.namespace, pod: workload.pod.name, container: workload.pod.container },
    stop: workload.stop,
  };
}

/** Waits until a proxy at `url` answers a GET on cluster1 as the aggregator would call it. */
function answersTheProxy(
  what: string,
  url: string,
  frontProxy: Tls,
  proxy: ManagedProcess,
  timeoutMs: number,
): Promise<unknown> {
  return waitFor(
    `${what} to answer the proxy`,
    () =>
      new Promise<boolean>((resolve) => {
        https
          .get(
            `${url}${proxyPrefix}/api/v1/namespaces/default`,
            { ...frontProxy, headers: { 'X-Remote-User': 'admin', 'X-Remote-Group': 'system:masters' } },
            (res) => {
              res.resume();
              resolve(res.statusCode === 200);
            },
          )
          .on('error', () => resolve(false));
      }),
    { timeoutMs, failFast: () => proxy.assertRunning() },
  );
}

async function startGoGateway(
  env: Environment,
  frontProxy: Tls,
): Promise<{ process: ManagedProcess; url: string }> {
  const binary = execFileSync('bash', [path.join(repoRoot, 'hack', 'build-cluster-gateway-go.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  })
    .trim()
    .split('\n')
    .pop() as string;
  const dir = path.join(stateDir, 'go-gateway');
  const serving = await env.hub.pki.ca.issue({
    commonName: 'cluster-gateway-go',
    dnsNames: ['localhost'],
    ipAddresses: ['127.0.0.1'],
    usage: 'server',
  });
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'tls.crt'), serving.cert);
  writeFileSync(path.join(dir, 'tls.key'), serving.key, { mode: 0o600 });
  const port = await freePort();
  const process_ = env.supervisor.start('cluster-gateway-go', binary, {
    args: [
      `--secure-port=${port}`,
      '--bind-address=127.0.0.1',
      `--cert-dir=${dir}`,
      `--tls-cert-file=${path.join(dir, 'tls.crt')}`,
      `--tls-private-key-file=${path.join(dir, 'tls.key')}`,
      `--kubeconfig=${env.hub.kubeconfig}`,
      `--authentication-kubeconfig=${env.hub.kubeconfig}`,
      `--authorization-kubeconfig=${env.hub.kubeconfig}`,
      `--secret-namespace=${credentialNamespace}`,
      // The credential Secret holds the token only; endpoint and CA come from the ManagedCluster, as for the gateway.
      '--ocm-integration=true',
      '--enable-priority-and-fairness=false',
      '--feature-gates=HealthinessCheck=false',
    ],
  });
  const url = `https://127.0.0.1:${port}`;
  await answersTheProxy('the Go cluster-gateway', url, frontProxy, process_, 90_000);
  return { process: process_, url };
}

/** A second gateway, the same as the environment's but with --upstream-passthrough=false. */
async function startGatewayWithoutPassThrough(env: Environment, frontProxy: Tls): Promise<Target> {
  const gateway = env.gateway;
  if (!gateway) throw new Error('the environment has no gateway');
  const dir = path.join(stateDir, 'gateway');
  const port = await freePort();
  const process_ = env.supervisor.start('cluster-gateway-h2', process.execPath, {
    env: compileCacheEnv,
    args: [
      ...gatewayNodeFlags,
      path.join(repoRoot, 'manager', 'gateway', 'main.ts'),
      `--secure-port=${port}`,
      '--bind-address=127.0.0.1',
      `--tls-cert-file=${path.join(dir, 'tls.crt')}`,
      `--tls-private-key-file=${path.join(dir, 'tls.key')}`,
      `--kubeconfig=${gateway.kubeconfig}`,
      `--secret-namespace=${credentialNamespace}`,
      '--health-check-interval=2',
      '--upstream-passthrough=false',
    ],
  });
  const url = `https://127.0.0.1:${port}`;
  await answersTheProxy('the second gateway', url, frontProxy, process_, 60_000);
  return {
    name: 'gateway-h2',
    base: `${url}${proxyPrefix}`,
    tls: frontProxy,
    headers: { 'X-Remote-User': 'admin', 'X-Remote-Group': 'system:masters' },
    pid: process_.pid,
  };
}

/** The two floor relays (floor-relay.ts) to cluster1, each a process of its own, as targets. */
async function startFloorRelays(env: Environment, cluster1: LocalCluster): Promise<Target[]> {
  const direct = loadKubeconfig(cluster1.kubeconfig);
  const serving = await env.hub.pki.ca.issue({
    commonName: 'floor-relay',
    dnsNames: ['localhost'],
    ipAddresses: ['127.0.0.1'],
    usage: 'server',
  });
  const configFile = path.join(stateDir, 'floor-relay.json');
  writeFileSync(
    configFile,
    JSON.stringify({
      cert: serving.cert,
      key: serving.key,
      upstream: direct.server,
      upstreamCa: direct.options.ca,
      upstreamCert: direct.options.cert,
      upstreamKey: direct.options.key,
    }),
    { mode: 0o600 },
  );
  const targets: Target[] = [];
  for (const mode of ['tls', 'h2'] as const) {
    const port = await freePort();
    const relay = env.supervisor.start(`${mode}-floor-relay`, process.execPath, {
      // The gateway's Node flags, so the floor runs with the same heap settings; CG_FLOOR_NODE_FLAGS
      // adds others, as CG_GATEWAY_NODE_FLAGS does for the gateway (e.g. --cpu-prof).
      args: [
        ...(process.env.CG_FLOOR_NODE_FLAGS?.split(/\s+/).filter(Boolean) ?? []),
        ...gatewayNodeFlags,
        path.join(repoRoot, 'e2e', 'bench', 'floor-relay.ts'),
        mode,
        configFile,
        String(port),
      ],
    });
    await waitFor(
      `the ${mode} floor relay to listen`,
      () =>
        new Promise<boolean>((resolve) => {
          const probe = netConnect(port, '127.0.0.1', () => {
            probe.destroy();
            resolve(true);
          }).on('error', () => resolve(false));
        }),
      { timeoutMs: 10_000, failFast: () => relay.assertRunning() },
    );
    targets.push({
      name: `${mode}-floor`,
      base: `https://127.0.0.1:${port}`,
      tls: {
        ca: env.hub.pki.ca.cert,
        cert: direct.options.cert as string,
        key: direct.options.key as string,
      },
      headers: {},
      pid: relay.pid,
    });
  }
  return targets;
}

// ---------------------------------------------------------------------------
// Figures and tables.

interface Figures {
  p50: number;
  p99: number;
  opsPerSec: number;
  cpuUsPerOp?: number;
  mbPerSec: number;
  rssMb?: number;
}

function figures(run: Run, pid: number | undefined): Figures {
  const sorted = Float64Array.from(run.samples.map((s) => s.ms)).sort();
  const bytes = run.samples.reduce((sum, s) => sum + s.bytes, 0);
  return {
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    opsPerSec: (run.samples.length / run.wallMs) * 1000,
    mbPerSec: bytes / 1e6 / (run.wallMs / 1000),
    ...(run.cpuMs !== undefined ? { cpuUsPerOp: (run.cpuMs * 1000) / run.samples.length } : {}),
    ...(pid !== undefined ? { rssMb: rssKb(pid) / 1024 } : {}),
  };
}

function medianFigures(all: Figures[]): Figures {
  const pick = (f: (x: Figures) => number | undefined) => {
    const values = all.map(f).filter((v): v is number => v !== undefined);
    return values.length ? median(values) : undefined;
  };
  const cpu = pick((x) => x.cpuUsPerOp);
  const rss = pick((x) => x.rssMb);
  return {
    p50: pick((x) => x.p50) as number,
    p99: pick((x) => x.p99) as number,
    opsPerSec: pick((x) => x.opsPerSec) as number,
    mbPerSec: pick((x) => x.mbPerSec) as number,
    ...(cpu !== undefined ? { cpuUsPerOp: cpu } : {}),
    ...(rss !== undefined ? { rssMb: rss } : {}),
  };
}

const columnTitles: Record<TargetName, string> = {
  direct: 'direct',
  'tls-floor': 'TLS floor',
  'h2-floor': 'H2 floor',
  gateway: 'gateway',
  'gateway-h2': 'gateway, reads over HTTP/2',
  go: 'Go',
};

const fmt = (v: number | undefined, digits = 2) =>
  v === undefined
    ? '—'
    : v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined || b === 0 ? '—' : (a / b).toFixed(2);

/** One workload in full: every figure of every target, and the gateway against Go and the floors. */
function table(workload: Workload, byTarget: Map<string, Figures>, shown: TargetName[]): string {
  const g = byTarget.get('gateway');
  const rows: [string, (f: Figures) => number | undefined, number][] = [
    ['latency p50 (ms)', (f) => f.p50, 2],
    ['latency p99 (ms)', (f) => f.p99, 2],
    [`${workload.units} per second`, (f) => f.opsPerSec, 0],
    ['MB/s', (f) => f.mbPerSec, 1],
    [`proxy CPU µs per ${workload.unit}`, (f) => f.cpuUsPerOp, 0],
    ['proxy RSS after (MB)', (f) => f.rssMb, 0],
  ];
  const against = (['gateway-h2', 'go', 'tls-floor', 'h2-floor'] as const).filter((t) => shown.includes(t));
  return [
    `${workload.name} (per ${workload.unit})`,
    `| figure | ${shown.map((t) => columnTitles[t]).join(' | ')} | ${against.map((t) => `gateway / ${columnTitles[t]}`).join(' | ')} |`,
    `|---|${shown.map(() => '---:').join('|')}|${against.map(() => '---:').join('|')}|`,
    ...rows.map(([name, pick, digits]) => {
      const cells = shown.map((t) => {
        const f = byTarget.get(t);
        return fmt(f ? pick(f) : undefined, digits);
      });
      const ratios = against.map((t) => {
        const f = byTarget.get(t);
        return ratio(g ? pick(g) : undefined, f ? pick(f) : undefined);
      });
      return `| ${name} | ${cells.join(' | ')} | ${ratios.join(' | ')} |`;
    }),
  ].join('\n');
}

/**
 * The headline: proxy CPU per operation of each workload, gateway against Go and the floors, and the
 * RSS after the run (docs/benchmarks.md opens with it).
 */
function summary(selected: Workload[], medians: Map<string, Map<string, Figures>>): string {
  const cpu = (w: string, t: TargetName) => medians.get(w)?.get(t)?.cpuUsPerOp;
  const rss = (w: string, t: TargetName) => medians.get(w)?.get(t)?.rssMb;
  const lines = [
    '| workload | CPU per op: gateway | reads over HTTP/2 | Go | TLS floor | H2 floor | gateway / Go | gateway / TLS floor | gateway / H2 floor | RSS MB: gateway / Go (ratio) |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const w of selected) {
    const unit = w.unit.includes('10 MB') ? 1000 : 1; // ms per 10 MB, µs otherwise
    const show = (v: number | undefined) =>
      v === undefined ? '—' : `${fmt(v / unit, unit > 1 ? 1 : 0)}${unit > 1 ? ' ms' : ' µs'}`;
    const g = cpu(w.name, 'gateway');
    lines.push(
      `| ${w.name} | ${show(g)} | ${show(cpu(w.name, 'gateway-h2'))} | ${show(cpu(w.name, 'go'))} | ${show(cpu(w.name, 'tls-floor'))} | ${show(cpu(w.name, 'h2-floor'))} | ${ratio(g, cpu(w.name, 'go'))} | ${ratio(g, cpu(w.name, 'tls-floor'))} | ${ratio(g, cpu(w.name, 'h2-floor'))} | ${fmt(rss(w.name, 'gateway'), 0)} / ${fmt(rss(w.name, 'go'), 0)} (${ratio(rss(w.name, 'gateway'), rss(w.name, 'go'))}) |`,
    );
  }
  return lines.join('\n');
}

// ---------------------------------------------------------------------------

const flags = parseFlags(process.argv.slice(2));
const env = await startEnvironment({
  stateDir,
  managedClusters: ['cluster1'],
  nodes: true, // a real kubelet for exec
  log: (line) => process.stderr.write(`[bench env] ${line}\n`),
}).catch((err: Error) => {
  console.error(`\nthe environment did not start: ${err.message}`);
  process.exit(1);
});
let failed = false;
let stopExec: (() => Promise<void>) | undefined;
try {
  const gateway = env.gateway;
  const cluster1 = env.managed[0];
  if (!gateway || !cluster1) throw new Error('the environment has no gateway or no cluster1');
  const frontProxy: Tls = {
    ca: readFileSync(env.hub.files.ca),
    cert: readFileSync(path.join(stateDir, 'hub', 'front-proxy-client.crt')),
    key: readFileSync(path.join(stateDir, 'hub', 'front-proxy-client.key')),
  };
  log('seeding cluster1 (500 small and 10 large ConfigMaps) and a pod to exec into');
  await seed(cluster1.client);
  if (!env.images) throw new Error('the environment has no image (nodes)');
  const exec = await startExecTarget(cluster1, env.images.image);
  stopExec = exec.stop;
  log('building and starting the Go cluster-gateway');
  const goGateway = await startGoGateway(env, frontProxy);
  const direct = loadKubeconfig(cluster1.kubeconfig);
  const aggregatorHeaders = { 'X-Remote-User': 'admin', 'X-Remote-Group': 'system:masters' };
  const allTargets: Target[] = [
    {
      name: 'direct',
      base: direct.server,
      tls: {
        ca: direct.options.ca as string,
        cert: direct.options.cert as string,
        key: direct.options.key as string,
      },
      headers: {},
    },
    {
      name: 'gateway',
      base: `${gateway.url}${proxyPrefix}`,
      tls: frontProxy,
      headers: aggregatorHeaders,
      pid: gateway.process.pid,
    },
    {
      name: 'go',
      base: `${goGateway.url}${proxyPrefix}`,
      tls: frontProxy,
      headers: aggregatorHeaders,
      pid: goGateway.process.pid,
    },
    ...(await startFloorRelays(env, cluster1)),
    ...(flags.targets.has('gateway-h2') ? [await startGatewayWithoutPassThrough(env, frontProxy)] : []),
  ];
  const targets = allTargets.filter((t) => flags.targets.has(t.name));
  const selected = workloads(cluster1.client, exec.pod).filter((w) => !flags.only || flags.only.has(w.name));
  const results = new Map<string, Map<string, Figures[]>>();
  for (let rep = 0; rep < flags.reps; rep++) {
    for (const workload of selected) {
      // Rotate the order each repetition, so no target always runs first (or right after another's load).
      const shift = rep % targets.length;
      const order = [...targets.slice(shift), ...targets.slice(0, shift)];
      for (const target of order) {
        if (workload.skip?.includes(target.name)) continue;
        log(`rep ${rep + 1}/${flags.reps} ${workload.name} ${target.name}`);
        const run = await workload.run(target, flags.scale);
        const perTarget = results.get(workload.name) ?? new Map<string, Figures[]>();
        results.set(workload.name, perTarget);
        const list = perTarget.get(target.name) ?? [];
        list.push(figures(run, target.pid));
        perTarget.set(target.name, list);
        await sleep(500);
      }
    }
  }
  console.log(
    `\nMedians of ${flags.reps} interleaved repetitions; direct = cluster1's kube-apiserver, gateway = this project, Go = oam-dev/cluster-gateway v1.9.1, TLS floor and H2 floor = the bare Node relays of e2e/bench/floor-relay.ts.`,
  );
  console.log(
    "Proxy CPU counts the measured operations only, after each run's warm-up (a fifth of the count for get, list and stream).\n",
  );
  const shown = targetNames.filter((t) => flags.targets.has(t));
  const medians = new Map<string, Map<string, Figures>>();
  for (const workload of selected) {
    const perTarget = results.get(workload.name);
    if (!perTarget) continue;
    medians.set(workload.name, new Map([...perTarget].map(([name, list]) => [name, medianFigures(list)])));
    console.log(`${table(workload, medians.get(workload.name) as Map<string, Figures>, shown)}\n`);
  }
  console.log(`${summary(selected, medians)}\n`);
  if (flags.keep) {
    console.log(`--keep: the environment stays up until Ctrl-C (hub kubeconfig ${env.hub.kubeconfig}).`);
    await new Promise(() => {});
  }
} catch (err) {
  failed = true;
  console.error(`\nbenchmark failed: ${(err as Error).stack ?? err}`);
} finally {
  if (!flags.keep || failed) {
    await stopExec?.().catch(() => undefined);
    await env.stop();
    process.exit(failed ? 1 : 0);
  }
}

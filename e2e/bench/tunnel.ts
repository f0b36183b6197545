/**
 * Tunnel benchmark (`npm run bench:tunnel`): what the agent tunnel costs against the gateway's direct
 * path to the same cluster, on loopback, with real components.
 *
 * Starts its own local environment (hub + cluster1, gateway behind the real kube-aggregator) in
 * .local/bench-tunnel, and an agent (node agent/main.ts) for "cluster1-tunnel": cluster1 again, whose
 * credential Secret asks for the tunnel (hub-credential model, as e2e/tunnel.test.ts). Its tunnel is
 * the real one: an upgrade on clustergateways/cluster1-tunnel/attach through the hub's kube-apiserver
 * and aggregator, HTTP/2 with the roles reversed, one CONNECT stream per upstream connection, TLS to
 * cluster1 inside it. Both paths are called straight at the gateway, authenticating as the
 * aggregator does (front-proxy certificate), so the only difference is the gateway's upstream:
 *
 *   direct: gateway -> TCP + TLS -> cluster1's kube-apiserver
 *   tunnel: gateway -> HTTP/2 stream -> hub kube-apiserver (relay) -> agent -> TCP -> cluster1 (TLS end to end)
 *
 * Workloads:
 *   - GET /api/v1/namespaces/default: --requests at --concurrency over keep-alive HTTPS, after a
 *     warm-up, then --serial requests one at a time (on 2 shared cores, concurrency measures queueing
 *     as much as the path; one at a time shows what a request pays); req/s and latency percentiles;
 *   - a --blob-mib MiB streamed response (default 100): an aggregated API on cluster1
 *     (bench.tunnel.example/v1, served by this process through cluster1's own kube-aggregator),
 *     --blob-runs times per path; MiB/s (time to the last byte);
 *   - the same response without any apiserver in the way, to see what the tunnel itself can carry:
 *     "blob-direct" is a cluster whose endpoint is the blob server, "blob-tunnel" one reached through a
 *     second agent whose "apiserver" is the blob server (TLS end to end again).
 * And a third path: tunnels attached straight to the gateway's port (agent --tunnel-server), which skip
 * the hub kube-apiserver's relay (and its TLS decryption and encryption).
 * The paths alternate, --rounds times, and each figure is the median over rounds.
 *
 * It ends with a per-hop table of the tunnelled raw stream: each process's CPU per MiB (the median over
 * every raw run), and the throughput that hop alone would allow with a core of its own (1000 / ms per
 * MiB): on two shared cores the hops queue for the same CPU, in a deployment each runs on its own. The
 * gateway's CPU per tunnelled MiB is set against its CPU per direct MiB (target: at most 1.3x), and one
 * `headline:` line carries the figures for the lead's summary table.
 *
 * Flags: --requests=N (2000) --concurrency=C (8) --serial=S (500) --warmup=W (500) --blob-mib=M (100)
 *        --blob-runs=R (3) --rounds=K (2) --keep (leave the environment running)
 *        --only=direct,tunnel,port (run only these paths, e.g. to profile one: the comparisons need all three)
 */
import { readFileSync } from 'node:fs';
import type http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { repoRoot } from '../../hack/localenv/binaries.ts';
import { compileCacheEnv, warmCompileCache } from '../../hack/localenv/compile-cache.ts';
import { type Environment, startEnvironment } from '../../hack/localenv/environment.ts';
import { credentialNamespace } from '../../hack/localenv/gateway.ts';
import { writeKubeconfig } from '../../hack/localenv/kubeconfig.ts';
import { ensureNamespace } from '../../hack/localenv/ocm.ts';
import { freePort } from '../../hack/localenv/ports.ts';
import { waitFor } from '../../hack/localenv/wait.ts';
import {
  agentAttachClusterRole,
  agentAttachClusterRoleBinding,
  agentHubLease,
  agentHubRole,
  agentHubRoleBinding,
} from '../../manager/addon/registration/hub-permissions.ts';
import { addonAgentSubject } from '../../manager/addon/registration/subject.ts';
import type { KubeObject } from '../../shared/kube/client.ts';
import { cpuUsage, median, percentile, rssKb } from './measure.ts';

const stateDir = path.join(repoRoot, '.local', 'bench-tunnel');
const tunnelled = 'cluster1-tunnel';
/** Clusters whose "apiserver" is the blob server itself: the gateway's and the tunnel's own capacity. */
const rawDirect = 'blob-direct';
const rawTunnel = 'blob-tunnel';
/** The same through tunnels attached straight to the gateway's port (agent --tunnel-server). */
const portTunnelled = 'cluster1-port';
const rawPortTunnel = 'blob-port';
const objectPath = '/api/v1/namespaces/default';
const blobGroup = 'bench.tunnel.example';
const proxyOf = (cluster: string) => `/apis/cluster.core.oam.dev/v1alpha1/clustergateways/${cluster}/proxy`;

interface Flags {
  requests: number;
  concurrency: number;
  serial: number;
  warmup: number;
  blobMib: number;
  blobRuns: number;
  rounds: number;
  keep: boolean;
  only: Set<PathKey>;
}

const pathKeys = ['direct', 'tunnel', 'port'] as const;
type PathKey = (typeof pathKeys)[number];
const pathLabels: Record<PathKey, string> = {
  direct: 'direct',
  tunnel: 'tunnel',
  port: 'tunnel direct port',
};

function parseFlags(argv: string[]): Flags {
  const flags: Flags = {
    requests: 2000,
    concurrency: 8,
    serial: 500,
    warmup: 500,
    blobMib: 100,
    blobRuns: 3,
    rounds: 2,
    keep: false,
    only: new Set(pathKeys),
  };
  const numeric: Record<string, keyof Flags> = {
    requests: 'requests',
    concurrency: 'concurrency',
    serial: 'serial',
    warmup: 'warmup',
    'blob-mib': 'blobMib',
    'blob-runs': 'blobRuns',
    rounds: 'rounds',
  };
  for (const arg of argv) {
    const [name, value] = arg.replace(/^--/, '').split('=', 2) as [string, string | undefined];
    const key = numeric[name];
    if (name === 'keep') flags.keep = true;
    else if (name === 'only' && value) {
      const chosen = value.split(',');
      const unknown = chosen.filter((k) => !(pathKeys as readonly string[]).includes(k));
      if (unknown.length > 0)
        throw new Error(`--only: unknown path ${unknown.join(', ')}; use ${pathKeys.join(',')}`);
      flags.only = new Set(chosen as PathKey[]);
    } else if (key && value !== undefined && Number.isInteger(Number(value)) && Number(value) >= 0) {
      (flags[key] as number) = Number(value);
    } else {
      throw new Error(
        `bad flag ${arg}; use --requests=N --concurrency=C --serial=S --warmup=W --blob-mib=M --blob-runs=R --rounds=K --keep --only=direct,tunnel,port`,
      );
    }
  }
  return flags;
}

// ---------------------------------------------------------------------------
// The streamed response: an aggregated API on cluster1 whose one object is --blob-mib MiB of bytes.

/**
 * Serves bench.tunnel.example/v1 for cluster1's kube-aggregator (registered with an APIService and an
 * ExternalName Service to localhost, as the hub's gateway is): discovery, and GET .../blobs/<MiB>,
 * written in 1 MiB chunks with backpressure. The aggregator streams it through (a reverse proxy), so
 * the managed apiserver costs little and the paths before it are what is measured.
 */
async function startBlobApi(env: Environment): Promise<{ port: number; close(): void }> {
  const cluster1 = env.managed[0]!;
  const serving = await cluster1.pki.ca.issue({
    commonName: 'bench-blob',
    // kubernetes.default.svc: the server name the gateway verifies inside a tunnel.
    dnsNames: ['bench-blob.default.svc', 'localhost', 'kubernetes.default.svc'],
    ipAddresses: ['127.0.0.1'],
    usage: 'server',
  });
  const chunk = Buffer.alloc(1 << 20, 'x');
  const server = https.createServer({ cert: serving.cert, key: serving.key }, (req, res) => {
    const url = req.url ?? '/';
    if (url === `/apis/${blobGroup}/v1` || url === `/apis/${blobGroup}/v1/`) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          kind: 'APIResourceList',
          apiVersion: 'v1',
          groupVersion: `${blobGroup}/v1`,
          resources: [
            { name: 'blobs', singularName: 'blob', namespaced: false, kind: 'Blob', verbs: ['get'] },
          ],
        }),
      );
      return;
    }
    if (url === '/readyz' || url === '/livez' || url === '/healthz') {
      res.end('ok');
      return;
    }
    // The aggregated API's path, or the same without it when this server is a cluster's "apiserver".
    const match = new RegExp(`^(?:/apis/${blobGroup.replaceAll('.', '\\.')}/v1)?/blobs/(\\d+)$`).exec(url);
    if (!match) {
      res.writeHead(404).end();
      return;
    }
    let left = Number(match[1]);
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': left * chunk.length });
    const pump = () => {
      while (left > 0) {
        left--;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const client = cluster1.client;
  const manager = 'bench-tunnel';
  await client.apply(
    '/api/v1/namespaces/default/services/bench-blob',
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'bench-blob', namespace: 'default' },
      spec: { type: 'ExternalName', externalName: 'localhost' },
    },
    manager,
  );
  await client.apply(
    `/apis/apiregistration.k8s.io/v1/apiservices/v1.${blobGroup}`,
    {
      apiVersion: 'apiregistration.k8s.io/v1',
      kind: 'APIService',
      metadata: { name: `v1.${blobGroup}` },
      spec: {
        group: blobGroup,
        version: 'v1',
        service: { namespace: 'default', name: 'bench-blob', port },
        caBundle: Buffer.from(cluster1.pki.ca.cert).toString('base64'),
        groupPriorityMinimum: 1000,
        versionPriority: 10,
      },
    },
    manager,
  );
  return { port, close: () => server.close() };
}

// ---------------------------------------------------------------------------
// The tunnelled twin of cluster1: its Secret, the agent's hub identity and grants, the agent process.

/** A cluster credential Secret with a (dummy or real) token, the CA of cluster1, and an endpoint or the tunnel. */
async function applyClusterSecret(
  env: Environment,
  name: string,
  token: string,
  endpoint: { address: string } | 'tunnel',
): Promise<void> {
  await env.hub.client.apply(
    `/api/v1/namespaces/${credentialNamespace}/secrets/${name}`,
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name,
        namespace: credentialNamespace,
        labels: {
          'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken',
          ...(endpoint === 'tunnel' ? { 'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy' } : {}),
        },
      },
      stringData: {
        token,
        'ca.crt': env.managed[0]!.pki.ca.cert,
        ...(endpoint === 'tunnel' ? {} : { endpoint: endpoint.address }),
      },
    },
    'bench-tunnel',
  );
}

/**
 * An agent process for `cluster` (node agent/main.ts, tunnel on), with the hub identity and grants the
 * addon manager gives a cluster's agent (manager/addon/registration/hub-permissions.ts); it relays to
 * the server of `spokeKubeconfig`.
 */
async function startAgent(
  env: Environment,
  cluster: string,
  spokeKubeconfig: string,
  extraArgs: string[] = [],
): Promise<number> {
  const hub = env.hub.client;
  await ensureNamespace(hub, cluster);
  const owner = {
    apiVersion: 'addon.open-cluster-management.io/v1alpha1',
    name: 'cluster-gateway',
    namespace: cluster,
    uid: '',
  };
  const subject = addonAgentSubject(cluster, 'cluster-gateway');
  const rbac = '/apis/rbac.authorization.k8s.io/v1';
  for (const [collection, obj] of [
    [`${rbac}/namespaces/${cluster}/roles`, agentHubRole(owner)],
    [`${rbac}/namespaces/${cluster}/rolebindings`, agentHubRoleBinding(owner, subject)],
    [`/apis/coordination.k8s.io/v1/namespaces/${cluster}/leases`, agentHubLease(owner, subject, 10)],
    [`${rbac}/clusterroles`, agentAttachClusterRole(owner)],
    [`${rbac}/clusterrolebindings`, agentAttachClusterRoleBinding(owner, subject)],
  ] as [string, KubeObject][]) {
    if (obj.metadata) delete obj.metadata.ownerReferences;
    await hub.apply(`${collection}/${obj.metadata?.name}`, obj, 'bench-tunnel');
  }
  const certificate = await env.hub.pki.ca.issue({
    commonName: subject.user,
    organizations: subject.groups,
    usage: 'client',
  });
  const hubKubeconfig = writeKubeconfig(path.join(stateDir, `agent-${cluster}-hub.kubeconfig`), {
    name: 'hub',
    server: env.hub.server,
    caCert: env.hub.pki.ca.cert,
    client: certificate,
  });
  warmCompileCache('agent/main.ts'); // as the agent image is
  const agent = env.supervisor.start(`bench-agent-${cluster}`, process.execPath, {
    env: compileCacheEnv,
    args: [
      path.join(repoRoot, 'agent', 'main.ts'),
      `--cluster-name=${cluster}`,
      `--hub-kubeconfig=${hubKubeconfig}`,
      `--kubeconfig=${spokeKubeconfig}`,
      '--install-namespace=default',
      '--bind-address=127.0.0.1',
      `--port=${await freePort()}`,
      '--log-level=warn',
      ...extraArgs,
    ],
  });
  return agent.pid;
}

// ---------------------------------------------------------------------------
// Load.

interface Client {
  agent: https.Agent;
  url: (p: string) => URL;
  headers: Record<string, string>;
}

function request(client: Client, p: string, sink: (res: http.IncomingMessage) => void): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      client.url(p),
      { agent: client.agent, method: 'GET', headers: { accept: 'application/json', ...client.headers } },
      (res) => {
        sink(res);
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

async function getLoad(client: Client, cluster: string, total: number, concurrency: number) {
  const latencies = new Float64Array(total);
  let issued = 0;
  const worker = async () => {
    while (issued < total) {
      const i = issued++;
      const started = performance.now();
      const status = await request(client, proxyOf(cluster) + objectPath, (res) => res.resume());
      latencies[i] = performance.now() - started;
      if (status !== 200) throw new Error(`${cluster}: request ${i} answered ${status}`);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, worker));
  return { latencies: latencies.sort(), reqPerSec: total / ((performance.now() - started) / 1000) };
}

/**
 * One streamed response of `mib` MiB; its throughput in MiB/s (time to the last byte). Through
 * cluster1's aggregated API, or (`raw`) straight from a cluster whose "apiserver" is the blob server.
 */
async function blob(client: Client, cluster: string, mib: number, raw = false): Promise<number> {
  let bytes = 0;
  const started = performance.now();
  const p = raw ? `/blobs/${mib}` : `/apis/${blobGroup}/v1/blobs/${mib}`;
  const status = await request(client, `${proxyOf(cluster)}${p}`, (res) =>
    res.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  if (status !== 200 || bytes !== mib << 20) {
    throw new Error(`${cluster}: blob answered ${status} with ${bytes} bytes, not ${mib} MiB`);
  }
  return mib / seconds;
}

/** CPU time of the processes a streamed response crosses, per MiB carried (all threads, from /proc). */
type CpuPerMib = Record<string, number>;

async function blobWithCpu(
  client: Client,
  cluster: string,
  mib: number,
  raw: boolean,
  pids: Record<string, number>,
): Promise<{ mibPerSec: number; cpu: CpuPerMib }> {
  const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuUsage(pid).cpuMs]));
  const mibPerSec = await blob(client, cluster, mib, raw);
  const cpu: CpuPerMib = {};
  for (const [k, pid] of Object.entries(pids)) cpu[k] = (cpuUsage(pid).cpuMs - (before[k] ?? 0)) / mib;
  return { mibPerSec, cpu };
}

interface Round {
  /** GET at --concurrency. */
  p50: number;
  p90: number;
  p99: number;
  reqPerSec: number;
  gatewayCpuUsPerReq: number;
  /** GET one at a time. */
  serialP50: number;
  serialP99: number;
  /** Streamed responses through cluster1's aggregated API, and without any apiserver (raw). */
  mibPerSec: number[];
  rawMibPerSec: number[];
  /** CPU ms per MiB of each raw streamed response, by process. */
  rawCpu: CpuPerMib[];
}

function formatTable(rows: [string, Round][], flags: Flags): string {
  const header = [
    'path',
    `GET req/s (c=${flags.concurrency})`,
    'p50 ms',
    'p99 ms',
    'gateway CPU µs/GET',
    'serial p50 ms',
    'serial p99 ms',
    `${flags.blobMib} MiB via cluster1, MiB/s`,
    `${flags.blobMib} MiB raw, MiB/s`,
  ];
  const lines = rows.map(([name, r]) => [
    name,
    r.reqPerSec.toFixed(0),
    r.p50.toFixed(2),
    r.p99.toFixed(2),
    r.gatewayCpuUsPerReq.toFixed(0),
    r.serialP50.toFixed(2),
    r.serialP99.toFixed(2),
    median(r.mibPerSec).toFixed(0),
    median(r.rawMibPerSec).toFixed(0),
  ]);
  const all = [header, ...lines];
  const widths = header.map((_, c) => Math.max(...all.map((row) => row[c]!.length)));
  const line = (row: string[]) =>
    `| ${row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join(' | ')} |`;
  const rule = `|${widths.map((w, c) => (c === 0 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [line(header), rule, ...lines.map(line)].join('\n');
}

/** The gateway's CPU per tunnelled MiB may be at most this multiple of its CPU per direct MiB (issue 33). */
const gatewayTunnelRatioTarget = 1.3;

interface Hop {
  hop: string;
  path: string;
  msPerMib: number;
}

/** The hops of the tunnelled raw stream, and the direct path's gateway for reference. */
function hopsOf(cpuOf: (key: PathKey, proc: string) => number, ran: Set<PathKey>): Hop[] {
  const hops: (Hop & { key: PathKey })[] = [
    { key: 'tunnel', hop: 'gateway', path: 'tunnel', msPerMib: cpuOf('tunnel', 'gateway') },
    {
      key: 'tunnel',
      hop: 'hub kube-apiserver (relay)',
      path: 'tunnel',
      msPerMib: cpuOf('tunnel', 'hub kube-apiserver'),
    },
    { key: 'tunnel', hop: 'agent', path: 'tunnel', msPerMib: cpuOf('tunnel', 'agent') },
    { key: 'port', hop: 'gateway', path: 'tunnel, direct port', msPerMib: cpuOf('port', 'gateway') },
    { key: 'port', hop: 'agent', path: 'tunnel, direct port', msPerMib: cpuOf('port', 'agent (port)') },
    { key: 'direct', hop: 'gateway (reference)', path: 'direct', msPerMib: cpuOf('direct', 'gateway') },
  ];
  return hops.filter((h) => ran.has(h.key));
}

/** CPU per MiB of each hop and the MiB/s it alone would allow on a core of its own (1000 / ms per MiB). */
function formatHops(hops: Hop[], mib: number): string {
  const header = ['hop', 'path', 'CPU ms/MiB', 'MiB/s with a core of its own'];
  const rows = hops.map((h) => [
    h.hop,
    h.path,
    h.msPerMib.toFixed(2),
    h.msPerMib > 0 ? (1000 / h.msPerMib).toFixed(0) : '-',
  ]);
  const all = [header, ...rows];
  const widths = header.map((_, c) => Math.max(...all.map((row) => row[c]!.length)));
  const line = (row: string[]) =>
    `| ${row.map((cell, c) => (c < 2 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join(' | ')} |`;
  const rule = `|${widths.map((w, c) => (c < 2 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [
    `Per hop, ${mib} MiB raw streamed response (CPU of all threads, median over every raw run):`,
    line(header),
    rule,
    ...rows.map(line),
  ].join('\n');
}

const signed = (v: number, unit: string) => `${v >= 0 ? '+' : ''}${v.toFixed(2)}${unit}`;

// ---------------------------------------------------------------------------

const flags = parseFlags(process.argv.slice(2));
const log = (line: string) => process.stderr.write(`[bench env] ${line}\n`);
const env = await startEnvironment({
  stateDir,
  managedClusters: ['cluster1'],
  log,
  gatewayArgs: ['--log-level=warn'],
}).catch((err: Error) => {
  console.error(`\nthe environment did not start: ${err.message}`);
  process.exit(1);
});
let failed = false;
try {
  const gateway = env.gateway;
  const cluster1 = env.managed[0];
  if (!gateway || !cluster1) throw new Error('the environment has no gateway or no cluster1');
  const blobApi = await startBlobApi(env);
  // The tunnelled twin of cluster1 (its token, its CA), and the raw pair around the blob server.
  const token = Buffer.from(
    (
      await env.hub.client.get<KubeObject & { data: Record<string, string> }>(
        `/api/v1/namespaces/${credentialNamespace}/secrets/cluster1`,
      )
    ).data.token ?? '',
    'base64',
  ).toString();
  await applyClusterSecret(env, tunnelled, token, 'tunnel');
  await applyClusterSecret(env, rawDirect, 'unused', { address: `https://127.0.0.1:${blobApi.port}` });
  await applyClusterSecret(env, rawTunnel, 'unused', 'tunnel');
  await applyClusterSecret(env, portTunnelled, token, 'tunnel');
  await applyClusterSecret(env, rawPortTunnel, 'unused', 'tunnel');
  const agentPid = await startAgent(env, tunnelled, cluster1.kubeconfig);
  const blobKubeconfig = writeKubeconfig(path.join(stateDir, 'blob-server.kubeconfig'), {
    name: 'blob',
    server: `https://127.0.0.1:${blobApi.port}`,
    caCert: cluster1.pki.ca.cert,
    token: 'unused',
  });
  const rawAgentPid = await startAgent(env, rawTunnel, blobKubeconfig);
  // The gateway's serving certificate is signed by the hub CA in the local environment.
  const straight = [`--tunnel-server=${gateway.url}`, `--tunnel-ca-file=${env.hub.files.ca}`];
  await startAgent(env, portTunnelled, cluster1.kubeconfig, straight);
  const rawPortAgentPid = await startAgent(env, rawPortTunnel, blobKubeconfig, straight);
  const pids = {
    'bench (client + blob server)': process.pid,
    gateway: gateway.process.pid,
    'hub kube-apiserver': env.hub.apiserver.pid,
    agent: rawAgentPid,
    'agent (port)': rawPortAgentPid,
  };
  const client: Client = {
    agent: new https.Agent({
      keepAlive: true,
      maxSockets: flags.concurrency,
      ca: readFileSync(env.hub.files.ca),
      cert: readFileSync(path.join(stateDir, 'hub', 'front-proxy-client.crt')),
      key: readFileSync(path.join(stateDir, 'hub', 'front-proxy-client.key')),
    }),
    url: (p) => new URL(p, gateway.url),
    headers: { 'X-Remote-User': 'admin', 'X-Remote-Group': 'system:masters' },
  };
  // Every path answers, and the blob API is registered on cluster1 (its aggregator checks it first).
  for (const [cluster, raw] of [
    ['cluster1', false],
    [tunnelled, false],
    [rawDirect, true],
    [rawTunnel, true],
    [portTunnelled, false],
    [rawPortTunnel, true],
  ] as const) {
    await waitFor(
      `${cluster} to serve the blob through the gateway`,
      async () => (await blob(client, cluster, 1, raw).catch(() => 0)) > 0,
      { timeoutMs: 90_000, intervalMs: 500 },
    );
  }
  const allTargets = [
    { key: 'direct', name: 'direct (gateway -> cluster1)', cluster: 'cluster1', raw: rawDirect },
    { key: 'tunnel', name: 'tunnel (gateway -> agent -> cluster1)', cluster: tunnelled, raw: rawTunnel },
    {
      key: 'port',
      name: 'tunnel, direct port (--tunnel-server)',
      cluster: portTunnelled,
      raw: rawPortTunnel,
    },
  ] as const;
  const targets = allTargets.filter((t) => flags.only.has(t.key));
  console.log(
    `\nGET ${objectPath}: ${flags.requests} requests at concurrency ${flags.concurrency} and ${flags.serial} one at a time ` +
      `(after ${flags.warmup} warm-up); ${flags.blobMib} MiB streamed ${flags.blobRuns}x per round and path; ` +
      `${flags.rounds} rounds, paths alternating; medians over rounds`,
  );
  const rounds = new Map<string, Round[]>(targets.map((t) => [t.name, []]));
  for (let round = 0; round < flags.rounds; round++) {
    for (const target of round % 2 === 0 ? targets : [...targets].reverse()) {
      process.stderr.write(`[bench] round ${round + 1}: ${target.name} ...\n`);
      if (flags.warmup > 0) await getLoad(client, target.cluster, flags.warmup, flags.concurrency);
      const cpuBefore = cpuUsage(gateway.process.pid);
      const run = await getLoad(client, target.cluster, flags.requests, flags.concurrency);
      const cpuAfter = cpuUsage(gateway.process.pid);
      const serial = await getLoad(client, target.cluster, Math.max(1, flags.serial), 1);
      const mibPerSec: number[] = [];
      const rawMibPerSec: number[] = [];
      const rawCpu: CpuPerMib[] = [];
      for (let i = 0; i < flags.blobRuns; i++) {
        mibPerSec.push(await blob(client, target.cluster, flags.blobMib));
        const raw = await blobWithCpu(client, target.raw, flags.blobMib, true, pids);
        rawMibPerSec.push(raw.mibPerSec);
        rawCpu.push(raw.cpu);
      }
      rounds.get(target.name)!.push({
        p50: percentile(run.latencies, 50),
        p90: percentile(run.latencies, 90),
        p99: percentile(run.latencies, 99),
        reqPerSec: run.reqPerSec,
        gatewayCpuUsPerReq: ((cpuAfter.cpuMs - cpuBefore.cpuMs) * 1000) / flags.requests,
        serialP50: percentile(serial.latencies, 50),
        serialP99: percentile(serial.latencies, 99),
        mibPerSec,
        rawMibPerSec,
        rawCpu,
      });
    }
  }
  const med = (rs: Round[], key: keyof Round) => median(rs.map((r) => r[key] as number));
  const summary = targets.map((t): [string, Round] => {
    const rs = rounds.get(t.name)!;
    return [
      t.name,
      {
        p50: med(rs, 'p50'),
        p90: med(rs, 'p90'),
        p99: med(rs, 'p99'),
        reqPerSec: med(rs, 'reqPerSec'),
        gatewayCpuUsPerReq: med(rs, 'gatewayCpuUsPerReq'),
        serialP50: med(rs, 'serialP50'),
        serialP99: med(rs, 'serialP99'),
        mibPerSec: rs.flatMap((r) => r.mibPerSec),
        rawMibPerSec: rs.flatMap((r) => r.rawMibPerSec),
        rawCpu: rs.flatMap((r) => r.rawCpu),
      },
    ];
  });
  const byKey = new Map(targets.map((t, i) => [t.key as PathKey, summary[i]![1]]));
  console.log(`\n${formatTable(summary, flags)}\n`);
  const d = byKey.get('direct');
  for (const key of ['tunnel', 'port'] as const) {
    const t = byKey.get(key);
    if (!d || !t) continue;
    const label = key === 'tunnel' ? 'tunnel' : 'tunnel, direct port';
    const serialDelta = t.serialP50 - d.serialP50;
    const share = median(t.mibPerSec) / median(d.mibPerSec);
    const rawShare = median(t.rawMibPerSec) / median(d.rawMibPerSec);
    console.log(
      `${label} adds, one request at a time: p50 ${signed(serialDelta, ' ms')}, p99 ${signed(t.serialP99 - d.serialP99, ' ms')} ` +
        `(target: p50 at most +0.50 ms) ${serialDelta <= 0.5 ? 'OK' : 'BEHIND'}`,
    );
    console.log(
      `${label} adds at concurrency ${flags.concurrency}: p50 ${signed(t.p50 - d.p50, ' ms')}, p99 ${signed(t.p99 - d.p99, ' ms')}, ` +
        `gateway CPU ${signed(t.gatewayCpuUsPerReq - d.gatewayCpuUsPerReq, ' µs')}/GET`,
    );
    console.log(
      `${label} throughput: ${(100 * share).toFixed(0)}% of direct through cluster1, ${(100 * rawShare).toFixed(0)}% without an apiserver ` +
        `(target: at least 80%) ${Math.min(share, rawShare) >= 0.8 ? 'OK' : 'BEHIND'}`,
    );
  }
  // Median over every raw run of the path (blob-runs x rounds), process by process.
  const cpuOf = (key: PathKey, proc: string) => {
    const runs = byKey.get(key)?.rawCpu ?? [];
    return runs.length === 0 ? Number.NaN : median(runs.map((c) => c[proc] ?? Number.NaN));
  };
  console.log(
    `CPU ms per MiB of a raw streamed response (all threads, median over every raw run), ${targets.map((t) => pathLabels[t.key]).join(' / ')}:`,
  );
  for (const k of Object.keys(pids)) {
    console.log(`  ${k.padEnd(30)} ${targets.map((t) => cpuOf(t.key, k).toFixed(2)).join(' / ')}`);
  }
  console.log(`\n${formatHops(hopsOf(cpuOf, flags.only), flags.blobMib)}\n`);
  const tunnelledMs = cpuOf('tunnel', 'gateway');
  const directMs = cpuOf('direct', 'gateway');
  const ratio = tunnelledMs / directMs;
  if (Number.isFinite(ratio)) {
    console.log(
      `gateway CPU per tunnelled MiB against per direct MiB: ${tunnelledMs.toFixed(2)} / ${directMs.toFixed(2)} ms = ` +
        `${ratio.toFixed(2)}x (target: at most ${gatewayTunnelRatioTarget.toFixed(1)}x) ` +
        `${ratio <= gatewayTunnelRatioTarget ? 'OK' : 'BEHIND'}`,
    );
  }
  console.log(
    `headline: tunnel ${flags.blobMib} MiB raw, gateway CPU ms/MiB tunnelled ${tunnelledMs.toFixed(2)}, direct ${directMs.toFixed(2)}, ` +
      `ratio ${ratio.toFixed(2)}x (target <= ${gatewayTunnelRatioTarget.toFixed(1)}x); hub relay ${cpuOf('tunnel', 'hub kube-apiserver').toFixed(2)}, ` +
      `agent ${cpuOf('tunnel', 'agent').toFixed(2)} ms/MiB`,
  );
  console.log(
    `RSS: gateway ${(rssKb(gateway.process.pid) / 1024).toFixed(1)} MiB; agents ${(rssKb(agentPid) / 1024).toFixed(1)} and ` +
      `${(rssKb(rawAgentPid) / 1024).toFixed(1)} MiB (peaks ${(rssKb(agentPid, 'VmHWM') / 1024).toFixed(1)} and ${(rssKb(rawAgentPid, 'VmHWM') / 1024).toFixed(1)} MiB)`,
  );
  client.agent.destroy();
  if (!flags.keep) blobApi.close();
  if (flags.keep) {
    console.log(`\n--keep: the environment stays up until Ctrl-C (hub kubeconfig ${env.hub.kubeconfig})`);
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

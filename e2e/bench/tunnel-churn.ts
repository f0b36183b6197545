/**
 * Tunnel churn benchmark (`npm run bench:tunnel-churn`): does the gateway give back what an agent's
 * tunnel took once the agent is gone? An agent is killed (SIGKILL: no drain, no goodbye, as when its
 * node dies) and started again, --cycles times; each time the benchmark waits until the new tunnel
 * is up and a GET through it answers 200. It prints the gateway's open file descriptors
 * (/proc/<pid>/fd) and RSS at cycle 0 (the first tunnel up) and every quarter of the cycles, then
 * after --settle seconds without churn; and the reconnect time (agent process started -> first
 * successful request through its tunnel) p50/p99.
 *
 * Starts its own local environment (hub + cluster1, gateway behind the real kube-aggregator) in
 * .local/bench-tunnel-churn, and an agent (node agent/main.ts) for "cluster1-churn": cluster1 again,
 * whose credential Secret asks for the tunnel (hub-credential model, as e2e/bench/tunnel.ts), so
 * every reconnect also gives the gateway a new connection pool (TLS to cluster1 inside the tunnel)
 * and retires the old one. The requests go straight to the gateway, authenticating as the aggregator
 * does (front-proxy certificate), over one keep-alive connection.
 *
 * Flags: --cycles=N (200) --settle=S (30) --keep (leave the environment running)
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { repoRoot } from '../../hack/localenv/binaries.ts';
import { compileCacheEnv, warmCompileCache } from '../../hack/localenv/compile-cache.ts';
import { type Environment, startEnvironment } from '../../hack/localenv/environment.ts';
import { credentialNamespace } from '../../hack/localenv/gateway.ts';
import { writeKubeconfig } from '../../hack/localenv/kubeconfig.ts';
import { ensureNamespace } from '../../hack/localenv/ocm.ts';
import { freePort } from '../../hack/localenv/ports.ts';
import type { ManagedProcess } from '../../hack/localenv/supervisor.ts';
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
import { percentile, rssKb } from './measure.ts';

const stateDir = path.join(repoRoot, '.local', 'bench-tunnel-churn');
const cluster = 'cluster1-churn';
const objectPath = '/api/v1/namespaces/default';
const proxyPath = `/apis/cluster.core.oam.dev/v1alpha1/clustergateways/${cluster}/proxy${objectPath}`;

interface Flags {
  cycles: number;
  settle: number;
  keep: boolean;
}

function parseFlags(argv: string[]): Flags {
  const flags: Flags = { cycles: 200, settle: 30, keep: false };
  for (const arg of argv) {
    const [name, value] = arg.replace(/^--/, '').split('=', 2) as [string, string | undefined];
    if (name === 'keep') flags.keep = true;
    else if ((name === 'cycles' || name === 'settle') && value && /^\d+$/.test(value))
      flags[name] = Number(value);
    else throw new Error(`bad flag ${arg}; use --cycles=N --settle=S --keep`);
  }
  return flags;
}

/** The agent's hub grants and identity, as the addon manager gives them; returns its hub kubeconfig. */
async function provisionAgent(env: Environment): Promise<string> {
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
    await hub.apply(`${collection}/${obj.metadata?.name}`, obj, 'bench-tunnel-churn');
  }
  // The hub holds cluster1's token and CA, and asks for the tunnel (hub-credential).
  const token = Buffer.from(
    (
      await hub.get<KubeObject & { data: Record<string, string> }>(
        `/api/v1/namespaces/${credentialNamespace}/secrets/cluster1`,
      )
    ).data.token ?? '',
    'base64',
  ).toString();
  await hub.apply(
    `/api/v1/namespaces/${credentialNamespace}/secrets/${cluster}`,
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: cluster,
        namespace: credentialNamespace,
        labels: {
          'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken',
          'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy',
        },
      },
      stringData: { token, 'ca.crt': env.managed[0]!.pki.ca.cert },
    },
    'bench-tunnel-churn',
  );
  const certificate = await env.hub.pki.ca.issue({
    commonName: subject.user,
    organizations: subject.groups,
    usage: 'client',
  });
  return writeKubeconfig(path.join(stateDir, `agent-${cluster}-hub.kubeconfig`), {
    name: 'hub',
    server: env.hub.server,
    caCert: env.hub.pki.ca.cert,
    client: certificate,
  });
}

function startAgent(env: Environment, hubKubeconfig: string, port: number, cycle: number): ManagedProcess {
  warmCompileCache('agent/main.ts'); // as the agent image is: a restart costs what it costs in a pod
  return env.supervisor.start(`bench-agent-${cluster}-${cycle}`, process.execPath, {
    args: [
      path.join(repoRoot, 'agent', 'main.ts'),
      `--cluster-name=${cluster}`,
      `--hub-kubeconfig=${hubKubeconfig}`,
      `--kubeconfig=${env.managed[0]!.kubeconfig}`,
      '--install-namespace=default',
      '--bind-address=127.0.0.1',
      `--port=${port}`,
      '--log-level=warn',
    ],
    env: compileCacheEnv,
  });
}

/** GET through the tunnel, straight at the gateway as the aggregator calls it; the status code. */
function get(env: Environment, agent: https.Agent): Promise<number> {
  return new Promise((resolve) => {
    const req = https.request(
      new URL(proxyPath, env.gateway!.url),
      {
        agent,
        headers: { accept: 'application/json', 'X-Remote-User': 'admin', 'X-Remote-Group': 'system:masters' },
        timeout: 10_000,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', () => resolve(0));
      },
    );
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
    req.end();
  });
}

interface Sample {
  label: string;
  fds: number;
  sockets: number;
  rssMiB: number;
}

/** The gateway's open file descriptors (and how many are sockets) and RSS, now. */
function sample(label: string, pid: number): Sample {
  const fds = readdirSync(`/proc/${pid}/fd`);
  let sockets = 0;
  for (const fd of fds) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) sockets++;
    } catch {
      // closed meanwhile
    }
  }
  return { label, fds: fds.length, sockets, rssMiB: rssKb(pid) / 1024 };
}

/** One value of the gateway's /metrics (the sum of the series of `name`). */
async function gatewayMetric(env: Environment, agent: https.Agent, name: string): Promise<number> {
  const text = await new Promise<string>((resolve, reject) => {
    const req = https.request(
      new URL('/metrics', env.gateway!.url),
      { agent, headers: { 'X-Remote-User': 'admin', 'X-Remote-Group': 'system:masters' } },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => resolve(body));
      },
    );
    req.on('error', reject);
    req.end();
  });
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) sum += Number(line.split(' ').at(-1));
  }
  return sum;
}

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
  if (!gateway) throw new Error('the environment has no gateway');
  const hubKubeconfig = await provisionAgent(env);
  const client = new https.Agent({
    keepAlive: true,
    maxSockets: 1,
    ca: readFileSync(env.hub.files.ca),
    cert: readFileSync(path.join(stateDir, 'hub', 'front-proxy-client.crt')),
    key: readFileSync(path.join(stateDir, 'hub', 'front-proxy-client.key')),
  });
  const agentPort = await freePort();
  const samples: Sample[] = [];
  const reconnectMs: number[] = [];
  const marks = new Set([0, 1, 2, 3, 4].map((q) => Math.round((q * flags.cycles) / 4)));

  /** Starts agent number `cycle` and waits for a request through its tunnel; the time that took. */
  const connect = async (cycle: number): Promise<{ agent: ManagedProcess; ms: number }> => {
    const started = performance.now();
    const agent = startAgent(env, hubKubeconfig, agentPort, cycle);
    await waitFor(
      `cycle ${cycle}: a request through the new tunnel`,
      async () => (await get(env, client)) === 200,
      {
        timeoutMs: 60_000,
        intervalMs: 20,
        failFast: () => agent.assertRunning(),
      },
    );
    return { agent, ms: performance.now() - started };
  };

  process.stderr.write(`[bench] first agent, then ${flags.cycles} SIGKILL/restart cycles\n`);
  let { agent } = await connect(0);
  // A few requests on the first tunnel, so cycle 0 counts the pools and buffers a tunnel in use has.
  for (let i = 0; i < 20; i++) await get(env, client);
  samples.push(sample('cycle 0 (first tunnel up)', gateway.process.pid));
  const began = performance.now();
  for (let cycle = 1; cycle <= flags.cycles; cycle++) {
    agent.child.kill('SIGKILL');
    await agent.exited;
    const next = await connect(cycle);
    agent = next.agent;
    reconnectMs.push(next.ms);
    if (marks.has(cycle)) samples.push(sample(`cycle ${cycle}`, gateway.process.pid));
    if (cycle % 25 === 0) process.stderr.write(`[bench] ${cycle}/${flags.cycles} cycles\n`);
  }
  const churnSeconds = (performance.now() - began) / 1000;
  process.stderr.write(`[bench] settling ${flags.settle} s\n`);
  await new Promise((r) => setTimeout(r, flags.settle * 1000));
  samples.push(sample(`after ${flags.settle} s settle`, gateway.process.pid));
  const status = await get(env, client);
  const disconnects = await gatewayMetric(env, client, 'cluster_gateway_tunnel_disconnects_total');
  const connected = await gatewayMetric(env, client, 'cluster_gateway_tunnel_connected');
  const upstream = await gatewayMetric(env, client, 'cluster_gateway_upstream_connections');

  const sorted = Float64Array.from(reconnectMs).sort();
  const first = samples[0]!;
  console.log(
    `\nGateway after ${flags.cycles} agent SIGKILL/restart cycles (${churnSeconds.toFixed(0)} s of churn; one tunnel; hub-credential model)\n`,
  );
  console.log(
    `${'when'.padEnd(30)} ${'open fds'.padStart(9)} ${'sockets'.padStart(8)} ${'RSS MiB'.padStart(8)}`,
  );
  for (const s of samples) {
    console.log(
      `${s.label.padEnd(30)} ${String(s.fds).padStart(9)} ${String(s.sockets).padStart(8)} ${s.rssMiB.toFixed(1).padStart(8)}`,
    );
  }
  const last = samples.at(-1)!;
  console.log(
    `\nchange from cycle 0 to after settle: fds ${last.fds - first.fds >= 0 ? '+' : ''}${last.fds - first.fds}, ` +
      `RSS ${last.rssMiB - first.rssMiB >= 0 ? '+' : ''}${(last.rssMiB - first.rssMiB).toFixed(1)} MiB`,
  );
  console.log(
    `reconnect (agent process started -> first 200 through its tunnel), ${reconnectMs.length} cycles: ` +
      `p50 ${percentile(sorted, 50).toFixed(0)} ms, p99 ${percentile(sorted, 99).toFixed(0)} ms, max ${(sorted.at(-1) ?? 0).toFixed(0)} ms`,
  );
  console.log(
    `gateway metrics at the end: tunnels connected ${connected}, tunnel disconnects ${disconnects}, ` +
      `upstream connections ${upstream}; a request now: ${status}`,
  );
  if (flags.keep) {
    console.log(`\n--keep: the environment stays up until Ctrl-C (hub kubeconfig ${env.hub.kubeconfig})`);
  } else {
    client.destroy();
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

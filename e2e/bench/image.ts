/**
 * The image as users run it (npm run bench:image): its size, and each program's start time, idle RSS
 * and idle CPU in its container on a real node. An environment with nodes (hack/localenv/node.ts), the
 * chart installed with helm, the addon enabled on cluster1; then, after IDLE seconds (default 60):
 *
 * - start: from the container's start (the kubelet's startedAt) to the pod's Ready condition (its
 *   readiness probe passing), as the kubelet reports them, in seconds (they have 1 s resolution);
 * - RSS: VmRSS of the container's process, read from /proc on this machine (containers share its
 *   kernel); CPU: its CPU time over the idle window, as a share of one core;
 * - `--help` wall time in the image with podman, as the pods run it (user 65532, read-only root,
 *   no capabilities), median of 5: the cost of starting Node and loading the program.
 *
 * Then each program under load in its container (issue 33, "memory in the image"); loaded RSS is VmRSS
 * right after its load, peak is VmHWM (since the container started):
 *
 * - gateway: bench:compare's kinds of load (e2e/bench/compare.ts, the same seed data on cluster1), sent
 *   through the hub's kube-aggregator as kubectl sends them (the hub admin's kubeconfig):
 *   GET /api/v1/namespaces/default at concurrency 8, LIST of 500 ConfigMaps of about 1 KB at
 *   concurrency 8, a 10 MB LIST one at a time. Both replicas are shown (the aggregator spreads the
 *   load over them), with a memory profile of each: /proc/<pid>/smaps by mapping (the node binary's
 *   pages, anonymous memory) and V8's heap by space from its /metrics;
 * - agent: the same load again, tunnelled: cluster1's credential Secret switched to ClusterProxy, so
 *   every request goes gateway -> hub kube-apiserver -> the agent's tunnel -> cluster1 (the hub can
 *   still dial cluster1 here; the switch makes the gateway use the tunnel all the same);
 * - manager: idle only; its load is clusters and addons (bench:scale's kind), which this environment of
 *   one real cluster does not give cheaply: its peak is its start.
 *
 * LOAD=0 skips the load phases.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { binaryPath, repoRoot } from '../../hack/localenv/binaries.ts';
import { defaultNamespace, installChart } from '../../hack/localenv/chart.ts';
import { startEnvironment } from '../../hack/localenv/environment.ts';
import { credentialNamespace } from '../../hack/localenv/gateway.ts';
import { processes } from '../../hack/localenv/host-changes.ts';
import { waitFor } from '../../hack/localenv/wait.ts';
import { agentNodeFlags } from '../../manager/addon/deploy/agent-manifests.ts';
import { gatewayNodeFlags } from '../../manager/addon/gateway-deploy/workload.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import { loadKubeconfig } from '../../shared/kube/kubeconfig.ts';
import { cpuUsage, median, rssKb } from './measure.ts';

const idleSeconds = Number(process.env.IDLE ?? 60);
const withLoad = process.env.LOAD !== '0';
const proxyPrefix = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways/cluster1/proxy';
const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);
const managerEntry = '/app/manager/addon/main.ts';
const gatewayEntry = '/app/manager/gateway/main.ts';
const agentEntry = '/app/agent/main.ts';
const fmt = (value: number | undefined, digits = 1) =>
  value === undefined || Number.isNaN(value) ? '—' : value.toFixed(digits);

/** bench:compare's kinds of load (e2e/bench/compare.ts), each through the hub's kube-aggregator. */
const workloads = [
  { name: 'GET c8', path: '/api/v1/namespaces/default', total: 2000, concurrency: 8 },
  { name: 'LIST 500 c8', path: '/api/v1/namespaces/bench-list/configmaps', total: 300, concurrency: 8 },
  { name: '10 MB LIST c1', path: '/api/v1/namespaces/bench-big/configmaps', total: 12, concurrency: 1 },
];
const loadDescription = workloads.map((w) => `${w.name} ×${w.total}`).join(', ');
const stateDir = path.join(repoRoot, '.local', 'bench-image');

type Pod = {
  metadata: { name: string };
  spec: { containers: { command?: string[] }[] };
  status?: {
    conditions?: { type: string; status: string; lastTransitionTime?: string }[];
    containerStatuses?: { ready: boolean; state?: { running?: { startedAt?: string } } }[];
  };
};

const env = await startEnvironment({
  stateDir,
  managedClusters: ['cluster1'],
  gateway: false,
  clusterCredentials: true,
  nodes: true,
  log: (l) => console.error(l),
});
try {
  const images = env.images!;
  await installChart({ hub: env.hub, images });
  execFileSync(binaryPath('clusteradm'), [
    'addon',
    'enable',
    '--names',
    'cluster-gateway',
    '--clusters',
    'cluster1',
    `--kubeconfig=${env.hub.kubeconfig}`,
  ]);
  const hubPods = () => readyPods(env.hub.client, defaultNamespace);
  const agentPods = () => readyPods(env.managed[0]!.client, 'open-cluster-management-agent-addon');
  await waitFor(
    'manager, 2 gateways and the agent Ready',
    async () => (await hubPods()).length === 3 && (await agentPods()).length === 1,
    {
      timeoutMs: 180_000,
      intervalMs: 500,
    },
  );
  const processes = findContainerProcesses();
  const pidsOf = (entry: string) => processes.get(entry) ?? [];
  const allPids = [...processes.values()].flat();
  const before = new Map(allPids.map((pid) => [pid, cpuUsage(pid).cpuMs]));
  const startedIdle = Date.now();
  await new Promise((r) => setTimeout(r, idleSeconds * 1000));
  const elapsedMs = Date.now() - startedIdle;
  const idle = new Map(
    allPids.map((pid) => [
      pid,
      { rss: rssKb(pid) / 1024, cpu: ((cpuUsage(pid).cpuMs - (before.get(pid) ?? 0)) / elapsedMs) * 100 },
    ]),
  );
  const pods = [...(await hubPods()), ...(await agentPods())];
  const idleProfiles = pidsOf(agentEntry).map((pid) => `agent idle:\n${memoryProfile(pid)}`);

  /** Loaded RSS and peak per process, and what each load was. */
  const loaded = new Map<number, { rss: number; peak: number }>();
  const loads: string[] = [];
  const profiles: string[] = [...idleProfiles];
  if (withLoad) {
    const cluster1 = env.managed[0]!;
    log('seeding cluster1: 500 ConfigMaps of about 1 KB, 10 of 1 MB (as bench:compare)');
    await seed(cluster1.client);
    const hub = loadKubeconfig(env.hub.kubeconfig);
    const gatewayPids = pidsOf(gatewayEntry);
    const gatewayMetrics = await gatewayMetricsReader(env.hub.client, env.stateDir);
    log('gateway: the bench:compare load through the hub kube-aggregator, direct to cluster1');
    loads.push(`gateway: ${await compareLoad(hub)}`);
    for (const pid of gatewayPids)
      loaded.set(pid, { rss: rssKb(pid) / 1024, peak: rssKb(pid, 'VmHWM') / 1024 });
    for (const [i, pid] of gatewayPids.entries()) {
      profiles.push(
        `gateway replica ${i + 1} after its load:\n${memoryProfile(pid, await gatewayMetrics(pid))}`,
      );
    }

    log("agent: cluster1's credential Secret switched to ClusterProxy; the same load through its tunnel");
    await env.hub.client.mergePatch(`/api/v1/namespaces/${credentialNamespace}/secrets/cluster1`, {
      metadata: { labels: { 'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy' } },
    });
    await waitFor(
      'the ClusterGateway cluster1 on ClusterProxy and answering through the tunnel',
      async () => {
        const gw = await env.hub.client.getOptional<{ spec?: { access?: { endpoint?: { type?: string } } } }>(
          '/apis/cluster.core.oam.dev/v1alpha1/clustergateways/cluster1',
        );
        if (gw?.spec?.access?.endpoint?.type !== 'ClusterProxy') return false;
        return (
          (await request(https.globalAgent, hub, `${proxyPrefix}/api/v1/namespaces/default`)).status === 200
        );
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    const agentPids = pidsOf(agentEntry);
    const tunnelled = new Map(agentPids.map((pid) => [pid, cpuUsage(pid).cpuMs]));
    const summary = await compareLoad(hub);
    for (const pid of agentPids)
      loaded.set(pid, { rss: rssKb(pid) / 1024, peak: rssKb(pid, 'VmHWM') / 1024 });
    const agentCpu = agentPids.map(
      (pid) => `${((cpuUsage(pid).cpuMs - (tunnelled.get(pid) ?? 0)) / 1000).toFixed(1)} s`,
    );
    loads.push(`agent (tunnelled): ${summary}; agent CPU ${agentCpu.join(', ')}`);
    for (const pid of agentPids) profiles.push(`agent after its load:\n${memoryProfile(pid)}`);
  }

  const size = execFileSync('podman', ['image', 'inspect', images.image, '--format', '{{.Size}}'])
    .toString()
    .trim();
  console.log(`\nimage ${images.image}: ${(Number(size) / 1e6).toFixed(0)} MB (podman image inspect)`);
  console.log(
    '\n| program | start to Ready (s) | --help in the image (s) | idle RSS (MiB) | loaded RSS (MiB) | peak RSS (MiB) | idle CPU (% of a core) |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- |');
  for (const [program, entry, flags] of [
    ['manager', managerEntry, []],
    ['gateway', gatewayEntry, gatewayNodeFlags],
    ['agent', agentEntry, agentNodeFlags],
  ] as const) {
    const help = median(
      Array.from({ length: 5 }, () => {
        const t = process.hrtime.bigint();
        execFileSync(
          'podman',
          [
            'run',
            '--rm',
            '--runtime',
            'runc',
            '--ulimit',
            'nofile=20000:20000',
            '--ulimit',
            'nproc=4096:4096',
            '--user',
            '65532:65532',
            '--read-only',
            '--cap-drop',
            'ALL',
            '--network',
            'none',
            images.image,
            ...flags,
            entry,
            '--help',
          ],
          { stdio: 'ignore' },
        );
        return Number(process.hrtime.bigint() - t) / 1e9;
      }),
    );
    const pids = pidsOf(entry);
    for (const [i, pid] of (pids.length > 0 ? pids : [undefined]).entries()) {
      // Each replica's own pod: matched by the container's start time is not possible from /proc, so
      // start to Ready is the program's first pod (the replicas start together).
      const pod = pods.filter((p) => p.spec.containers[0]?.command?.includes(entry))[0];
      const started = pod?.status?.containerStatuses?.[0]?.state?.running?.startedAt;
      const ready = pod?.status?.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime;
      const startToReady = started && ready ? (Date.parse(ready) - Date.parse(started)) / 1000 : Number.NaN;
      const at = pid === undefined ? undefined : idle.get(pid);
      const load = pid === undefined ? undefined : loaded.get(pid);
      const peak = load?.peak ?? (pid === undefined ? Number.NaN : rssKb(pid, 'VmHWM') / 1024);
      const name = pids.length > 1 ? `${program} ${i + 1}` : program;
      console.log(
        `| ${name} | ${startToReady.toFixed(0)} | ${help.toFixed(2)} | ${fmt(at?.rss)} | ${load ? fmt(load.rss) : '—'} | ${fmt(peak)} | ${fmt(at?.cpu, 2)} |`,
      );
    }
  }
  console.log(
    `\n(idle ${idleSeconds} s; RSS is VmRSS, peak VmHWM, in MiB; --help includes podman starting the container; command: npm run bench:image)`,
  );
  if (loads.length > 0)
    console.log(`\nLoads (each: ${loadDescription}):\n${loads.map((l) => `- ${l}`).join('\n')}`);
  if (profiles.length > 0) console.log(`\nMemory profiles (MiB):\n\n${profiles.join('\n\n')}`);
  console.log(`\nNode's own floor in the image (VmRSS after 1 s, MiB): ${nodeFloor(images.image)}`);
} finally {
  await env.stop();
}

async function readyPods(client: KubeClient, namespace: string): Promise<Pod[]> {
  const list = await client.get<{ items: Pod[] }>(`/api/v1/namespaces/${namespace}/pods`);
  return list.items.filter((p) => p.status?.containerStatuses?.every((s) => s.ready));
}

/** Every process of each program running on this machine (containers share its process table), by entry file. */
function findContainerProcesses(): Map<string, number[]> {
  const found = new Map<string, number[]>();
  for (const { pid, args } of processes()) {
    const main = args.find((a) => a.startsWith('/app/') && a.endsWith('main.ts'));
    if (args[0] === 'node' && main) found.set(main, [...(found.get(main) ?? []), pid]);
  }
  return found;
}

// ---------------------------------------------------------------------------
// The load: bench:compare's seed data and kinds of request, through the hub's kube-aggregator.

/** bench:compare's seed (e2e/bench/compare.ts): 500 ConfigMaps of about 1 KB, 10 of 1 MB. */
async function seed(spoke: KubeClient): Promise<void> {
  for (const name of ['bench-list', 'bench-big']) {
    await spoke
      .create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } })
      .catch(() => undefined);
  }
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
  const big = 'b'.repeat(1_000_000);
  for (let i = 0; i < 10; i++) {
    await spoke.create('/api/v1/namespaces/bench-big/configmaps', {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: `big-${i}` },
      data: { value: big },
    });
  }
}

type HubConnection = ReturnType<typeof loadKubeconfig>;

/** One GET as kubectl sends it to the hub (its admin credential); resolves at the body's last byte. */
function request(
  agent: https.Agent,
  hub: HubConnection,
  pathname: string,
): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      `${hub.server}${pathname}`,
      { ...hub.options, agent, headers: { ...hub.options.headers, accept: 'application/json' } },
      (res) => {
        let bytes = 0;
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** bench:compare's GET, LIST and 10 MB workloads to cluster1 through the aggregator; what they took. */
async function compareLoad(hub: HubConnection): Promise<string> {
  const done: string[] = [];
  for (const w of workloads) {
    const agent = new https.Agent({ keepAlive: true, maxSockets: w.concurrency });
    const started = performance.now();
    let issued = 0;
    let bytes = 0;
    const worker = async () => {
      while (issued < w.total) {
        issued++;
        const r = await request(agent, hub, `${proxyPrefix}${w.path}`);
        if (r.status !== 200) throw new Error(`GET ${w.path} through the aggregator: ${r.status}`);
        bytes += r.bytes;
      }
    };
    await Promise.all(Array.from({ length: w.concurrency }, worker));
    agent.destroy();
    const seconds = (performance.now() - started) / 1000;
    done.push(
      `${w.name} ${(w.total / seconds).toFixed(0)}/s (${(bytes / w.total / 1e3).toFixed(0)} KB each)`,
    );
  }
  return done.join(', ');
}

// ---------------------------------------------------------------------------
// Where a process's RSS goes.

/**
 * A gateway pod's /metrics by the pid of its process: the pod is the one named by the container's
 * HOSTNAME, read straight at its IP as the aggregator calls it (front-proxy certificate, the serving
 * certificate checked against the CA the manager made), as e2e/chart-install.test.ts does.
 */
async function gatewayMetricsReader(
  hub: KubeClient,
  stateDir: string,
): Promise<(pid: number) => Promise<string | undefined>> {
  const secret = await hub.get<{ data: Record<string, string> }>(
    `/api/v1/namespaces/${defaultNamespace}/secrets/cluster-gateway-tls`,
  );
  const ca = Buffer.from(secret.data['ca.crt'] ?? '', 'base64').toString();
  const cert = readFileSync(path.join(stateDir, 'hub', 'front-proxy-client.crt'));
  const key = readFileSync(path.join(stateDir, 'hub', 'front-proxy-client.key'));
  const pods = await hub.get<{ items: { metadata: { name: string }; status?: { podIP?: string } }[] }>(
    `/api/v1/namespaces/${defaultNamespace}/pods`,
  );
  return async (pid) => {
    const hostname = /(?:^|\0)HOSTNAME=([^\0]*)/.exec(readFileSync(`/proc/${pid}/environ`, 'latin1'))?.[1];
    const ip = pods.items.find((p) => p.metadata.name === hostname)?.status?.podIP;
    if (!ip) return undefined;
    return new Promise((resolve) => {
      const req = https.get(
        `https://${ip}:9443/metrics`,
        {
          ca,
          cert,
          key,
          servername: `cluster-gateway.${defaultNamespace}.svc`,
          headers: { 'x-remote-user': 'bench-image', 'x-remote-group': 'system:masters' },
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => {
            body += c;
          });
          res.on('end', () => resolve(res.statusCode === 200 ? body : undefined));
        },
      );
      req.on('error', () => resolve(undefined));
    });
  };
}

/**
 * RSS by mapping from /proc/<pid>/smaps (the node binary's pages: code and read-only data Node and V8
 * touched; anonymous memory: V8's heap, malloc, thread stacks; the shared libraries), and with the
 * gateway's /metrics what V8 holds of the anonymous part: its heap by space, and the external memory it
 * counts (Buffers, TLS objects).
 */
function memoryProfile(pid: number, metrics?: string): string {
  const byMapping = new Map<string, number>();
  let name = '';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const header = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (header) {
      const mapping = header[1] ?? '';
      name =
        mapping === '' || mapping === '[heap]' || mapping.startsWith('[anon')
          ? 'anonymous (V8 heap, malloc, stacks)'
          : mapping.endsWith('/node')
            ? 'node binary (code, data)'
            : mapping.startsWith('[')
              ? mapping
              : `file ${path.basename(mapping)}`;
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) byMapping.set(name, (byMapping.get(name) ?? 0) + Number(rss[1]) / 1024);
  }
  const lines = [...byMapping]
    .filter(([, mib]) => mib >= 0.5)
    .sort((a, b) => b[1] - a[1])
    .map(([what, mib]) => `  ${what}: ${mib.toFixed(1)}`);
  lines.unshift(
    `  VmRSS ${(rssKb(pid) / 1024).toFixed(1)}, VmHWM ${(rssKb(pid, 'VmHWM') / 1024).toFixed(1)}; by mapping:`,
  );
  if (metrics) {
    const series = (prefix: string) =>
      metrics
        .split('\n')
        .filter((l) => l.startsWith(prefix))
        .map((l) => {
          const space = /space="([^"]+)"/.exec(l)?.[1] ?? '';
          return { space, mib: Number(l.slice(l.lastIndexOf(' ') + 1)) / 1024 / 1024 };
        });
    const one = (prefix: string) => series(`${prefix} `)[0]?.mib;
    const used = new Map(series('nodejs_heap_space_size_used_bytes{').map((s) => [s.space, s.mib]));
    const spaces = series('nodejs_heap_space_size_total_bytes{')
      .filter((s) => s.mib >= 0.1)
      .sort((a, b) => b.mib - a.mib)
      .map((s) => `${s.space} ${s.mib.toFixed(1)} (used ${fmt(used.get(s.space))})`);
    lines.push(
      `  V8 heap committed ${fmt(one('nodejs_heap_size_total_bytes'))}, used ${fmt(one('nodejs_heap_size_used_bytes'))}; by space: ${spaces.join(', ')}`,
      `  V8 external memory (Buffers, native objects V8 knows of) ${fmt(one('nodejs_external_memory_bytes'))}`,
    );
  }
  return lines.join('\n');
}

/** A bare Node in the image, then one that has loaded what every program loads (TLS, HTTP/1.1, HTTP/2). */
function nodeFloor(image: string): string {
  const rssAfter = (code: string) =>
    execFileSync('podman', [
      'run',
      '--rm',
      '--runtime',
      'runc',
      '--ulimit',
      'nofile=20000:20000',
      '--ulimit',
      'nproc=4096:4096',
      '--user',
      '65532:65532',
      '--read-only',
      '--network',
      'none',
      image,
      '-e',
      `${code}; setTimeout(() => console.log(/VmRSS:\\s+(\\d+)/.exec(require('fs').readFileSync('/proc/self/status', 'utf8'))[1]), 1000)`,
    ])
      .toString()
      .trim();
  const mib = (kb: string) => (Number(kb) / 1024).toFixed(1);
  return `bare \`node -e\` ${mib(rssAfter('0'))}; with node:https and node:http2 loaded ${mib(rssAfter("require('node:https'); require('node:http2')"))}`;
}

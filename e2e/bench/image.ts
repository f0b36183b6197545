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
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { binaryPath, repoRoot } from '../../hack/localenv/binaries.ts';
import { defaultNamespace, installChart } from '../../hack/localenv/chart.ts';
import { startEnvironment } from '../../hack/localenv/environment.ts';
import { processes } from '../../hack/localenv/host-changes.ts';
import { waitFor } from '../../hack/localenv/wait.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import { cpuUsage, median, rssKb } from './measure.ts';

const idleSeconds = Number(process.env.IDLE ?? 60);
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
  const before = new Map([...processes].map(([name, pid]) => [name, cpuUsage(pid).cpuMs]));
  const startedIdle = Date.now();
  await new Promise((r) => setTimeout(r, idleSeconds * 1000));
  const elapsedMs = Date.now() - startedIdle;
  const pods = [...(await hubPods()), ...(await agentPods())];

  const size = execFileSync('podman', ['image', 'inspect', images.image, '--format', '{{.Size}}'])
    .toString()
    .trim();
  console.log(`\nimage ${images.image}: ${(Number(size) / 1e6).toFixed(0)} MB (podman image inspect)`);
  console.log(
    `\n| program | start to Ready (s) | --help in the image (s) | idle RSS (MiB) | idle CPU (% of a core) |`,
  );
  console.log('| --- | --- | --- | --- | --- |');
  for (const [program, entry, flags] of [
    ['manager', '/app/manager/addon/main.ts', []],
    ['gateway', '/app/manager/gateway/main.ts', ['--max-semi-space-size=2', '--expose-gc']],
    ['agent', '/app/agent/main.ts', []],
  ] as const) {
    const pod = pods.find((p) => p.spec.containers[0]?.command?.includes(entry));
    const started = pod?.status?.containerStatuses?.[0]?.state?.running?.startedAt;
    const ready = pod?.status?.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime;
    const startToReady = started && ready ? (Date.parse(ready) - Date.parse(started)) / 1000 : Number.NaN;
    const pid = processes.get(entry);
    const rss = pid ? rssKb(pid) / 1024 : Number.NaN;
    const cpu = pid ? ((cpuUsage(pid).cpuMs - (before.get(entry) ?? 0)) / elapsedMs) * 100 : Number.NaN;
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
    console.log(
      `| ${program} | ${startToReady.toFixed(0)} | ${help.toFixed(2)} | ${rss.toFixed(1)} | ${cpu.toFixed(2)} |`,
    );
  }
  console.log(
    `\n(idle ${idleSeconds} s; one gateway replica of two shown; --help includes podman starting the container; command: npm run bench:image)`,
  );
} finally {
  await env.stop();
}

async function readyPods(client: KubeClient, namespace: string): Promise<Pod[]> {
  const list = await client.get<{ items: Pod[] }>(`/api/v1/namespaces/${namespace}/pods`);
  return list.items.filter((p) => p.status?.containerStatuses?.every((s) => s.ready));
}

/** The first process of each program found running on this machine (containers share its process table). */
function findContainerProcesses(): Map<string, number> {
  const found = new Map<string, number>();
  for (const { pid, args } of processes()) {
    const main = args.find((a) => a.startsWith('/app/') && a.endsWith('main.ts'));
    if (args[0] === 'node' && main && !found.has(main)) found.set(main, pid);
  }
  return found;
}

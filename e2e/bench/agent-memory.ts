/**
 * The agent's idle footprint (npm run bench:agent): a real environment, the
 * agent renewing both Leases against the real hub and cluster1 every 5 s,
 * then VmRSS, VmHWM and CPU time from /proc after IDLE seconds (default 60).
 *
 * Two ways of starting the same agent/main.ts:
 * - `ts`: plain `node agent/main.ts`: Node strips the types at load time
 *   with its bundled WebAssembly stripper, which stays in memory;
 * - `ts+compile-cache`: the same with NODE_COMPILE_CACHE pointing at a
 *   warm cache (filled by `node agent/main.ts --help`): Node then loads the
 *   stripped code from the cache and never instantiates the stripper.
 * Admin credentials on both sides (the footprint does not depend on who
 * the agent is); the real-path e2e is e2e/addon-agent.test.ts.
 */
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../../hack/localenv/binaries.ts';
import { startEnvironment } from '../../hack/localenv/environment.ts';
import { freePort } from '../../hack/localenv/ports.ts';
import { KubeClient } from '../../shared/kube/client.ts';

const idleSeconds = Number(process.env.IDLE ?? 60);
const stateDir = path.join(repoRoot, '.local', 'bench-agent');
const compileCache = path.join(stateDir, 'node-compile-cache');
const main = path.join(repoRoot, 'agent', 'main.ts');

const env = await startEnvironment({ stateDir, gateway: false, log: (l) => console.error(l) });
try {
  const hub = await KubeClient.fromKubeconfig(env.hub.kubeconfig);
  const cluster = env.managed[0];
  if (!cluster) throw new Error('no managed cluster');
  await hub.create(`/apis/coordination.k8s.io/v1/namespaces/${cluster.name}/leases`, {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: 'cluster-gateway', namespace: cluster.name },
    spec: {},
  });
  rmSync(compileCache, { recursive: true, force: true });
  execFileSync(process.execPath, [main, '--help'], {
    env: { ...process.env, NODE_COMPILE_CACHE: compileCache },
  });

  const variants = [
    { name: 'ts', env: {} },
    { name: 'ts+compile-cache', env: { NODE_COMPILE_CACHE: compileCache } },
  ];
  const agents = await Promise.all(
    variants.map(async (v, i) => {
      const port = await freePort();
      const child = spawn(
        process.execPath,
        [
          main,
          `--cluster-name=${cluster.name}`,
          `--hub-kubeconfig=${env.hub.kubeconfig}`,
          `--kubeconfig=${cluster.kubeconfig}`,
          // Each its own spoke Lease; both renew the one hub heartbeat.
          `--install-namespace=${['default', 'kube-public'][i]}`,
          `--port=${port}`,
          // One listener for probes and /metrics (read below), on loopback: several agents share this host.
          '--bind-address=127.0.0.1',
          '--metrics-bind-address=127.0.0.1',
          '--log-level=warn',
        ],
        { env: { ...process.env, ...v.env }, stdio: ['ignore', 'inherit', 'inherit'] },
      );
      return { ...v, child, port };
    }),
  );
  await new Promise((r) => setTimeout(r, idleSeconds * 1000));
  console.log(`agent idle for ${idleSeconds} s, renewing every 5 s (Node ${process.version})`);
  console.log('variant             VmRSS      VmHWM      CPU (user+sys)  hub renewals  healthy');
  for (const a of agents) {
    const status = readFileSync(`/proc/${a.child.pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1]) / 1024;
    const stat = readFileSync(`/proc/${a.child.pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    const cpu = (Number(stat[11]) + Number(stat[12])) / 100; // utime + stime, clock ticks
    const metrics = await (await fetch(`http://127.0.0.1:${a.port}/metrics`)).text();
    const value = (name: string) =>
      metrics
        .split('\n')
        .find((l) => l.startsWith(name))
        ?.split(' ')[1];
    console.log(
      `${a.name.padEnd(18)}  ${kb('VmRSS').toFixed(1).padStart(5)} MB  ${kb('VmHWM').toFixed(1).padStart(5)} MB  ${cpu.toFixed(2).padStart(6)} s        ${String(value('cluster_gateway_agent_lease_renewals_total{lease="hub"}')).padStart(4)}          ${value('cluster_gateway_agent_healthy')}`,
    );
    a.child.kill('SIGTERM');
  }
  hub.close();
} finally {
  await env.stop();
}

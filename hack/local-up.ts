/**
 * `npm start`: brings up the local environment in the foreground and keeps it
 * running until Ctrl-C, which stops every process it started.
 *
 * Every cluster has a real node (kubelet, containerd, runc; hack/localenv/node.ts) and the project's
 * image built from the Dockerfile (hack/image/build.sh). The addon is installed the way README.md tells
 * a user to: `helm install` of charts/cluster-gateway (hack/localenv/chart.ts), `clusteradm addon
 * enable` on every managed cluster; the manager, the gateway it deploys and the agents run as pods
 * from their Deployments.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { apiServiceName, apiServicePath } from '../manager/addon/gateway-deploy/names.ts';
import { binaryPath, repoRoot } from './localenv/binaries.ts';
import { defaultNamespace, defaultRelease, installChart } from './localenv/chart.ts';
import { startEnvironment } from './localenv/environment.ts';
import { waitFor } from './localenv/wait.ts';

// CLUSTER_GATEWAY_ENV_DIR: another state folder (e2e/npm-start/real-nodes.test.ts runs `npm start` in one of its own).
const stateDir = process.env.CLUSTER_GATEWAY_ENV_DIR
  ? path.resolve(process.env.CLUSTER_GATEWAY_ENV_DIR)
  : path.join(repoRoot, '.local', 'env');
const rel = (file: string) => path.relative(process.cwd(), file) || '.';
const log = (line: string) => console.log(line);
const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)}s`;

log(`cluster-gateway local environment: state in ${rel(stateDir)}`);
// No hand-run gateway or addon manager: the chart's manager deploys the gateway. The gateway's credential
// Secrets for the managed clusters (what OCM's managed-serviceaccount addon provides on a real hub) are
// still the environment's.
const env = await startEnvironment({
  stateDir,
  log,
  gateway: false,
  clusterCredentials: true,
  nodes: true,
}).catch((err: Error) => {
  console.error(`\nstart failed: ${err.message}`);
  console.error(`logs: ${rel(path.join(stateDir, 'logs'))}/`);
  process.exit(1);
});

const run = promisify(execFile);
const clusters = env.managed.map((c) => c.name);
const hubFlag = `--kubeconfig=${env.hub.kubeconfig}`;
const addonName = 'cluster-gateway';
const addonApi = '/apis/addon.open-cluster-management.io/v1alpha1';
type Conditioned = {
  status?: { conditions?: { type: string; status: string; reason?: string; message?: string }[] };
};

async function tool(name: 'kubectl' | 'clusteradm', ...args: string[]): Promise<string> {
  try {
    const { stdout } = await run(binaryPath(name), [...args, hubFlag], { timeout: 60_000 });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`${name} ${args.join(' ')} failed: ${e.stderr?.trim() || e.message}`);
  }
}

let stage = 'helm install';
let tables = '';
try {
  log(
    `[${elapsed()}] helm install ${defaultRelease} charts/cluster-gateway --namespace ${defaultNamespace} --create-namespace (local values: hack/localenv/chart.ts)`,
  );
  if (!env.images) throw new Error('the environment has no nodes to run the chart');
  await installChart({ hub: env.hub, images: env.images });
  stage = 'clusteradm addon enable';
  log(`[${elapsed()}] clusteradm addon enable --names ${addonName} --clusters ${clusters.join(',')}`);
  await tool('clusteradm', 'addon', 'enable', '--names', addonName, '--clusters', clusters.join(','));
  stage = 'waiting for the addon and the gateway';
  // What is not ready yet, and why (the Available condition's reason and message): the error says it.
  let pending: string[] = [];
  await waitFor(
    `the ${addonName} addon Available on ${clusters.join(', ')} and the APIService ${apiServiceName} Available`,
    async () => {
      const objects: [string, string][] = [
        ...clusters.map((c): [string, string] => [
          `ManagedClusterAddOn ${c}/${addonName}`,
          `${addonApi}/namespaces/${c}/managedclusteraddons/${addonName}`,
        ]),
        [`APIService ${apiServiceName}`, apiServicePath],
      ];
      const waiting: string[] = [];
      for (const [what, objectPath] of objects) {
        const obj = await env.hub.client.getOptional<Conditioned>(objectPath);
        const available = obj?.status?.conditions?.find((c) => c.type === 'Available');
        if (available?.status === 'True') continue;
        waiting.push(
          `${what}: ${!obj ? 'not there yet' : available ? `Available ${available.status} (${available.reason}: ${available.message})` : 'no Available condition yet'}`,
        );
      }
      pending = waiting;
      return waiting.length === 0;
    },
    { timeoutMs: 180_000, intervalMs: 500, failFast: () => env.supervisor.assertAllRunning() },
  ).catch((err: Error) => {
    throw new Error(`${err.message}\n  ${pending.join('\n  ')}`);
  });
  // The aggregator has just marked the APIService Available: the first list may still race discovery.
  const gateways = await waitFor(
    `kubectl get clustergateways to list ${clusters.join(', ')}`,
    async () => {
      const out = await tool('kubectl', 'get', 'clustergateways');
      return clusters.every((c) => new RegExp(`^${c}\\s`, 'm').test(out)) ? out : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 500 },
  );
  const addons = await tool('kubectl', 'get', 'managedclusteraddons', '-A');
  tables = `$ kubectl get managedclusteraddons -A\n${addons.trimEnd()}\n$ kubectl get clustergateways\n${gateways.trimEnd()}`;
} catch (err) {
  console.error(`\n${stage} failed: ${(err as Error).message}`);
  console.error(
    `logs: kubectl logs for the addon manager, the gateway and the agents (pods); the control planes and nodes in ${rel(env.supervisor.logDir)}/`,
  );
  await env.stop();
  process.exit(1);
}

const installed = { release: defaultRelease, namespace: defaultNamespace };
log(`\n[${elapsed()}] ready: the ${addonName} addon is Available on ${clusters.join(', ')}\n`);
log(tables);
log('\nKubeconfigs:');
log(`  hub       ${rel(env.hub.kubeconfig)}`);
for (const cluster of env.managed) log(`  ${cluster.name.padEnd(9)} ${rel(cluster.kubeconfig)}`);
log('\nTry:');
log(`  export KUBECONFIG=${rel(env.hub.kubeconfig)}`);
log('  kubectl get managedclusters');
log('  kubectl get clustergateways');
log(
  '  kubectl get --raw /apis/cluster.core.oam.dev/v1alpha1/clustergateways/cluster1/proxy/api/v1/namespaces',
);
log(`  helm status ${installed.release} -n ${installed.namespace}`);
log(
  `\nThe gateway (Deployment ${installed.namespace}/cluster-gateway, made by the addon manager) serves behind the hub's kube-aggregator; its pods: kubectl get pods -n ${installed.namespace}.`,
);
log(
  `kubectl and helm are in ${rel(path.join(repoRoot, '.cache', 'bin'))}/ (kubectl matches the apiserver version), clusteradm in ${rel(path.dirname(binaryPath('clusteradm')))}/.`,
);
log(
  `Logs: kubectl logs (the addon manager, the gateway and the agents are pods); the control planes and nodes in ${rel(env.supervisor.logDir)}/. Press Ctrl-C to stop everything.`,
);

// Fail loudly if a component dies while we wait. The pods are the kubelets' to restart.
setInterval(() => {
  try {
    env.supervisor.assertAllRunning();
  } catch (err) {
    console.error(`\n${(err as Error).message}`);
    void env.stop().then(() => process.exit(1));
  }
}, 2000);

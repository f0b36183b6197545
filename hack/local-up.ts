/**
 * `npm start`: brings up the local environment in the foreground and keeps it
 * running until Ctrl-C, which stops every process it started.
 *
 * Every cluster has a real node (kubelet, containerd, runc; hack/localenv/node.ts) and the project's
 * image built from the Dockerfile (hack/image/build.sh). The addon is installed by running docs/install.md's
 * own shell blocks (hack/localenv/install-steps.ts), with nothing of the environment's own: no credential
 * Secret is written for the gateway. cluster1 gets step (a), a credential Secret an admin writes; cluster2
 * step (b), the addon whose agent provides the hub's credential; cluster3 step (c), the addon with no
 * credential on the hub, and the hub cannot dial cluster3 at all (its apiserver's port is closed to the
 * hub node's pods: hack/localenv/blocked-routes.ts), as a cluster behind NAT. The manager, the gateway it
 * deploys and the agents run as pods from their Deployments.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { apiServiceName, apiServicePath } from '../manager/addon/gateway-deploy/names.ts';
import { binaryPath, repoRoot } from './localenv/binaries.ts';
import { blockRoute, nodePodRange } from './localenv/blocked-routes.ts';
import { chartDir, defaultNamespace, defaultRelease, nodeChartValuesFile } from './localenv/chart.ts';
import { startEnvironment } from './localenv/environment.ts';
import { type InstallStepEnv, loadInstallSteps, runInstallStep } from './localenv/install-steps.ts';
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
/**
 * How each managed cluster is reached: the steps of docs/install.md it gets. cluster1's Secret is its
 * admin's; its agent (for health) writes none.
 */
const ways = {
  cluster1: ['secret-cluster', 'secret-cluster-addon'],
  cluster2: ['ocm-cluster'],
  cluster3: ['tunnel-cluster'],
} as const;
type ClusterName = keyof typeof ways;
/** The cluster the hub cannot dial. */
const natCluster: ClusterName = 'cluster3';
// Read first: a document whose steps cannot be extracted fails before anything starts.
const steps = loadInstallSteps();
// No hand-run gateway or addon manager and no credential Secret: the chart's manager deploys the gateway,
// and docs/install.md's steps (below) give it its way into each cluster.
const env = await startEnvironment({
  stateDir,
  log,
  managedClusters: Object.keys(ways),
  gateway: false,
  clusterCredentials: false,
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

let stage = 'closing the route from the hub to cluster3';
let tables = '';
try {
  const nat = env.managed.find((c) => c.name === natCluster);
  if (!nat || !env.images) throw new Error(`the environment has no ${natCluster} or no nodes`);
  // The gateway pods run on the hub's node: from there, cluster3's apiserver refuses every connection (its
  // agent, on cluster3's node, still reaches it and the hub). Removed with the pods' bridge at stop.
  blockRoute(nodePodRange(0), Number(new URL(nat.reachableServer).port));
  log(
    `[${elapsed()}] the hub's pods cannot dial ${natCluster} (${nat.reachableServer}): it is reached through its agent only`,
  );

  // What a user has at hand: the hub's kubeconfig, the chart, a values file (here: the image built here),
  // and each cluster's admin kubeconfig with the address the hub's pods reach it at.
  const installDir = path.join(stateDir, 'install');
  mkdirSync(installDir, { recursive: true });
  const values = path.join(installDir, 'values.yaml');
  writeFileSync(values, nodeChartValuesFile(env.images));
  const hubVars: InstallStepEnv = { KUBECONFIG: env.hub.kubeconfig, CHART: rel(chartDir), VALUES: values };
  const clusterVars = (c: (typeof env.managed)[number]): InstallStepEnv => {
    const file = path.join(installDir, `${c.name}.kubeconfig`);
    const admin = readFileSync(c.kubeconfig, 'utf8');
    writeFileSync(file, admin.replace(`server: ${c.server}`, `server: ${c.reachableServer}`), {
      mode: 0o600,
    });
    return { ...hubVars, CLUSTER: c.name, CLUSTER_KUBECONFIG: file };
  };
  const step = async (name: string, vars: InstallStepEnv) => {
    const found = steps.get(name);
    if (!found) throw new Error(`docs/install.md has no install-step ${name}`);
    stage = `install step ${name}${vars.CLUSTER ? ` (${vars.CLUSTER})` : ''}`;
    log(`[${elapsed()}] docs/install.md step ${name}${vars.CLUSTER ? ` for ${vars.CLUSTER}` : ''}`);
    return runInstallStep(found, vars);
  };
  await step('helm-install', hubVars);
  await Promise.all([
    ...env.managed.map(async (c) => {
      for (const name of ways[c.name as ClusterName]) await step(name, clusterVars(c));
    }),
    step('hub-access', hubVars),
  ]);
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
  // Every cluster served and healthy: an addon's Available does not wait for its agent's tunnel (the agents
  // attach once the APIService exists, after a backoff), and the first list may still race discovery.
  const gateways = await waitFor(
    `kubectl get clustergateways to list ${clusters.join(', ')}, each HEALTHY true`,
    async () => {
      const out = await tool('kubectl', 'get', 'clustergateways');
      return clusters.every((c) => new RegExp(`^${c}\\s.*\\strue\\s`, 'm').test(out)) ? out : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
  // docs/install.md's check, for every cluster: a ClusterGateway whose proxy answers.
  await Promise.all(env.managed.map((c) => step('check', clusterVars(c))));
  const addons = await tool('kubectl', 'get', 'managedclusteraddons', '-A');
  const wide = await tool('kubectl', 'get', 'clustergateways', '-o', 'wide');
  tables = [
    `$ kubectl get managedclusteraddons -A\n${addons.trimEnd()}`,
    `$ kubectl get clustergateways\n${gateways.trimEnd()}`,
    `$ kubectl get clustergateways -o wide\n${wide.trimEnd()}`,
  ].join('\n');
} catch (err) {
  console.error(`\n${stage} failed: ${(err as Error).message}`);
  console.error(
    `logs: kubectl logs for the addon manager, the gateway and the agents (pods); the control planes and nodes in ${rel(env.supervisor.logDir)}/`,
  );
  await env.stop();
  process.exit(1);
}

const installed = { release: defaultRelease, namespace: defaultNamespace };
log(
  `\n[${elapsed()}] ready: installed by docs/install.md's steps; ${clusters.map((c) => `${c} ${ways[c as ClusterName].join(' + ')}`).join(', ')}; the ${addonName} addon Available on ${clusters.join(', ')}\n`,
);
log(tables);
log('\nKubeconfigs:');
log(`  hub       ${rel(env.hub.kubeconfig)}`);
for (const cluster of env.managed) log(`  ${cluster.name.padEnd(9)} ${rel(cluster.kubeconfig)}`);
log('\nTry:');
log(`  export KUBECONFIG=${rel(env.hub.kubeconfig)}`);
log('  kubectl get managedclusters');
log('  kubectl get clustergateways');
log('  kubectl get clustergateways -o wide');
log(
  `  kubectl get --raw /apis/cluster.core.oam.dev/v1alpha1/clustergateways/${natCluster}/proxy/api/v1/namespaces`,
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

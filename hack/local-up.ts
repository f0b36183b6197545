/**
 * `npm start`: brings up the local environment in the foreground and keeps it
 * running until Ctrl-C, which stops every process it started.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { binaryPath, repoRoot } from './localenv/binaries.ts';
import { startEnvironment } from './localenv/environment.ts';
import { waitFor } from './localenv/wait.ts';

const stateDir = path.join(repoRoot, '.local', 'env');
const log = (line: string) => console.log(line);

log(`cluster-gateway local environment: state in ${path.relative(process.cwd(), stateDir) || '.'}`);
const env = await startEnvironment({ stateDir, log, addon: true }).catch((err: Error) => {
  console.error(`\nstart failed: ${err.message}`);
  process.exit(1);
});

// The addon, enabled the way a user does it; its manager runs from its Deployment on the hub and
// the agents from the ManifestWork OCM's work agent applies (hack/localenv/addon.ts).
const run = promisify(execFile);
const clusters = env.managed.map((c) => c.name);
const hubFlag = `--kubeconfig=${env.hub.kubeconfig}`;
const addonName = 'cluster-gateway';
try {
  log(
    `enabling the ${addonName} addon: clusteradm addon enable --names ${addonName} --clusters ${clusters.join(',')}`,
  );
  await run(binaryPath('clusteradm'), [
    'addon',
    'enable',
    '--names',
    addonName,
    '--clusters',
    clusters.join(','),
    hubFlag,
  ]);
  await waitFor(
    `the ${addonName} addon to be available on ${clusters.join(', ')}`,
    async () => {
      for (const cluster of clusters) {
        const mca = await env.hub.client.getOptional<{
          status?: { conditions?: { type: string; status: string }[] };
        }>(
          `/apis/addon.open-cluster-management.io/v1alpha1/namespaces/${cluster}/managedclusteraddons/${addonName}`,
        );
        if (!mca?.status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True'))
          return false;
      }
      return true;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
  const { stdout } = await run(binaryPath('kubectl'), ['get', 'managedclusteraddons', '-A', hubFlag]);
  log(`\n$ kubectl get managedclusteraddons -A\n${stdout.trimEnd()}`);
} catch (err) {
  console.error(`\nthe addon did not become available: ${(err as Error).message}`);
  console.error(
    `manager and agent logs: ${path.relative(process.cwd(), path.join(stateDir, 'pods', 'logs'))}/`,
  );
  await env.stop();
  process.exit(1);
}

const rel = (file: string) => path.relative(process.cwd(), file);
log('\nReady. Kubeconfigs:');
log(`  hub       ${rel(env.hub.kubeconfig)}`);
for (const cluster of env.managed) log(`  ${cluster.name.padEnd(9)} ${rel(cluster.kubeconfig)}`);
log('\nTry:');
log(`  export KUBECONFIG=${rel(env.hub.kubeconfig)}`);
log('  kubectl get managedclusters');
log('  kubectl get clustergateways');
log(
  '  kubectl get --raw /apis/cluster.core.oam.dev/v1alpha1/clustergateways/cluster1/proxy/api/v1/namespaces',
);
if (env.gateway) log(`\nThe gateway serves on ${env.gateway.url}, behind the hub's kube-aggregator.`);
log(`kubectl is at ${rel(path.join(repoRoot, '.cache', 'bin', 'kubectl'))} (matches the apiserver version).`);
log(
  `Logs: ${rel(env.supervisor.logDir)}/ (the addon manager and agents: ${rel(path.join(stateDir, 'pods', 'logs'))}/). Press Ctrl-C to stop everything.`,
);

// Fail loudly if a component dies while we wait.
setInterval(() => {
  try {
    env.supervisor.assertAllRunning();
  } catch (err) {
    console.error(`\n${(err as Error).message}`);
    void env.stop().then(() => process.exit(1));
  }
}, 2000);

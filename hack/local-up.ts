/**
 * `npm start`: brings up the local environment in the foreground and keeps it
 * running until Ctrl-C, which stops every process it started.
 */
import path from 'node:path';
import { repoRoot } from './localenv/binaries.ts';
import { startEnvironment } from './localenv/environment.ts';

const stateDir = path.join(repoRoot, '.local', 'env');
const log = (line: string) => console.log(line);

log(`cluster-gateway local environment: state in ${path.relative(process.cwd(), stateDir) || '.'}`);
const env = await startEnvironment({ stateDir, log }).catch((err: Error) => {
  console.error(`\nstart failed: ${err.message}`);
  process.exit(1);
});

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
log(`Logs: ${rel(env.supervisor.logDir)}/. Press Ctrl-C to stop everything.`);

// Fail loudly if a component dies while we wait.
setInterval(() => {
  try {
    env.supervisor.assertAllRunning();
  } catch (err) {
    console.error(`\n${(err as Error).message}`);
    void env.stop().then(() => process.exit(1));
  }
}, 2000);

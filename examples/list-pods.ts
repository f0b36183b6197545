/**
 * Lists the pods of every cluster the hub's gateway serves, through the gateway, with the hub identity.
 *
 *   KUBECONFIG=<hub kubeconfig> node --conditions=cluster-gateway-source examples/list-pods.ts   # in this repository
 *   KUBECONFIG=<hub kubeconfig> node list-pods.ts    # a copy in a project that installed the package
 *
 * (Node strips the types of .ts files outside node_modules only: copy it out of the installed package.)
 *
 * One API client made from the hub's KubeConfig; each call chooses its cluster with onCluster(). An
 * offline cluster is reported as such (the gateway answers at once with a ClusterOffline cause), not as
 * a generic 503. Exits 0 when every cluster answered, 1 otherwise.
 */
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { clusterOfflineReason, isClusterOffline, onCluster } from 'cluster-gateway';

const hub = new KubeConfig();
hub.loadFromDefault(); // KUBECONFIG, else ~/.kube/config: the hub's
const gateways = (await hub
  .makeApiClient(CustomObjectsApi)
  .listClusterCustomObject({ group: 'cluster.core.oam.dev', version: 'v1alpha1', plural: 'clustergateways' })
  .catch((err: unknown) => {
    // No stack trace for the first thing that can go wrong: say what failed (APIService missing, no permission).
    console.error(
      `cannot list the hub's ClusterGateways: ${err instanceof Error ? err.message.split('\n').slice(0, 2).join(' ') : err}`,
    );
    process.exit(1);
  })) as { items: { metadata: { name: string } }[] };

const core = hub.makeApiClient(CoreV1Api);
const clusters = gateways.items.map((g) => g.metadata.name).sort();
// All clusters at once: one slow cluster does not hold up the others' answers.
const results = await Promise.allSettled(
  clusters.map((cluster) => core.listPodForAllNamespaces({}, onCluster(cluster))),
);
let failed = 0;
for (const [i, cluster] of clusters.entries()) {
  const result = results[i]!;
  if (result.status === 'rejected') {
    failed++;
    const err = result.reason;
    console.log(
      isClusterOffline(err)
        ? `${cluster}: offline (${clusterOfflineReason(err)})`
        : `${cluster}: error: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`,
    );
    continue;
  }
  console.log(`${cluster}: ${result.value.items.length} pods`);
  for (const pod of result.value.items) {
    console.log(`  ${pod.metadata?.namespace}/${pod.metadata?.name} ${pod.status?.phase ?? ''}`);
  }
}
if (clusters.length === 0) console.log('the hub has no ClusterGateways');
process.exitCode = failed > 0 ? 1 : 0;

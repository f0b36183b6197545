/**
 * An informer per managed cluster, fanned in: prints every ConfigMap added, updated or deleted on any
 * cluster the hub's gateway serves, with the cluster it happened on. The informers survive a gateway
 * restart, an agent restart and a 410 Gone on their own (they resume, or relist and print the differences).
 *
 *   KUBECONFIG=<hub kubeconfig> node --conditions=cluster-gateway-source examples/cluster-informers.ts [--namespace ns] [--duration 30s]
 *
 * Runs until Ctrl-C, or for --duration (or INFORMER_DURATION: "30s", "2m", "1500ms", or seconds), then
 * stops its watches and exits 0.
 */
import { parseArgs } from 'node:util';
import { CoreV1Api, CustomObjectsApi, KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { clusterOfflineReason, fanInInformer, isClusterOffline } from 'cluster-gateway';

const { values } = parseArgs({
  options: { namespace: { type: 'string', short: 'n' }, duration: { type: 'string', short: 'd' } },
});
const namespace = values.namespace ?? 'default';
const duration = values.duration ?? process.env.INFORMER_DURATION;

function parseDuration(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(text.trim());
  if (!m) throw new Error(`--duration: "${text}" is not a duration (e.g. 30s, 2m, 1500ms)`);
  return Number(m[1]) * ({ ms: 1, s: 1000, m: 60_000 }[m[2] ?? 's'] ?? 1000);
}
const durationMs = duration === undefined ? undefined : parseDuration(duration);

const hub = new KubeConfig();
hub.loadFromDefault();
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
const clusters = gateways.items.map((g) => g.metadata.name).sort();

const configMaps = fanInInformer<V1ConfigMap>(
  hub,
  clusters,
  `/api/v1/namespaces/${encodeURIComponent(namespace)}/configmaps`,
  (kc) => kc.makeApiClient(CoreV1Api).listNamespacedConfigMap({ namespace }),
);
const show = (verb: string) => (cm: V1ConfigMap, cluster: string) =>
  console.log(
    `${cluster}\t${verb}\t${cm.metadata?.namespace}/${cm.metadata?.name}\trv=${cm.metadata?.resourceVersion}`,
  );
configMaps.on('add', show('ADDED'));
configMaps.on('update', show('MODIFIED'));
configMaps.on('delete', show('DELETED'));
configMaps.on('connect', (cluster) => console.error(`${cluster}\twatching ${namespace}`));
configMaps.on('error', (err, cluster) =>
  console.error(
    `${cluster}\t${isClusterOffline(err) ? `offline (${clusterOfflineReason(err)})` : `retrying: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`}`,
  ),
);

let stopping = false;
async function stop(why: string) {
  if (stopping) return;
  stopping = true;
  console.error(`stopping (${why})`);
  await configMaps.stop();
  process.exit(0);
}
process.once('SIGINT', () => void stop('SIGINT'));
process.once('SIGTERM', () => void stop('SIGTERM'));
if (durationMs !== undefined) setTimeout(() => void stop(`after ${duration}`), durationMs);
// Not awaited: an offline cluster would hold start() back; the others print their events meanwhile.
void configMaps.start().then(() => console.error(`synced: ${configMaps.syncedClusters.join(', ')}`));

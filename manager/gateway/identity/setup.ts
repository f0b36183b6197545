/**
 * Wires the identity module for main.ts: the --cluster-gateway-proxy-config
 * file, the watched ClusterGatewayProxyConfiguration objects, cluster
 * annotations (through the cluster registry's events), the external
 * exchanger's client, and the ProxyIdentity routes.ts asks per request.
 */
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { InformerOptions } from '../../../shared/kube/informer.ts';
import { ConfigurationObjects, type ObjectsLogger } from './configuration-objects.ts';
import { type AnnotatedCluster, ProxyConfigurationStore } from './configuration-store.ts';
import { ExternalIdentityExchanger } from './external-exchanger.ts';
import { loadConfigurationFile } from './parse.ts';
import { ProxyIdentity } from './proxy-identity.ts';

export interface ProxyIdentitySetupOptions {
  hub: KubeClient;
  /**
   * The cluster registry's events (clusters/cluster.ts ClusterDirectory.subscribe), typed here by what
   * is read: clusters/ imports this folder's names (the ManagedCluster screening), so not the reverse.
   */
  clusters: {
    subscribe(listener: (event: { type: string; cluster: AnnotatedCluster }) => void): () => void;
  };
  log: ObjectsLogger;
  /** --cluster-gateway-proxy-config */
  configFile?: string;
  /** --proxy-configuration-name */
  globalObjectName: string;
  /** --watch-proxy-configurations */
  watchObjects: boolean;
  /** --identity-exchange-cache-size */
  cacheSize: number;
  /** ClientIdentityPenetration */
  penetrateAll: boolean;
  /** --authorize-proxy-subpath */
  authorizeProxySubpath: boolean;
  informer?: Omit<InformerOptions, 'path'>;
}

export interface ProxyIdentitySetup {
  identity: ProxyIdentity;
  /** True once the configuration objects are loaded (readiness). */
  readonly synced: boolean;
  stop(): void;
}

/** Rejects when the configuration file cannot be read or is invalid: the gateway must not start without it. */
export async function startProxyIdentity(options: ProxyIdentitySetupOptions): Promise<ProxyIdentitySetup> {
  const file = options.configFile ? await loadConfigurationFile(options.configFile) : undefined;
  if (file) options.log.info({ origin: file.origin, rules: file.rules.length }, 'proxy configuration loaded');
  const store = new ProxyConfigurationStore({
    ...(file ? { file } : {}),
    globalObjectName: options.watchObjects ? options.globalObjectName : '',
    watchesObjects: options.watchObjects,
    log: options.log,
  });
  const objects = options.watchObjects
    ? new ConfigurationObjects({
        client: options.hub,
        store,
        log: options.log,
        ...(options.informer ? { informer: options.informer } : {}),
      })
    : undefined;
  void objects?.start();
  // Annotation changes are evaluated (and logged) when they happen, not at the next request.
  const unsubscribe = options.clusters.subscribe((event) => {
    if (event.type === 'DELETED') store.forgetCluster(event.cluster.name);
    else store.observeCluster(event.cluster);
  });
  const external = new ExternalIdentityExchanger({ maxEntries: options.cacheSize });
  const identity = new ProxyIdentity({
    store,
    external,
    penetrateAll: options.penetrateAll,
    authorizeProxySubpath: options.authorizeProxySubpath,
  });
  return {
    identity,
    get synced() {
      return store.synced;
    },
    stop() {
      unsubscribe();
      objects?.stop();
      external.close();
    },
  };
}

/** What routes use when main wires no configuration: the two flags alone, as before this module. */
export function flagsOnlyIdentity(penetrateAll: boolean, authorizeProxySubpath: boolean): ProxyIdentity {
  return new ProxyIdentity({
    store: new ProxyConfigurationStore({ globalObjectName: '', watchesObjects: false }),
    external: new ExternalIdentityExchanger({ maxEntries: 1 }),
    penetrateAll,
    authorizeProxySubpath,
  });
}

/**
 * The local environment: a real OCM hub and N managed clusters, each a real
 * kube-apiserver (one shared etcd, a prefix each) with kube-controller-manager,
 * the OCM hub controllers on the hub, and the OCM klusterlet agents for each
 * managed cluster, joined the real way (bootstrap kubeconfig, CSR, acceptance).
 *
 * Used by `npm start` (hack/local-up.ts) and by the e2e global setup.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type LocalCluster, startApiserver, startControllerManager } from './apiserver.ts';
import { startEtcd } from './etcd.ts';
import { type LocalGateway, provisionCredentials, startGateway } from './gateway.ts';
import { HostChanges } from './host-changes.ts';
import { type BuiltImages, buildImages } from './images.ts';
import { type LocalNode, startNode } from './node.ts';
import { joinManagedCluster, startOcmHub } from './ocm.ts';
import { Supervisor } from './supervisor.ts';

/**
 * The hub kube-apiserver's --request-timeout, a third of its 60 s default: e2e/tunnel.test.ts holds a tunnel
 * for over twice this long to show that the hub treats the attach as long-running, and a shorter timeout
 * keeps that wait short. Nothing here needs more: requests that are not long-running (watch, proxy, attach,
 * exec, logs and port-forward are) answer within a second, and the addon's webhook times out after 3 s.
 */
export const hubRequestTimeoutSeconds = 20;

export interface EnvironmentOptions {
  /** Where kubeconfigs, certificates, logs and etcd data go; wiped at start. */
  stateDir: string;
  /**
   * Default cluster1 and cluster2 (the e2e suite); `npm start` adds cluster3. Each gets a kube-apiserver, a
   * node (with `nodes`: its pods in 10.244.<index + 2>.0/24) and the OCM join.
   */
  managedClusters?: string[];
  /** Start the ClusterGateway aggregated API server (default true). */
  gateway?: boolean;
  /** Extra flags for the gateway. */
  gatewayArgs?: string[];
  /**
   * Without the gateway: still write the credential namespace and a credential Secret per managed
   * cluster (gateway.ts), for a gateway installed later (the benchmarks install the chart). `npm start`
   * writes none: docs/install.md's steps give the gateway its way into each cluster.
   */
  clusterCredentials?: boolean;
  /**
   * A real node on every cluster (node.ts): containerd, a kubelet and a scheduler, every usual
   * controller, and the project's image built from the Dockerfile and imported. Needs root; changes
   * to the host are undone at stop (host-changes.ts).
   */
  nodes?: boolean;
  log?: (line: string) => void;
}

export interface Environment {
  stateDir: string;
  hub: LocalCluster;
  managed: LocalCluster[];
  gateway?: LocalGateway;
  /** The nodes, hub first, and the images they hold (with `nodes`). */
  nodes?: LocalNode[];
  images?: BuiltImages;
  supervisor: Supervisor;
  stop(): Promise<void>;
}

/** What other processes (test files) need to use a running environment. */
export interface EnvironmentState {
  stateDir: string;
  /** `reachableServer`: the URL pods (and OCM's records) use: the bridge's address when there are nodes. */
  hub: { name: string; server: string; reachableServer: string; kubeconfig: string };
  managed: { name: string; server: string; reachableServer: string; kubeconfig: string }[];
  gateway?: { url: string; port: number };
  /** The project's image the nodes run (with `nodes`). */
  image?: string;
}

/**
 * Managed clusters whose kube-apiserver refuses TLS 1.2. The gateway's health probes offer TLS 1.2
 * first (shared/transport/one-shot-tls.ts says why) and must fall back to TLS 1.3 with these,
 * and everything that reaches cluster2 (the gateway, OCM's agents, the addon) speaks TLS 1.3 to it.
 */
const tls13OnlyClusters = new Set(['cluster2']);

export async function startEnvironment(options: EnvironmentOptions): Promise<Environment> {
  const log = options.log ?? (() => {});
  const names = options.managedClusters ?? ['cluster1', 'cluster2'];
  const { stateDir } = options;
  // With nodes, Ctrl-C must stop them and undo the host's changes, not only kill processes: the
  // environment handles the signals itself (below) instead of the supervisor.
  const supervisor = new Supervisor(stateDir, { handleSignals: !options.nodes }); // kills leftovers first
  mkdirSync(stateDir, { recursive: true });
  // Undoes what a previous run killed with SIGKILL left on the host, before anything else.
  const host = options.nodes ? new HostChanges(stateDir) : undefined;
  rmSync(path.join(stateDir, 'data'), { recursive: true, force: true });
  rmSync(path.join(stateDir, 'nodes'), { recursive: true, force: true });
  const started = Date.now();
  const step = (what: string) => log(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${what}`);
  let nodes: LocalNode[] = [];
  let stopping: Promise<void> | undefined;
  // A second Ctrl-C (or a signal forwarded twice, as `timeout` does) while stopping must not end this
  // process before the host is restored: the handler stays installed and only the first one acts.
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) return;
    void stopAll().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };
  if (options.nodes) {
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  }
  // Before the environment is complete: what has started so far.
  let stopEverything = async () => {
    await stopNodes().catch(() => {});
    await supervisor.stop();
    host?.restore();
  };
  function stopAll(): Promise<void> {
    stopping ??= stopEverything().finally(() => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    });
    return stopping;
  }
  const stopNodes = async () => {
    await Promise.all(nodes.map((n) => n.stop()));
    nodes = [];
  };
  try {
    // The image build runs while the control planes start (it is a no-op on an unchanged tree).
    const images = options.nodes ? buildImages((line) => step(line)) : undefined;
    images?.catch(() => {}); // awaited below; a failure is reported there
    host?.setUpNetwork();
    step('starting etcd');
    const etcd = await startEtcd(supervisor, path.join(stateDir, 'data'));
    step(`starting kube-apiservers: hub, ${names.join(', ')}`);
    const [hub, ...managed] = await Promise.all(
      ['hub', ...names].map((name, i) =>
        startApiserver(supervisor, {
          name,
          stateDir,
          etcdUrl: etcd.url,
          serviceCidr: `10.${96 + i}.0.0/16`,
          tls13Only: tls13OnlyClusters.has(name),
          podNetwork: !!options.nodes,
          ...(name === 'hub' ? { requestTimeoutSeconds: hubRequestTimeoutSeconds } : {}),
        }),
      ),
    );
    if (!hub) throw new Error('hub did not start');
    step('starting kube-controller-managers');
    for (const cluster of [hub, ...managed])
      startControllerManager(supervisor, cluster, { withNode: !!options.nodes });
    // The nodes and OCM need nothing of each other: they start side by side.
    let built: BuiltImages | undefined;
    const nodesReady = (async () => {
      if (!host || !images) return;
      built = await images;
      step(`starting a node on each cluster (containerd, kubelet, kube-scheduler; image ${built.image})`);
      const started = await Promise.allSettled(
        [hub, ...managed].map((cluster, index) =>
          startNode(supervisor, host, cluster, { index, stateDir, images: built as BuiltImages }),
        ),
      );
      // Every node that started is stopped with the others, even when one failed.
      nodes = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
      const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) throw failed.reason;
      step(`${nodes.length} nodes Ready`);
    })();
    nodesReady.catch(() => {}); // awaited below; a failure is reported there
    step(
      'starting the OCM hub (CRDs, registration controller, placement scheduler, addon manager, conversion webhook)',
    );
    const ocmHub = await startOcmHub(supervisor, hub, stateDir);
    for (const cluster of managed) {
      step(`joining ${cluster.name} (registration agent, CSR, acceptance, work agent)`);
    }
    await Promise.all(managed.map((cluster) => joinManagedCluster(supervisor, ocmHub, cluster, stateDir)));
    step(`${names.length} managed clusters joined and available`);
    await nodesReady;
    let gateway: LocalGateway | undefined;
    if (options.gateway ?? true) {
      step('starting the cluster gateway and registering its APIService');
      gateway = await startGateway(supervisor, hub, managed, stateDir, options.gatewayArgs);
      step(`cluster gateway serving on ${gateway.url}`);
    } else if (options.clusterCredentials) {
      step(`writing the credential Secrets of ${names.join(', ')}`);
      await provisionCredentials(hub.client, managed);
    }
    const state: EnvironmentState = {
      stateDir,
      hub: pick(hub),
      managed: managed.map(pick),
      ...(gateway ? { gateway: { url: gateway.url, port: gateway.port } } : {}),
      ...(built ? { image: built.image } : {}),
    };
    writeFileSync(path.join(stateDir, 'environment.json'), JSON.stringify(state, null, 2));
    stopEverything = async () => {
      await stopNodes();
      for (const cluster of [hub, ...managed]) cluster.client.close();
      await supervisor.stop();
      host?.restore();
    };
    return {
      stateDir,
      hub,
      managed,
      ...(gateway ? { gateway } : {}),
      ...(built ? { nodes, images: built } : {}),
      supervisor,
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

function pick(cluster: LocalCluster) {
  return {
    name: cluster.name,
    server: cluster.server,
    reachableServer: cluster.reachableServer,
    kubeconfig: cluster.kubeconfig,
  };
}

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
import { type LocalAddon, startAddon } from './addon.ts';
import { type LocalCluster, startApiserver, startControllerManager } from './apiserver.ts';
import { startEtcd } from './etcd.ts';
import { type LocalGateway, provisionCredentials, startGateway } from './gateway.ts';
import { joinManagedCluster, startOcmHub } from './ocm.ts';
import { Supervisor } from './supervisor.ts';

export interface EnvironmentOptions {
  /** Where kubeconfigs, certificates, logs and etcd data go; wiped at start. */
  stateDir: string;
  managedClusters?: string[];
  /** Start the ClusterGateway aggregated API server (default true). */
  gateway?: boolean;
  /** Extra flags for the gateway. */
  gatewayArgs?: string[];
  /**
   * Without the gateway: still write the credential namespace and a credential Secret per managed
   * cluster (gateway.ts), for a gateway installed later (`npm start` installs the chart).
   */
  clusterCredentials?: boolean;
  /**
   * Install the addon: process runners on every cluster and the addon manager's Deployment on the
   * hub (addon.ts). Off by default: e2e files that test the manager run their own.
   */
  addon?: boolean | { managerArgs?: string[] };
  log?: (line: string) => void;
}

export interface Environment {
  stateDir: string;
  hub: LocalCluster;
  managed: LocalCluster[];
  gateway?: LocalGateway;
  addon?: LocalAddon;
  supervisor: Supervisor;
  stop(): Promise<void>;
}

/** What other processes (test files) need to use a running environment. */
export interface EnvironmentState {
  stateDir: string;
  hub: { name: string; server: string; kubeconfig: string };
  managed: { name: string; server: string; kubeconfig: string }[];
  gateway?: { url: string; port: number };
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
  const supervisor = new Supervisor(stateDir); // kills leftovers of a previous run first
  rmSync(path.join(stateDir, 'data'), { recursive: true, force: true });
  mkdirSync(stateDir, { recursive: true });
  const started = Date.now();
  const step = (what: string) => log(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${what}`);
  try {
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
        }),
      ),
    );
    if (!hub) throw new Error('hub did not start');
    step('starting kube-controller-managers');
    for (const cluster of [hub, ...managed]) startControllerManager(supervisor, cluster);
    step(
      'starting the OCM hub (CRDs, registration controller, placement scheduler, addon manager, conversion webhook)',
    );
    const ocmHub = await startOcmHub(supervisor, hub, stateDir);
    for (const cluster of managed) {
      step(`joining ${cluster.name} (registration agent, CSR, acceptance, work agent)`);
    }
    await Promise.all(managed.map((cluster) => joinManagedCluster(supervisor, ocmHub, cluster, stateDir)));
    step(`${names.length} managed clusters joined and available`);
    let gateway: LocalGateway | undefined;
    if (options.gateway ?? true) {
      step('starting the cluster gateway and registering its APIService');
      gateway = await startGateway(supervisor, hub, managed, stateDir, options.gatewayArgs);
      step(`cluster gateway serving on ${gateway.url}`);
    } else if (options.clusterCredentials) {
      step(`writing the credential Secrets of ${names.join(', ')}`);
      await provisionCredentials(hub.client, managed);
    }
    let addon: LocalAddon | undefined;
    if (options.addon) {
      step('installing the addon manager (Deployment on the hub, run by the process runners)');
      const managerArgs = typeof options.addon === 'object' ? options.addon.managerArgs : undefined;
      addon = await startAddon(hub, managed, stateDir, {
        ...(managerArgs ? { args: managerArgs } : {}),
        log,
      });
    }
    const state: EnvironmentState = {
      stateDir,
      hub: pick(hub),
      managed: managed.map(pick),
      ...(gateway ? { gateway: { url: gateway.url, port: gateway.port } } : {}),
    };
    writeFileSync(path.join(stateDir, 'environment.json'), JSON.stringify(state, null, 2));
    return {
      stateDir,
      hub,
      managed,
      ...(gateway ? { gateway } : {}),
      ...(addon ? { addon } : {}),
      supervisor,
      stop: async () => {
        await addon?.stop();
        for (const cluster of [hub, ...managed]) cluster.client.close();
        await supervisor.stop();
      },
    };
  } catch (err) {
    await supervisor.stop();
    throw err;
  }
}

function pick(cluster: LocalCluster) {
  return { name: cluster.name, server: cluster.server, kubeconfig: cluster.kubeconfig };
}

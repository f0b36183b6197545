/**
 * charts/cluster-gateway installed into the local environment's hub the way
 * a user installs it (`helm install`, the commands of README.md's "Install
 * on a hub"): the process runners (addon.ts) run the manager from the
 * Deployment helm made, and the gateway from the Deployment the manager
 * made; the manager registers the gateway's APIService once it serves.
 *
 * One place for the values this machine needs (no pod network, no container
 * runtime): `npm start` (hack/local-up.ts) uses them, and so can the e2e test
 * of the chart.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { type AddonCluster, type LocalAddon, startPodRunners } from './addon.ts';
import { imagePrefix } from './addon-manager.ts';
import { binaryPath, repoRoot } from './binaries.ts';
import { type BuiltImages, imageValues } from './images.ts';
import { freePort } from './ports.ts';
import { waitFor } from './wait.ts';

export const chartDir = path.join(repoRoot, 'charts', 'cluster-gateway');
/**
 * README.md's release and namespace. Not the environment's own `cluster-gateway-system` (its hand-run
 * gateway and addon manager, gateway.ts and addon-manager.ts) nor e2e/chart-install.test.ts's namespace.
 */
export const defaultRelease = 'cluster-gateway';
export const defaultNamespace = 'open-cluster-management-addon';

const run = promisify(execFile);

/** The `--set` arguments of a chart installed on this machine, then `overrides` (which win). */
export function localChartValues(opts: { hostPort: number; overrides?: string[] }): string[] {
  const set = [
    'image.registry=ghcr.io',
    `image.repository=${imagePrefix.replace(/^ghcr\.io\//, '')}`,
    'image.tag=local',
    'manager.logLevel=debug',
    // The hub apiserver calls the webhook on this machine (the runner maps 9444 to the pod's own port);
    // 9444, not 9443, so that no manager argument ending in the gateway's 9443 is remapped.
    'manager.webhook.port=9444',
    'manager.webhook.url=https://127.0.0.1:9444',
    // The environment's credential namespace exists already and is not helm's.
    'gateway.credentialNamespace.create=false',
    // No pod network here: the gateway binds its port on "the node" and the Service is a DNS alias.
    `gateway.hostPort=${opts.hostPort}`,
    'gateway.serviceExternalName=localhost',
    'gateway.logLevel=debug',
    'gateway.healthCheck.intervalSeconds=2',
    ...(opts.overrides ?? []),
  ];
  return set.flatMap((s) => ['--set', s]);
}

/**
 * The `--set` arguments of a chart installed on the environment's real nodes, then `overrides`: only
 * the image built here (imported into every node; Never, so a missing one fails at once rather than
 * trying a registry) and what makes the local environment quick to watch. Everything else is the
 * chart's defaults, as a user installs it: a ClusterIP Service with endpoints, the webhook through it.
 */
export function nodeChartValues(images: Pick<BuiltImages, 'image'>, overrides: string[] = []): string[] {
  const image = imageValues(images.image);
  const set = [
    `image.registry=${image.registry}`,
    `image.repository=${image.repository}`,
    `image.tag=${image.tag}`,
    'image.pullPolicy=Never',
    'manager.logLevel=debug',
    'gateway.credentialNamespace.create=false',
    'gateway.logLevel=debug',
    'gateway.healthCheck.intervalSeconds=2',
    ...overrides,
  ];
  return set.flatMap((s) => ['--set', s]);
}

/** Runs the helm that hack/install-binaries.sh built against `kubeconfig`; its stdout. */
export async function helm(kubeconfig: string, ...args: string[]): Promise<string> {
  try {
    const { stdout } = await run(binaryPath('helm'), [...args, `--kubeconfig=${kubeconfig}`], {
      timeout: 180_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`helm ${args.join(' ')} failed: ${e.stderr?.trim() || e.message}`);
  }
}

export interface ChartInstallOptions {
  hub: AddonCluster & { kubeconfig: string };
  managed: AddonCluster[];
  /** The pods' logs go to <stateDir>/pods/logs, the runners' state to <stateDir>/runner. */
  stateDir: string;
  release?: string;
  namespace?: string;
  /** More `--set` values (after the local ones). */
  overrides?: string[];
  /** The environment has real nodes running this image: no process runners, the chart's own values. */
  images?: Pick<BuiltImages, 'image'>;
  log?: (line: string) => void;
}

export interface InstalledChart {
  release: string;
  namespace: string;
  /** Where the gateway listens on this machine (its hostPort); on real nodes, behind its Service only. */
  gatewayUrl?: string;
  /** helm's output (the chart's NOTES.txt). */
  notes: string;
  /** The process runners and the pods they run (none on real nodes). */
  pods?: LocalAddon;
  /** Stops the pods and their runners; the release stays (the environment's state is wiped at start). */
  stop(): Promise<void>;
}

/**
 * Starts the process runners, then `helm install --create-namespace`, and returns once the manager has
 * declared the ClusterManagementAddOn (`clusteradm addon enable` refuses an addon without it). Waiting
 * for the gateway's APIService and the addons is the caller's: what it waits for depends on what it does.
 */
export async function installChart(options: ChartInstallOptions): Promise<InstalledChart> {
  const release = options.release ?? defaultRelease;
  const namespace = options.namespace ?? defaultNamespace;
  const images = options.images;
  const hostPort = images ? undefined : await freePort();
  const pods = images
    ? undefined
    : startPodRunners(options.hub, options.managed, options.stateDir, options.log);
  const stop = async () => {
    await pods?.stop();
  };
  try {
    const values = images
      ? nodeChartValues(images, options.overrides)
      : localChartValues({
          hostPort: hostPort as number,
          ...(options.overrides ? { overrides: options.overrides } : {}),
        });
    const notes = await helm(
      options.hub.kubeconfig,
      'install',
      release,
      chartDir,
      '--namespace',
      namespace,
      '--create-namespace',
      ...values,
    );
    const addonName = addonNameOf(options.overrides);
    await waitFor(
      `the addon manager (helm release ${release} in ${namespace}) to declare ClusterManagementAddOn ${addonName}`,
      () =>
        options.hub.client.getOptional(
          `/apis/addon.open-cluster-management.io/v1alpha1/clustermanagementaddons/${addonName}`,
        ),
      { timeoutMs: 60_000 },
    );
    return {
      release,
      namespace,
      ...(hostPort ? { gatewayUrl: `https://127.0.0.1:${hostPort}` } : {}),
      notes,
      ...(pods ? { pods } : {}),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The addon's name: the chart's default unless an override sets addon.name. */
function addonNameOf(overrides: string[] = []): string {
  let name = 'cluster-gateway';
  for (const o of overrides) if (o.startsWith('addon.name=')) name = o.slice('addon.name='.length);
  return name;
}

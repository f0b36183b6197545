/**
 * charts/cluster-gateway installed into the local environment's hub the way
 * a user installs it (`helm install`, the commands of README.md's "Install
 * on a hub"), on the environment's real nodes (node.ts): the hub's kubelet
 * runs the manager from the Deployment helm made, and the gateway from the
 * Deployment the manager made; the manager registers the gateway's
 * APIService once it serves. The chart's own values but the image built
 * here: `npm start` (hack/local-up.ts) uses them, and so does the e2e test
 * of the chart.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import type { KubeClient } from '../../shared/kube/client.ts';
import { binaryPath, repoRoot } from './binaries.ts';
import { type BuiltImages, imageValues } from './images.ts';
import { waitFor } from './wait.ts';

export const chartDir = path.join(repoRoot, 'charts', 'cluster-gateway');
/**
 * README.md's release and namespace. Not the environment's own `cluster-gateway-system` (its hand-run
 * gateway and addon manager, gateway.ts and addon-manager.ts) nor e2e/chart-install.test.ts's namespace.
 */
export const defaultRelease = 'cluster-gateway';
export const defaultNamespace = 'open-cluster-management-addon';

const run = promisify(execFile);

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

/**
 * The same local values as a values file, for `npm start`, which installs the chart with docs/install.md's own
 * helm step (its VALUES): the image built here and the log levels, and nothing about namespaces (the chart
 * creates the credential namespace there, as on a user's hub: the environment writes no credential).
 */
export function nodeChartValuesFile(images: Pick<BuiltImages, 'image'>): string {
  return stringify({
    image: { ...imageValues(images.image), pullPolicy: 'Never' },
    manager: { logLevel: 'debug' },
    gateway: { logLevel: 'debug', healthCheck: { intervalSeconds: 2 } },
  });
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
  hub: { client: KubeClient; kubeconfig: string };
  release?: string;
  namespace?: string;
  /** More `--set` values (after the node ones). */
  overrides?: string[];
  /** The image the environment's nodes hold (Environment.images): the chart runs it. */
  images: Pick<BuiltImages, 'image'>;
}

export interface InstalledChart {
  release: string;
  namespace: string;
  /** helm's output (the chart's NOTES.txt). */
  notes: string;
}

/**
 * `helm install --create-namespace` with the node values, and returns once the manager has declared the
 * ClusterManagementAddOn (`clusteradm addon enable` refuses an addon without it). Waiting for the
 * gateway's APIService and the addons is the caller's: what it waits for depends on what it does.
 */
export async function installChart(options: ChartInstallOptions): Promise<InstalledChart> {
  const release = options.release ?? defaultRelease;
  const namespace = options.namespace ?? defaultNamespace;
  const { images } = options;
  const notes = await helm(
    options.hub.kubeconfig,
    'install',
    release,
    chartDir,
    '--namespace',
    namespace,
    '--create-namespace',
    ...nodeChartValues(images, options.overrides),
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
  return { release, namespace, notes };
}

/** The addon's name: the chart's default unless an override sets addon.name. */
function addonNameOf(overrides: string[] = []): string {
  let name = 'cluster-gateway';
  for (const o of overrides) if (o.startsWith('addon.name=')) name = o.slice('addon.name='.length);
  return name;
}

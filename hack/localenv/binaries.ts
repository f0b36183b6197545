/**
 * Where the control-plane binaries are: prebuilt ones named by the
 * environment first, then the ones hack/install-binaries.sh built. OCM's
 * binaries (and clusteradm, built against the same OCM) and CRDs are kept per
 * OCM release, chosen by OCM_VERSION; the default is hack/tools/ocm/default-version.
 */
import { accessSync, constants, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

export const repoRoot = path.resolve(import.meta.dirname, '..', '..');
export const builtBinDir = process.env.BIN_DIR ?? path.join(repoRoot, '.cache', 'bin');

/** One folder per pinned OCM release (`v1.3.1/`), and `default-version`. */
const ocmPins = path.join(repoRoot, 'hack', 'tools', 'ocm');

/** The OCM releases that hack/tools/ocm pins, oldest first: `['v1.2.1', 'v1.3.1']`. */
export function pinnedOcmVersions(pins = ocmPins): string[] {
  return readdirSync(pins, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && /^v\d+\.\d+\.\d+$/.test(entry.name))
    .map((entry) => entry.name)
    .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
}

/**
 * The OCM release to run: `requested` (OCM_VERSION, `1.2.1` or `v1.2.1`) or
 * the default, as hack/install-binaries.sh resolves it.
 */
export function resolveOcmVersion(requested: string | undefined, pins = ocmPins): string {
  const wanted = requested?.trim() || readFileSync(path.join(pins, 'default-version'), 'utf8').trim();
  const version = `v${wanted.replace(/^v/, '')}`;
  const pinned = pinnedOcmVersions(pins);
  if (!pinned.includes(version)) {
    throw new Error(
      `OCM_VERSION=${wanted} is not an OCM release this project pins: choose one of ${pinned.map((v) => v.slice(1)).join(', ')} (hack/tools/ocm)`,
    );
  }
  return version;
}

let processOcmVersion: string | undefined;

/**
 * The OCM release of this process (OCM_VERSION or the default), resolved
 * once, so that one environment never mixes releases.
 */
export function ocmVersion(): string {
  processOcmVersion ??= resolveOcmVersion(process.env.OCM_VERSION);
  return processOcmVersion;
}

/** `.cache/ocm/<version>`: that release's `bin/` and `crds/`, as hack/install-binaries.sh lays them out. */
export function ocmBuildDir(version = ocmVersion()): string {
  return path.join(path.dirname(builtBinDir), 'ocm', version);
}

/** envtest's convention covers these three; CLUSTER_GATEWAY_ASSETS covers every binary. */
const envtestBinaries = new Set(['kube-apiserver', 'etcd', 'kubectl']);

/** Built per OCM release, into ocmBuildDir()/bin. */
const ocmBinaries = new Set(['registration', 'work', 'addon', 'placement', 'clusteradm']);

export type BinaryName =
  | 'kube-apiserver'
  | 'kube-controller-manager'
  | 'kubectl'
  | 'kubelet'
  | 'kube-scheduler'
  | 'etcd'
  | 'registration'
  | 'work'
  | 'addon'
  | 'placement'
  | 'clusteradm'
  | 'helm';

export function binaryPath(name: BinaryName): string {
  const dirs = [process.env.CLUSTER_GATEWAY_ASSETS];
  if (envtestBinaries.has(name)) dirs.push(process.env.KUBEBUILDER_ASSETS);
  dirs.push(ocmBinaries.has(name) ? path.join(ocmBuildDir(), 'bin') : builtBinDir);
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    if (isExecutable(candidate)) return candidate;
  }
  const build =
    ocmBinaries.has(name) && process.env.OCM_VERSION
      ? `OCM_VERSION=${process.env.OCM_VERSION} npm run binaries`
      : 'npm run binaries';
  throw new Error(
    `binary "${name}" not found in ${dirs.filter(Boolean).join(', ')}: run "${build}" to build it ` +
      '(needs Go), or point CLUSTER_GATEWAY_ASSETS (or KUBEBUILDER_ASSETS for kube-apiserver/etcd/kubectl) at prebuilt binaries',
  );
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Where the control-plane binaries are: prebuilt ones named by the
 * environment first, then the ones hack/install-binaries.sh built.
 */
import { accessSync, constants } from 'node:fs';
import path from 'node:path';

export const repoRoot = path.resolve(import.meta.dirname, '..', '..');
export const builtBinDir = process.env.BIN_DIR ?? path.join(repoRoot, '.cache', 'bin');

/** envtest's convention covers these three; CLUSTER_GATEWAY_ASSETS covers every binary. */
const envtestBinaries = new Set(['kube-apiserver', 'etcd', 'kubectl']);

export type BinaryName =
  | 'kube-apiserver'
  | 'kube-controller-manager'
  | 'kubectl'
  | 'etcd'
  | 'registration'
  | 'work'
  | 'addon'
  | 'clusteradm'
  | 'helm';

export function binaryPath(name: BinaryName): string {
  const dirs = [process.env.CLUSTER_GATEWAY_ASSETS];
  if (envtestBinaries.has(name)) dirs.push(process.env.KUBEBUILDER_ASSETS);
  dirs.push(builtBinDir);
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    if (isExecutable(candidate)) return candidate;
  }
  throw new Error(
    `binary "${name}" not found in ${dirs.filter(Boolean).join(', ')}: run "npm run binaries" to build it ` +
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

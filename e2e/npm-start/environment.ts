/**
 * The environment of the e2e/npm-start/ files: one `npm start` (hack/local-up.ts), started by
 * e2e/npm-start/setup.ts before the first file and stopped after the last, in a state folder of its
 * own. Files find its hub and managed clusters here; each leaves the environment as it found it.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { EnvironmentState } from '../../hack/localenv/environment.ts';
import { KubeClient } from '../../shared/kube/client.ts';
import { e2eStateDir } from '../support/environment.ts';

export const npmStartStateDir = `${e2eStateDir}-nodes`;

/** The clusters `npm start` makes, each by one of docs/install.md's ways in. */
export const npmStartClusters = ['cluster1', 'cluster2', 'cluster3'] as const;
/** docs/install.md's (c): served through its agent's tunnel only, no credential on the hub, not dialable from it. */
export const tunnelOnlyCluster = 'cluster3';

export function npmStartState(): EnvironmentState {
  return JSON.parse(
    readFileSync(path.join(npmStartStateDir, 'environment.json'), 'utf8'),
  ) as EnvironmentState;
}

/** The kubeconfig of the hub (`hub`) or of a managed cluster, as npm start wrote it (admin). */
export function kubeconfigOf(name: string, state: EnvironmentState = npmStartState()): string {
  const entry = name === 'hub' ? state.hub : state.managed.find((m) => m.name === name);
  if (!entry) throw new Error(`npm start has no cluster "${name}"`);
  return entry.kubeconfig;
}

export async function clientOf(name: string, state: EnvironmentState = npmStartState()): Promise<KubeClient> {
  return KubeClient.fromKubeconfig(kubeconfigOf(name, state));
}

/** What npm start printed (setup.ts keeps it), e.g. the docs/install.md steps it ran. */
export const npmStartOutputFile = `${npmStartStateDir}.out`;

export function npmStartOutput(): string {
  return readFileSync(npmStartOutputFile, 'utf8');
}

/** Access to the environment that e2e/setup.ts started, from any test file. */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../../hack/localenv/binaries.ts';
import type { EnvironmentState } from '../../hack/localenv/environment.ts';
import { KubeClient } from '../../shared/kube/client.ts';

export const e2eStateDir = path.join(repoRoot, '.local', 'e2e');

export function environmentState(): EnvironmentState {
  const file = path.join(e2eStateDir, 'environment.json');
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as EnvironmentState;
  } catch {
    throw new Error(`no running e2e environment (${file}): run e2e tests with "npm run test:e2e"`);
  }
}

export async function hubClient(): Promise<KubeClient> {
  return KubeClient.fromKubeconfig(environmentState().hub.kubeconfig);
}

export async function managedClient(name: string): Promise<KubeClient> {
  const cluster = environmentState().managed.find((c) => c.name === name);
  if (!cluster) throw new Error(`no managed cluster "${name}" in the e2e environment`);
  return KubeClient.fromKubeconfig(cluster.kubeconfig);
}

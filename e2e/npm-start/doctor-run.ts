import { spawn } from 'node:child_process';
import path from 'node:path';
import { repoRoot } from '../../hack/localenv/binaries.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import { kubeconfigOf } from './environment.ts';

export const cliMain = path.join(repoRoot, 'client', 'cli', 'main.ts');

export interface Check {
  name: string;
  cluster?: string;
  result: 'pass' | 'fail' | 'skipped';
  message: string;
  object?: string;
  fix?: string;
  durationMs: number;
}
export interface Run {
  code: number;
  stdout: string;
  stderr: string;
  checks: Check[];
  ms: number;
}

export function doctor(args: string[], kubeconfig = kubeconfigOf('hub')): Promise<Run> {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cliMain, 'doctor', '-o', 'json', ...args], {
      env: { ...process.env, KUBECONFIG: kubeconfig, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      stdout += c;
    });
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      stderr += c;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.once('close', (code) => {
      clearTimeout(timer);
      let checks: Check[] = [];
      try {
        checks = (JSON.parse(stdout) as { checks: Check[] }).checks;
      } catch {
        // not JSON (a usage or connection error): the assertions show stdout and stderr
      }
      resolve({ code: code ?? -1, stdout, stderr, checks, ms: Math.round(performance.now() - started) });
    });
  });
}

export const firstFailure = (run: Run) => run.checks.find((c) => c.result === 'fail');
export const describeRun = (run: Run) =>
  `exit ${run.code}; first failure: ${JSON.stringify(firstFailure(run))}\nstderr: ${run.stderr.slice(0, 500)}`;

export const firstFails = (name: string, cluster?: string) => (run: Run) =>
  run.code === 1 && firstFailure(run)?.name === name && firstFailure(run)?.cluster === cluster;

/** Scales a Deployment, or every Deployment a label selector matches (`key=value`). */
export async function scale(client: KubeClient, namespace: string, selectorOrName: string, replicas: number) {
  const base = `/apis/apps/v1/namespaces/${namespace}/deployments`;
  const names = selectorOrName.includes('=')
    ? (await client.list(`${base}?labelSelector=${encodeURIComponent(selectorOrName)}`)).items.map(
        (d) => d.metadata?.name as string,
      )
    : [selectorOrName];
  for (const name of names) await client.mergePatch(`${base}/${name}/scale`, { spec: { replicas } });
}

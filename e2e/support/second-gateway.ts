/**
 * A second gateway process with extra flags, against the environment's hub
 * and clusters (the environment's own gateway runs with defaults). Requests
 * reach it directly, as the aggregator's do (front-proxy certificate) or
 * with a bearer token.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { openSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../../hack/localenv/binaries.ts';
import { compileCacheEnv, warmCompileCache } from '../../hack/localenv/compile-cache.ts';
import { credentialNamespace } from '../../hack/localenv/gateway.ts';
import { freePort } from '../../hack/localenv/ports.ts';
import { waitFor } from '../../hack/localenv/wait.ts';
import { gatewayNodeFlags } from '../../manager/addon/gateway-deploy/workload.ts';
import { environmentState } from './environment.ts';
import { gatewayRequest } from './gateway-client.ts';

export interface SecondGateway {
  url: string;
  process: ChildProcess;
  /** The file its stdout and stderr go to. */
  logFile: string;
  /** True while the process runs. */
  alive(): boolean;
  stop(): void;
}

export async function startSecondGateway(logName: string, flags: string[]): Promise<SecondGateway> {
  const dir = path.join(environmentState().stateDir, 'gateway');
  const port = await freePort();
  const url = `https://127.0.0.1:${port}`;
  const logFile = path.join(environmentState().stateDir, 'logs', `${logName}.log`);
  const log = openSync(logFile, 'a');
  warmCompileCache('manager/gateway/main.ts');
  const child = spawn(
    process.execPath,
    [
      ...gatewayNodeFlags,
      path.join(repoRoot, 'manager', 'gateway', 'main.ts'),
      `--secure-port=${port}`,
      '--bind-address=127.0.0.1',
      `--tls-cert-file=${path.join(dir, 'tls.crt')}`,
      `--tls-private-key-file=${path.join(dir, 'tls.key')}`,
      `--kubeconfig=${path.join(dir, 'serviceaccount.kubeconfig')}`,
      `--secret-namespace=${credentialNamespace}`,
      ...flags,
    ],
    { stdio: ['ignore', log, log], env: { ...process.env, ...compileCacheEnv } },
  );
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  try {
    await waitFor(
      `the gateway "${logName}" to be ready`,
      async () => (await gatewayRequest('GET', '/readyz', {}, url)).status === 200,
      {
        failFast: () => {
          if (exited) throw new Error(`gateway "${logName}" exited; see ${logFile}`);
        },
      },
    );
  } catch (err) {
    child.kill('SIGTERM');
    throw err;
  }
  return {
    url,
    process: child,
    logFile,
    alive: () => !exited,
    stop: () => {
      if (!exited) child.kill('SIGTERM');
    },
  };
}

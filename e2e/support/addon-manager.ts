/**
 * An addon manager process (manager/addon/main.ts) against the e2e hub, with
 * the hub admin kubeconfig, until the environment runs it from its
 * Deployment (engineer C's integration).
 *
 * Flags: the defaults below, each replaced by a flag of the same name in
 * `flags` (so `--http-port=N` or `--leader-elect=true` override rather than
 * repeat, and readiness is polled on the port the manager really uses).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../../hack/localenv/binaries.ts';
import { compileCacheEnv, warmCompileCache } from '../../hack/localenv/compile-cache.ts';
import { freePort } from '../../hack/localenv/ports.ts';
import { waitFor } from '../../hack/localenv/wait.ts';
import { environmentState } from './environment.ts';

export interface AddonManagerProcess {
  process: ChildProcess;
  httpPort: number;
  /** 0 when the webhook listener is off (the default). */
  webhookPort: number;
  logFile: string;
  stop(): Promise<void>;
}

export interface AddonManagerSettings {
  /**
   * Serve the LeaseNotFound webhook on a free port and let the manager register it at
   * https://127.0.0.1:<port> (the manager runs outside the hub, as in the local environment).
   */
  webhook?: boolean;
}

export async function startAddonManager(
  logName: string,
  flags: string[] = [],
  settings: AddonManagerSettings = {},
): Promise<AddonManagerProcess> {
  const state = environmentState();
  const webhookPort = settings.webhook ? await freePort() : 0;
  const defaults: Record<string, string> = {
    kubeconfig: state.hub.kubeconfig,
    namespace: 'open-cluster-management-hub',
    'leader-elect': 'false',
    'http-bind-address': '127.0.0.1',
    'http-port': String(await freePort()),
    'webhook-port': String(webhookPort),
    ...(webhookPort ? { 'webhook-url': `https://127.0.0.1:${webhookPort}` } : {}),
    'log-level': 'debug',
  };
  const merged = new Map(Object.entries(defaults));
  for (const flag of flags) {
    const match = /^--([^=]+)=(.*)$/s.exec(flag);
    if (!match?.[1]) throw new Error(`startAddonManager: give flags as --name=value, not "${flag}"`);
    merged.set(match[1], match[2] ?? '');
  }
  const httpPort = Number(merged.get('http-port'));
  if (!httpPort)
    throw new Error('startAddonManager: --http-port must be a port, not 0 (readiness is polled on it)');

  const logDir = path.join(state.stateDir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const logFile = path.join(logDir, `${logName}.log`);
  const out = openSync(logFile, 'a');
  warmCompileCache('manager/addon/main.ts'); // as the image is
  const child = spawn(
    process.execPath,
    [
      path.join(repoRoot, 'manager', 'addon', 'main.ts'),
      ...[...merged].map(([name, value]) => `--${name}=${value}`),
    ],
    { stdio: ['ignore', out, out], env: { ...process.env, ...compileCacheEnv } },
  );
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  const stop = async () => {
    if (!exited) child.kill('SIGTERM');
    await exit;
  };
  try {
    await waitFor(
      `addon manager "${logName}" to be ready`,
      async () => (await fetch(`http://127.0.0.1:${httpPort}/readyz`)).status === 200,
      {
        timeoutMs: 60_000,
        failFast: () => {
          if (exited) throw new Error(`addon manager "${logName}" exited; see ${logFile}`);
        },
      },
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return { process: child, httpPort, webhookPort, logFile, stop };
}

/**
 * Global setup of the e2e/npm-start/ files (node --test-global-setup): `npm start` as users run it
 * (hack/local-up.ts; its prestart has run: `npm test` runs the same install scripts first), once for
 * all files, in a state folder of its own (environment.ts). Its output is kept in a file beside that
 * folder, so that a test can check what it printed.
 *
 * At teardown it is stopped as a user stops it, with Ctrl-C, and the suite fails unless it exits 130
 * and leaves nothing on the machine: no process, mount, iptables chain, bridge, cgroup or sysctl.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { repoRoot } from '../../hack/localenv/binaries.ts';
import { hostFootprint } from '../../hack/localenv/host-changes.ts';
import { waitFor } from '../../hack/localenv/wait.ts';
import { npmStartOutputFile, npmStartStateDir } from './environment.ts';

let up: ChildProcess | undefined;
let upExit: Promise<number | null> = Promise.resolve(null);
let output = '';
let outputFile: WriteStream | undefined;
let footprintBefore: ReturnType<typeof hostFootprint> | undefined;

export async function globalSetup(): Promise<void> {
  footprintBefore = hostFootprint(npmStartStateDir);
  outputFile = createWriteStream(npmStartOutputFile);
  const child = spawn(process.execPath, [path.join(repoRoot, 'hack', 'local-up.ts')], {
    cwd: repoRoot,
    env: { ...process.env, CLUSTER_GATEWAY_ENV_DIR: npmStartStateDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  up = child;
  upExit = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  for (const stream of [child.stdout, child.stderr]) {
    stream.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
      outputFile?.write(chunk);
      process.stderr.write(chunk.replace(/^(?=.)/gm, '[npm start] '));
    });
  }
  let exited = false;
  void upExit.then(() => {
    exited = true;
  });
  const started = Date.now();
  await waitFor('npm start to print "ready"', () => / ready: /.test(output), {
    timeoutMs: 300_000,
    intervalMs: 250,
    failFast: () => {
      if (exited) throw new Error(`npm start exited before it was ready:\n${output}`);
    },
  });
  process.stderr.write(
    `[npm-start setup] npm start ready in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
  );
}

export async function globalTeardown(): Promise<void> {
  const child = up;
  if (!child) return;
  const started = Date.now();
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
  const code = await upExit;
  outputFile?.end();
  const problems: string[] = [];
  if (code !== 130) problems.push(`npm start exited ${code} after Ctrl-C, not 130:\n${output.slice(-2000)}`);
  if (footprintBefore) {
    const now = hostFootprint(npmStartStateDir);
    if (now.processes.length > 0) problems.push(`processes left: ${JSON.stringify(now.processes)}`);
    for (const key of ['mounts', 'chains', 'bridge', 'cgroups', 'sysctls', 'paths'] as const) {
      if (!isDeepStrictEqual(now[key], footprintBefore[key])) {
        problems.push(
          `${key} changed: before ${JSON.stringify(footprintBefore[key])}, after ${JSON.stringify(now[key])}`,
        );
      }
    }
  }
  const took = ((Date.now() - started) / 1000).toFixed(1);
  if (problems.length === 0) {
    process.stderr.write(
      `[npm-start setup] npm start stopped with Ctrl-C in ${took} s: exit 130, nothing of it left on the machine\n`,
    );
    return;
  }
  process.stderr.write(`[npm-start setup] npm start stopped with Ctrl-C:\n${problems.join('\n')}\n`);
  process.exitCode = 1;
}

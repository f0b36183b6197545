/**
 * Global setup of the e2e suite (node --test-global-setup): one environment
 * for all test files, started before the first and stopped after the last.
 * Test files find it through support/environment.ts.
 *
 * Every cluster has a real node (hack/localenv/node.ts): workloads, the addon's
 * agents and, where a file installs it, the addon manager and the chart run as
 * pods of the image built here. The gateway most files test runs on the host
 * with the flags below (files that test the installed gateway install the chart).
 * At teardown, the suite fails if anything the nodes started or changed is
 * still on the machine.
 */
import { isDeepStrictEqual } from 'node:util';
import type { Environment } from '../hack/localenv/environment.ts';
import { startEnvironment } from '../hack/localenv/environment.ts';
import { hostFootprint } from '../hack/localenv/host-changes.ts';
import { e2eStateDir } from './support/environment.ts';

let env: Environment | undefined;
let footprintBefore: ReturnType<typeof hostFootprint> | undefined;

export async function globalSetup(): Promise<void> {
  const log = (line: string) => process.stderr.write(`[e2e env] ${line}\n`);
  footprintBefore = hostFootprint(e2eStateDir);
  // Debug logging, so the test that greps the gateway's log for credentials sees everything it writes;
  // exec credentials on, so the Dynamic credential test can run its plugin.
  env = await startEnvironment({
    stateDir: e2eStateDir,
    log,
    nodes: true,
    gatewayArgs: ['--log-level=debug', '--enable-exec-credentials'],
  });
}

export async function globalTeardown(): Promise<void> {
  await env?.stop();
  if (!footprintBefore) return;
  const now = hostFootprint(e2eStateDir);
  const left = Object.entries(now).filter(
    ([key, value]) => !isDeepStrictEqual(value, footprintBefore?.[key as keyof typeof now]),
  );
  if (now.processes.length > 0 || left.length > 0) {
    process.stderr.write(
      `[e2e env] the environment left changes on this machine:\n${JSON.stringify({ before: footprintBefore, now }, null, 2)}\n`,
    );
    process.exitCode = 1;
  }
}

/**
 * Global setup of the e2e suite (node --test-global-setup): one environment
 * for all test files, started before the first and stopped after the last.
 * Test files find it through support/environment.ts.
 */
import type { Environment } from '../hack/localenv/environment.ts';
import { startEnvironment } from '../hack/localenv/environment.ts';
import { e2eStateDir } from './support/environment.ts';

let env: Environment | undefined;

export async function globalSetup(): Promise<void> {
  const log = (line: string) => process.stderr.write(`[e2e env] ${line}\n`);
  // Debug logging, so the test that greps the gateway's log for credentials sees everything it writes;
  // exec credentials on, so the Dynamic credential test can run its plugin.
  env = await startEnvironment({
    stateDir: e2eStateDir,
    log,
    gatewayArgs: ['--log-level=debug', '--enable-exec-credentials'],
  });
}

export async function globalTeardown(): Promise<void> {
  await env?.stop();
}

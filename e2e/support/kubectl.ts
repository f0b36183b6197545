/** Runs the kubectl built by hack/ (same minor version as the apiservers). */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { binaryPath } from '../../hack/localenv/binaries.ts';

const run = promisify(execFile);

export async function kubectl(kubeconfig: string, ...args: string[]): Promise<string> {
  try {
    const { stdout } = await run(binaryPath('kubectl'), [`--kubeconfig=${kubeconfig}`, ...args], {
      maxBuffer: 32 * 1024 * 1024,
      timeout: 120_000,
    });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`kubectl ${args.join(' ')} failed: ${e.stderr?.trim() || e.message}`);
  }
}

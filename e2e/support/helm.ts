/** Runs the helm built by hack/ (hack/install-binaries.sh) against the e2e hub, as a user would. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { binaryPath } from '../../hack/localenv/binaries.ts';
import { environmentState } from './environment.ts';

const run = promisify(execFile);

export async function helm(...args: string[]): Promise<string> {
  try {
    const { stdout } = await run(
      binaryPath('helm'),
      [...args, `--kubeconfig=${environmentState().hub.kubeconfig}`],
      {
        timeout: 180_000,
        maxBuffer: 16 * 1024 * 1024,
      },
    );
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`helm ${args.join(' ')} failed: ${e.stderr?.trim() || e.message}`);
  }
}

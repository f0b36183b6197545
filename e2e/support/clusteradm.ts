/** Runs the clusteradm built by hack/ (against the same OCM) on the e2e hub, as a user would. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { binaryPath } from '../../hack/localenv/binaries.ts';
import { environmentState } from './environment.ts';

const run = promisify(execFile);

export async function clusteradm(...args: string[]): Promise<string> {
  try {
    const { stdout } = await run(
      binaryPath('clusteradm'),
      [...args, `--kubeconfig=${environmentState().hub.kubeconfig}`],
      { timeout: 60_000 },
    );
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`clusteradm ${args.join(' ')} failed: ${e.stderr?.trim() || e.message}`);
  }
}

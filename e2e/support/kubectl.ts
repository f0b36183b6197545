/** Runs the kubectl built by hack/ (same minor version as the apiservers). */
import { execFile, spawn } from 'node:child_process';
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

export interface KubectlOptions {
  /** Added to this process's environment (e.g. KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false for SPDY). */
  env?: Record<string, string>;
  /** Written to kubectl's stdin, which is then closed. */
  input?: string;
  /** Killed after this long (default 60 s); it then resolves with code -1. */
  timeoutMs?: number;
}

/** Runs kubectl to its end, failing or not: its exit code (-1 if killed) and output. */
export function kubectlResult(
  kubeconfig: string,
  args: string[],
  options: KubectlOptions = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(binaryPath('kubectl'), [`--kubeconfig=${kubeconfig}`, ...args], {
      env: { ...process.env, ...options.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      stdout += c;
    });
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      stderr += c;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr });
    });
    child.stdin.end(options.input ?? '');
  });
}

/** kubectlResult for a command expected to succeed: its stdout, or an error with its stderr. */
export async function kubectlRun(
  kubeconfig: string,
  args: string[],
  options: KubectlOptions = {},
): Promise<string> {
  const { code, stdout, stderr } = await kubectlResult(kubeconfig, args, options);
  if (code !== 0) throw new Error(`kubectl ${args.join(' ')} exited ${code}: ${stderr.trim()}`);
  return stdout;
}

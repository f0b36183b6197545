/**
 * Runs a client-go exec credential plugin (the `exec` data key of a Dynamic
 * credential Secret, or a kubeconfig user's `exec`) the way client-go does: the command with its args and
 * env on top of the gateway's environment, KUBERNETES_EXEC_INFO describing
 * the request, and an ExecCredential expected on stdout.
 *
 * Plugin output never reaches an error message, and so never the cluster's
 * healthyReason (readable by anyone who may get clustergateways) or the log:
 * stdout carries the token, and a failing plugin's stderr often echoes it
 * too (a curl error with the request, a debug dump). Failures say only how
 * the plugin ended: not found, exit status, signal, timeout, too much
 * output, or an ExecCredential that is not valid.
 */
import { type ExecFileException, execFile } from 'node:child_process';

export const defaultExecApiVersion = 'client.authentication.k8s.io/v1';

/** The clientcmd ExecConfig fields a plugin run depends on. */
export interface ExecConfig {
  apiVersion?: string;
  command: string;
  args?: string[];
  env?: { name: string; value: string }[];
  installHint?: string;
  provideClusterInfo?: boolean;
  interactiveMode?: string;
}

/** What the plugin may be told about the cluster (provideClusterInfo). */
export interface ExecClusterInfo {
  server?: string;
  caBundle?: string;
}

export type ExecResult = ({ token: string } | { certificate: string; privateKey: string }) & {
  /** From status.expirationTimestamp; undefined means valid until the Secret changes. */
  expiresAt?: number;
};

export interface RunExecOptions {
  timeoutMs?: number;
}

const maxBuffer = 1024 * 1024;
const defaultTimeoutMs = 30_000;

export async function runExecPlugin(
  config: ExecConfig,
  cluster: ExecClusterInfo = {},
  options: RunExecOptions = {},
): Promise<ExecResult> {
  const apiVersion = config.apiVersion || defaultExecApiVersion;
  const spec: Record<string, unknown> = { interactive: false };
  if (config.provideClusterInfo) {
    spec.cluster = {
      server: cluster.server ?? '',
      ...(cluster.caBundle
        ? { 'certificate-authority-data': Buffer.from(cluster.caBundle).toString('base64') }
        : {}),
    };
  }
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const { name, value } of config.env ?? []) env[name] = value;
  env.KUBERNETES_EXEC_INFO = JSON.stringify({ apiVersion, kind: 'ExecCredential', spec });

  const command = JSON.stringify(config.command);
  const timeoutMs = options.timeoutMs ?? defaultTimeoutMs;
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(
      config.command,
      config.args ?? [],
      { env, timeout: timeoutMs, maxBuffer, encoding: 'utf8' },
      // stderr is deliberately unused: see the file comment.
      (err, out) => {
        if (!err) return resolve(out);
        reject(new Error(describeFailure(command, config, err, timeoutMs)));
      },
    );
  });
  return parseExecCredential(stdout, apiVersion, command);
}

/** How the run ended, from the process's fate alone (never its output; see the file comment). */
function describeFailure(
  command: string,
  config: ExecConfig,
  err: ExecFileException,
  timeoutMs: number,
): string {
  const outputHint = '(its output is not shown: it may hold credentials)';
  if (err.code === 'ENOENT') {
    // installHint comes from the Secret (the admin), not from the plugin.
    const hint = config.installHint ? `: ${config.installHint}` : '';
    return `exec plugin ${command} not found${hint}`;
  }
  if (err.code === 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER') return `exec plugin ${command} wrote more than 1 MiB`;
  // execFile kills with SIGTERM on timeout and marks the error killed.
  if (err.killed && err.signal === 'SIGTERM') {
    return `exec plugin ${command} did not finish within ${timeoutMs / 1000}s and was killed`;
  }
  if (err.signal) return `exec plugin ${command} was terminated by signal ${err.signal} ${outputHint}`;
  if (typeof err.code === 'number')
    return `exec plugin ${command} exited with status ${err.code} ${outputHint}`;
  // A spawn error (EACCES, …): a fixed code from the system, no plugin output.
  return `exec plugin ${command} could not be started (${typeof err.code === 'string' ? err.code : 'unknown error'})`;
}

/** Validates stdout as an ExecCredential; errors describe its shape, never its content. */
export function parseExecCredential(stdout: string, apiVersion: string, command = 'plugin'): ExecResult {
  let cred: {
    apiVersion?: unknown;
    kind?: unknown;
    status?: {
      token?: unknown;
      clientCertificateData?: unknown;
      clientKeyData?: unknown;
      expirationTimestamp?: unknown;
    };
  };
  try {
    cred = JSON.parse(stdout);
  } catch {
    throw new Error(`exec plugin ${command} did not print an ExecCredential (stdout is not JSON)`);
  }
  if (typeof cred !== 'object' || cred === null) {
    throw new Error(`exec plugin ${command} did not print an ExecCredential (stdout is not a JSON object)`);
  }
  if (cred.apiVersion !== apiVersion) {
    // Not quoted: whatever the plugin printed there may be a credential.
    throw new Error(
      `exec plugin ${command} returned an ExecCredential whose apiVersion is not ${JSON.stringify(apiVersion)}`,
    );
  }
  const status = cred.status;
  if (typeof status !== 'object' || status === null) {
    throw new Error(`exec plugin ${command} returned an ExecCredential without status`);
  }
  let expiresAt: number | undefined;
  if (status.expirationTimestamp !== undefined && status.expirationTimestamp !== null) {
    expiresAt = Date.parse(String(status.expirationTimestamp));
    if (Number.isNaN(expiresAt)) {
      throw new Error(`exec plugin ${command} returned an invalid status.expirationTimestamp`);
    }
  }
  const expiry = expiresAt === undefined ? {} : { expiresAt };
  const { token, clientCertificateData: certificate, clientKeyData: privateKey } = status;
  if (typeof token === 'string' && token.trim()) return { token: token.trim(), ...expiry };
  if (typeof certificate === 'string' && certificate && typeof privateKey === 'string' && privateKey) {
    return { certificate, privateKey, ...expiry };
  }
  if (certificate || privateKey) {
    throw new Error(
      `exec plugin ${command} returned only one of status.clientCertificateData and status.clientKeyData`,
    );
  }
  throw new Error(
    `exec plugin ${command} returned neither status.token nor status.clientCertificateData and clientKeyData`,
  );
}

/**
 * Runs a client-go exec credential plugin (the `exec` data key of a Dynamic
 * credential Secret) the way client-go does: the command with its args and
 * env on top of the gateway's environment, KUBERNETES_EXEC_INFO describing
 * the request, and an ExecCredential expected on stdout.
 *
 * stdout carries the token, so it never reaches an error message or a log;
 * failures quote only the tail of stderr.
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
const stderrTail = 500;

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
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(
      config.command,
      config.args ?? [],
      { env, timeout: options.timeoutMs ?? 30_000, maxBuffer, encoding: 'utf8' },
      (err, out, stderr) => {
        if (!err) return resolve(out);
        reject(new Error(describeFailure(command, config, err, stderr)));
      },
    );
  });
  return parseExecCredential(stdout, apiVersion, command);
}

function describeFailure(
  command: string,
  config: ExecConfig,
  err: ExecFileException,
  stderr: string,
): string {
  if (err.code === 'ENOENT') {
    const hint = config.installHint ? `: ${config.installHint}` : '';
    return `exec plugin ${command} not found${hint}`;
  }
  if (err.code === 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER') return `exec plugin ${command} wrote more than 1 MiB`;
  if (err.killed || err.signal) {
    return `exec plugin ${command} did not finish (${err.signal ?? 'killed'}, timeout or signal)`;
  }
  const tail = stderr.trim().slice(-stderrTail);
  const status = typeof err.code === 'number' ? `exited with status ${err.code}` : `failed (${err.code})`;
  return `exec plugin ${command} ${status}${tail ? `: ${tail}` : ''}`;
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
    throw new Error(
      `exec plugin ${command} returned apiVersion ${JSON.stringify(cred.apiVersion ?? '')}, expected ${JSON.stringify(apiVersion)}`,
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

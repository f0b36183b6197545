/**
 * Credentials that change while a client runs, read before each request:
 *
 * - a token file (in a pod, the kubelet rotates the ServiceAccount token):
 *   read again at most once a minute, as client-go does; a failed read keeps
 *   the last token;
 * - a client-go exec plugin: run on first use and again when its credential
 *   expires or the server answered 401 (client-go's rules), one run at a time
 *   however many requests wait for it.
 *
 * A static credential needs none of this: the client then sends its options
 * as they are, with no per-request work.
 */
import { readFileSync } from 'node:fs';
import { type ExecClusterInfo, type ExecConfig, type ExecResult, runExecPlugin } from './exec-credential.ts';
import type { Connection } from './kubeconfig.ts';

/** What a request adds to its options: an Authorization header, or a client certificate. */
export interface RequestCredential {
  authorization?: string;
  cert?: string;
  key?: string;
}

export interface CredentialSource {
  get(): RequestCredential | Promise<RequestCredential>;
  /** The server rejected the credential (401): get a new one before the next request. */
  invalidate(): void;
}

export interface CredentialSourceOptions {
  now?: () => number;
  readFile?: (file: string) => string;
  runExec?: (config: ExecConfig, cluster: ExecClusterInfo) => Promise<ExecResult>;
  /** How often a token file is read again (client-go: 1 min). */
  tokenFileTtlMs?: number;
  /** How long before its expiry an exec credential is replaced. */
  execRefreshLeadMs?: number;
}

/** The source for a loaded connection, or undefined when its credential never changes. */
export function credentialSourceFor(
  connection: Connection,
  options: CredentialSourceOptions = {},
): CredentialSource | undefined {
  if (connection.exec) return new ExecCredentialSource(connection.exec, options);
  if (connection.tokenFile && connection.token) {
    return new TokenFileSource(connection.tokenFile, connection.token, options);
  }
  return undefined;
}

export class TokenFileSource implements CredentialSource {
  readonly #file: string;
  readonly #now: () => number;
  readonly #readFile: (file: string) => string;
  readonly #ttlMs: number;
  #token: string;
  #readAt: number;

  constructor(file: string, token: string, options: CredentialSourceOptions = {}) {
    this.#file = file;
    this.#token = token;
    this.#now = options.now ?? Date.now;
    this.#readFile = options.readFile ?? ((f) => readFileSync(f, 'utf8'));
    this.#ttlMs = options.tokenFileTtlMs ?? 60_000;
    this.#readAt = this.#now();
  }

  get(): RequestCredential {
    if (this.#now() - this.#readAt >= this.#ttlMs) this.#reread();
    return { authorization: `Bearer ${this.#token}` };
  }

  invalidate(): void {
    this.#reread();
  }

  #reread(): void {
    this.#readAt = this.#now();
    try {
      const token = this.#readFile(this.#file).trim();
      if (token) this.#token = token;
    } catch {
      // The kubelet swaps the file with a symlink rename; a read between the two steps fails: keep the last token.
    }
  }
}

export class ExecCredentialSource implements CredentialSource {
  readonly #exec: NonNullable<Connection['exec']>;
  readonly #now: () => number;
  readonly #run: NonNullable<CredentialSourceOptions['runExec']>;
  readonly #leadMs: number;
  #result: ExecResult | undefined;
  #running: Promise<ExecResult> | undefined;

  constructor(exec: NonNullable<Connection['exec']>, options: CredentialSourceOptions = {}) {
    this.#exec = exec;
    this.#now = options.now ?? Date.now;
    this.#run = options.runExec ?? ((config, cluster) => runExecPlugin(config, cluster));
    this.#leadMs = options.execRefreshLeadMs ?? 60_000;
  }

  get(): RequestCredential | Promise<RequestCredential> {
    const result = this.#result;
    if (result && (result.expiresAt === undefined || this.#now() < result.expiresAt - this.#leadMs)) {
      return toRequestCredential(result);
    }
    return this.#refresh().then(toRequestCredential, (err) => {
      // A plugin that fails while its last credential is still valid: keep using that one.
      if (result && result.expiresAt !== undefined && this.#now() < result.expiresAt) {
        return toRequestCredential(result);
      }
      throw err;
    });
  }

  invalidate(): void {
    this.#result = undefined;
  }

  #refresh(): Promise<ExecResult> {
    this.#running ??= this.#run(this.#exec.config, this.#exec.cluster)
      .then((result) => {
        this.#result = result;
        return result;
      })
      .finally(() => {
        this.#running = undefined;
      });
    return this.#running;
  }
}

function toRequestCredential(result: ExecResult): RequestCredential {
  return 'token' in result
    ? { authorization: `Bearer ${result.token}` }
    : { cert: result.certificate, key: result.privateKey };
}

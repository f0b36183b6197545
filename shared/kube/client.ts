/**
 * A small Kubernetes REST client over node:https.
 *
 * It speaks raw paths, so it serves CRDs, aggregated APIs, server-side apply
 * and watch streams alike, on one keep-alive agent. Kubeconfigs are read by
 * kubeconfig.ts, not by @kubernetes/client-node: loading that package costs
 * about 90 MB of RSS, and its generated API classes cover only built-in types
 * and go through fetch, which merges repeated headers.
 */
import https from 'node:https';
import { fixedProxyRoute, type ProxyDecision, type ProxyRoute } from '../transport/env-proxy.ts';
import { httpsAgentFor } from '../transport/proxy-agent.ts';
import { type CredentialSource, credentialSourceFor, type RequestCredential } from './credential-source.ts';
import { type Connection, loadDefault } from './kubeconfig.ts';
import { StatusError } from './status.ts';

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    namespace?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

export interface KubeList<T extends KubeObject = KubeObject> {
  metadata: { resourceVersion?: string; continue?: string };
  items: T[];
}

export interface WatchEvent<T extends KubeObject = KubeObject> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

export interface RequestOptions {
  body?: unknown;
  contentType?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** For request(): give up after this long without the whole answer (default requestTimeoutMs). */
  timeoutMs?: number;
}

/**
 * How long request() waits for a whole answer. The kube-apiserver ends any
 * request that is not long-running after 60 s (--request-timeout), so past
 * this only a dead connection (a half-open socket after a network change, a
 * frozen apiserver) is waited on; without a bound a controller's queue would
 * hang on it forever. Watches and raw streams (watch(), send()) have none.
 */
export const requestTimeoutMs = 75_000;

export interface ClientSettings {
  /**
   * How connections to the server are routed: through a proxy (HTTP CONNECT, TLS to the server
   * inside it) or direct. Absent: direct, whatever HTTPS_PROXY says, so a process opts in (the agent
   * passes proxyRouteFromEnvironment(process.env); the gateway and the manager pass nothing). A
   * kubeconfig's proxy-url wins over it, as in client-go.
   */
  route?: ProxyRoute;
}

export class KubeClient {
  readonly server: URL;
  readonly #options: https.RequestOptions;
  readonly #agent: https.Agent;
  /** Direct, or through which proxy (fixed for the client's life: its server is). */
  readonly route: ProxyDecision;

  /** Token files and exec plugins: consulted before each request; undefined for a static credential. */
  readonly #credentials: CredentialSource | undefined;

  private constructor(
    server: string,
    options: https.RequestOptions,
    credentials: CredentialSource | undefined,
    settings: ClientSettings,
  ) {
    this.server = new URL(server);
    this.route = settings.route?.(this.server) ?? { kind: 'direct', reason: 'no proxy configured' };
    this.#agent = httpsAgentFor(this.route, { keepAlive: true, maxSockets: 64 });
    this.#options = { ...options, agent: this.#agent };
    this.#credentials = credentials;
  }

  /** From a kubeconfig file, or the default chain (KUBECONFIG, in-cluster, ~/.kube/config; see kubeconfig.ts). */
  static async fromKubeconfig(path?: string, settings: ClientSettings = {}): Promise<KubeClient> {
    return KubeClient.fromLoadedConfig(loadDefault(path), settings);
  }

  /** From a loaded kubeconfig: its token file is read again and its exec plugin run as needed. */
  static fromLoadedConfig(connection: Connection, settings: ClientSettings = {}): KubeClient {
    return new KubeClient(
      connection.server,
      connection.options,
      credentialSourceFor(connection),
      connectionSettings(connection, settings),
    );
  }

  /** From a server URL and ready TLS/auth options (ca, cert, key, headers.authorization). */
  static fromConnection(
    server: string,
    options: https.RequestOptions,
    settings: ClientSettings = {},
  ): KubeClient {
    return new KubeClient(server, options, undefined, settings);
  }

  async request<T = unknown>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const timeoutMs = options.timeoutMs ?? requestTimeoutMs;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    let res: import('node:http').IncomingMessage;
    let text: string;
    try {
      res = await this.#send(method, path, { ...options, signal });
      text = await readAll(res);
    } catch (err) {
      if (timeout.aborted && !options.signal?.aborted) {
        throw new Error(
          `${method} ${path}: no complete answer from ${this.server.origin} within ${timeoutMs / 1000} s`,
          {
            cause: err,
          },
        );
      }
      throw err;
    }
    const status = res.statusCode ?? 0;
    if (status >= 400) throw StatusError.fromResponse(status, text, `${method} ${path}`);
    if (!text) return undefined as T;
    const type = String(res.headers['content-type'] ?? '');
    return (type.includes('json') ? JSON.parse(text) : text) as T;
  }

  get<T extends KubeObject = KubeObject>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  /** GET that returns undefined instead of throwing on 404. */
  async getOptional<T extends KubeObject = KubeObject>(path: string): Promise<T | undefined> {
    try {
      return await this.get<T>(path);
    } catch (err) {
      if (err instanceof StatusError && err.code === 404) return undefined;
      throw err;
    }
  }

  list<T extends KubeObject = KubeObject>(path: string): Promise<KubeList<T>> {
    return this.request<KubeList<T>>('GET', path);
  }

  create<T extends KubeObject = KubeObject>(path: string, body: KubeObject): Promise<T> {
    return this.request<T>('POST', path, { body });
  }

  /** Server-side apply: create or update the fields this manager owns. */
  apply<T extends KubeObject = KubeObject>(path: string, body: KubeObject, fieldManager: string): Promise<T> {
    const sep = path.includes('?') ? '&' : '?';
    return this.request<T>(
      'PATCH',
      `${path}${sep}fieldManager=${encodeURIComponent(fieldManager)}&force=true`,
      {
        body,
        contentType: 'application/apply-patch+yaml',
      },
    );
  }

  mergePatch<T extends KubeObject = KubeObject>(path: string, patch: unknown): Promise<T> {
    return this.request<T>('PATCH', path, { body: patch, contentType: 'application/merge-patch+json' });
  }

  async delete(path: string): Promise<void> {
    try {
      await this.request('DELETE', path);
    } catch (err) {
      if (!(err instanceof StatusError && err.code === 404)) throw err;
    }
  }

  /**
   * Streams watch events until the server ends the watch or `signal` aborts.
   * The caller resumes from the last resourceVersion (see informer.ts).
   */
  async *watch<T extends KubeObject = KubeObject>(
    path: string,
    signal?: AbortSignal,
  ): AsyncGenerator<WatchEvent<T>> {
    const sep = path.includes('?') ? '&' : '?';
    const res = await this.#send('GET', `${path}${sep}watch=true&allowWatchBookmarks=true`, {
      ...(signal ? { signal } : {}),
    });
    if ((res.statusCode ?? 0) >= 400) {
      throw StatusError.fromResponse(res.statusCode ?? 0, await readAll(res), `WATCH ${path}`);
    }
    res.setEncoding('utf8');
    let buffered = '';
    try {
      for await (const chunk of res) {
        buffered += chunk;
        let newline = buffered.indexOf('\n');
        while (newline >= 0) {
          const line = buffered.slice(0, newline).trim();
          buffered = buffered.slice(newline + 1);
          if (line) yield JSON.parse(line) as WatchEvent<T>;
          newline = buffered.indexOf('\n');
        }
      }
    } catch (err) {
      if (signal?.aborted) return;
      throw err;
    }
  }

  /** Raw request, for callers that stream or read status codes themselves. */
  send(method: string, path: string, options: RequestOptions = {}) {
    return this.#send(method, path, options);
  }

  close(): void {
    this.#agent.destroy();
  }

  #send(method: string, path: string, options: RequestOptions) {
    if (!this.#credentials) return this.#sendWith(method, path, options, undefined);
    const credential = this.#credentials.get();
    return credential instanceof Promise
      ? credential.then((c) => this.#sendWith(method, path, options, c))
      : this.#sendWith(method, path, options, credential);
  }

  #sendWith(
    method: string,
    path: string,
    options: RequestOptions,
    credential: RequestCredential | undefined,
  ) {
    // Keep the server's own path (a kubeconfig may point at a proxy URL such as
    // .../clustergateways/c1/proxy): paths are appended, not resolved.
    const base = this.server.pathname.replace(/\/+$/, '');
    const url = new URL(`${this.server.origin}${base}${path}`);
    const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
    if (credential?.authorization) headers.authorization = credential.authorization;
    let payload: string | undefined;
    if (options.body !== undefined) {
      payload = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
      headers['content-type'] = options.contentType ?? 'application/json';
      headers['content-length'] = String(Buffer.byteLength(payload));
    }
    return new Promise<import('node:http').IncomingMessage>((resolve, reject) => {
      const req = https.request(
        url,
        {
          ...this.#options,
          // An exec plugin's client certificate; the agent keeps one socket pool per certificate.
          ...(credential?.cert && credential.key ? { cert: credential.cert, key: credential.key } : {}),
          method,
          headers: { ...(this.#options.headers as Record<string, string>), ...headers },
          ...(options.signal ? { signal: options.signal } : {}),
        },
        (res) => {
          if (res.statusCode === 401 && credential) this.#credentials?.invalidate();
          resolve(res);
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }
}

/** A kubeconfig's proxy-url replaces the process's route (client-go: the cluster's proxy-url wins). */
export function connectionSettings(connection: Connection, settings: ClientSettings = {}): ClientSettings {
  return connection.proxyUrl ? { ...settings, route: fixedProxyRoute(connection.proxyUrl) } : settings;
}

async function readAll(res: AsyncIterable<Buffer | string>): Promise<string> {
  let text = '';
  for await (const chunk of res) text += chunk.toString();
  return text;
}

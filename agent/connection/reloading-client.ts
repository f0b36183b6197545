/**
 * A KubeClient that follows its credential files. OCM's registration agent
 * rotates the hub certificate in the mounted Secret (the kubelet swaps the
 * files), and the kubelet rotates the ServiceAccount token: before each use
 * the files are read again (a few small reads per renewal, cheaper and more
 * reliable than fs.watch, which misses the kubelet's symlink swaps on some
 * filesystems) and, when their content changed, a new connection pool is
 * built. The old pool is closed once its requests had time to finish.
 */
import type https from 'node:https';
import tls from 'node:tls';
import { connectionSettings, KubeClient } from '../../shared/kube/client.ts';
import type { ProxyRoute } from '../../shared/transport/env-proxy.ts';
import { type Connection, KubeconfigError } from './kubeconfig.ts';

export interface ReloadingClientOptions {
  load: () => Connection;
  /** Called when the credential changed after the first load (metrics, logs). */
  onReload?: () => void;
  /** Called with every connection a client is built from, the first one included. */
  onConnection?: (connection: Connection) => void;
  /** How long a replaced pool stays open for requests in flight. */
  drainMs?: number;
  /** Through which proxy the server is reached (HTTPS_PROXY/NO_PROXY); a kubeconfig's proxy-url wins. */
  route?: ProxyRoute;
}

export class ReloadingClient {
  readonly #o: ReloadingClientOptions;
  #current: { client: KubeClient; connection: Connection } | undefined;

  constructor(options: ReloadingClientOptions) {
    this.#o = options;
  }

  /** The client for the current credential; throws (KubeconfigError) when it cannot be read. */
  get(): KubeClient {
    const connection = this.#o.load();
    const current = this.#current;
    if (current && current.connection.fingerprint === connection.fingerprint) return current.client;
    // Files are swapped one by one: between the new certificate and the new key, the pair does not match.
    // Refuse it (the caller retries next round) rather than build a pool that fails every handshake.
    let secureContext: tls.SecureContext;
    try {
      secureContext = tls.createSecureContext(connection.options as tls.SecureContextOptions);
    } catch (err) {
      throw new KubeconfigError(
        `the credential read is not usable (a rotation in progress?): ${(err as Error).message}`,
      );
    }
    // One TLS context for every connection of this credential, instead of the PEM parsed per connection.
    const { ca: _ca, cert: _cert, key: _key, ...rest } = connection.options;
    const client = KubeClient.fromConnection(
      connection.server,
      {
        ...rest,
        secureContext, // passed through to tls.connect; missing from https.RequestOptions' type
      } as https.RequestOptions,
      connectionSettings(connection, this.#o.route ? { route: this.#o.route } : {}),
    );
    this.#current = { client, connection };
    this.#o.onConnection?.(connection);
    if (current) {
      setTimeout(() => current.client.close(), this.#o.drainMs ?? 30_000).unref();
      this.#o.onReload?.();
    }
    return client;
  }

  /** The connection last used, if any (e.g. to read the ServiceAccount in its token). */
  get connection(): Connection | undefined {
    return this.#current?.connection;
  }

  close(): void {
    this.#current?.client.close();
    this.#current = undefined;
  }
}

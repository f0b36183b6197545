/**
 * Which proxy configurations govern a cluster right now: the global one
 * (the ClusterGatewayProxyConfiguration named by --proxy-configuration-name
 * when it exists, else the --cluster-gateway-proxy-config file) and the
 * cluster's own, from one of two annotations on its Secret or
 * ManagedCluster:
 * - cluster.core.oam.dev/cluster-gateway-proxy-configuration: a whole
 *   configuration inline, as the Go original reads it;
 * - gateway.cluster.core.oam.dev/proxy-configuration: the name of a
 *   ClusterGatewayProxyConfiguration object (validated, with status).
 *
 * An edit that breaks a configuration never takes effect half-way: the last
 * valid version stays in force. A configuration that has never been valid
 * since the gateway started cannot be replaced by a guess (no rules would
 * pass the hub identity through where the author meant to map it, and no
 * local authorization could let through what it meant to stop), so the
 * clusters it governs refuse proxied requests with a 500 that says which
 * configuration to fix.
 *
 * A ManagedCluster's annotations may be written by the managed cluster's own
 * klusterlet, so what this store sees of them was screened first
 * (clusters/managedcluster-source.ts, merge.ts): no configuration with an
 * external exchanger and no name reference comes from a ManagedCluster, and
 * the gateway says what it ignored in the ClusterGateway annotation
 * `gateway.cluster.core.oam.dev/ignored-managedcluster-settings`, which this
 * store logs once per change.
 */
import { createHash } from 'node:crypto';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import {
  CONFIGURATION_KIND,
  CONFIGURATION_REFERENCE_ANNOTATION,
  describeProblems,
  IGNORED_SETTINGS_ANNOTATION,
  INLINE_CONFIGURATION_ANNOTATION,
  InvalidConfigurationError,
  type ProxyConfiguration,
} from './configuration.ts';
import { parseConfiguration } from './parse.ts';

/** What the store knows of one ClusterGatewayProxyConfiguration object (configuration-objects.ts). */
export interface ObjectState {
  /** The newest valid generation seen since the gateway started. */
  lastValid?: ProxyConfiguration;
  /** Problems of the current generation, when it is invalid. */
  error?: string;
}

/** The configurations that apply to one cluster, most specific first when evaluated. */
export interface ResolvedConfigurations {
  cluster?: ProxyConfiguration;
  global?: ProxyConfiguration;
}

/** The part of a ClusterTarget the store reads. */
export interface AnnotatedCluster {
  name: string;
  annotations: Record<string, string>;
}

export interface StoreLogger {
  info(fields: object, message: string): void;
  error(fields: object, message: string): void;
  warn?(fields: object, message: string): void;
}

export interface ConfigurationStoreOptions {
  /** The --cluster-gateway-proxy-config file, already validated. */
  file?: ProxyConfiguration;
  /** --proxy-configuration-name; '' when no object is global. */
  globalObjectName: string;
  /** False when CRD objects are not watched: then requests never wait for them. */
  watchesObjects: boolean;
  log?: StoreLogger;
}

interface InlineState {
  text: string;
  lastValid?: ProxyConfiguration;
  error?: string;
}

export class ProxyConfigurationStore {
  readonly #file: ProxyConfiguration | undefined;
  readonly #globalObjectName: string;
  readonly #watchesObjects: boolean;
  readonly #log: StoreLogger | undefined;
  readonly #objects = new Map<string, ObjectState>();
  readonly #inline = new Map<string, InlineState>();
  /** The ignored-settings notice last logged per cluster. */
  readonly #ignored = new Map<string, string>();
  #objectsSynced = false;

  constructor(options: ConfigurationStoreOptions) {
    this.#file = options.file;
    this.#globalObjectName = options.globalObjectName;
    this.#watchesObjects = options.watchesObjects;
    this.#log = options.log;
  }

  /** True once the configuration objects are listed (or not watched at all). */
  get synced(): boolean {
    return !this.#watchesObjects || this.#objectsSynced;
  }

  markObjectsSynced(): void {
    this.#objectsSynced = true;
  }

  setObject(name: string, state: ObjectState | undefined): void {
    if (state) this.#objects.set(name, state);
    else this.#objects.delete(name);
  }

  /** The cluster is gone: its inline configuration goes with it. */
  forgetCluster(name: string): void {
    this.#inline.delete(name);
    this.#ignored.delete(name);
  }

  /**
   * Evaluates the cluster's inline annotation if it changed, logging the
   * outcome once per change. Requests call it too, so a cluster event the
   * store missed cannot leave a stale configuration in force.
   */
  observeCluster(cluster: AnnotatedCluster): void {
    this.#noteIgnored(cluster);
    const text = cluster.annotations[INLINE_CONFIGURATION_ANNOTATION];
    const known = this.#inline.get(cluster.name);
    if (text === undefined) {
      if (known) {
        this.#inline.delete(cluster.name);
        this.#log?.info({ cluster: cluster.name }, 'cluster proxy configuration annotation removed');
      }
      return;
    }
    if (known?.text === text) return;
    const digest = createHash('sha256').update(text).digest('hex').slice(0, 16);
    const origin = `annotation ${INLINE_CONFIGURATION_ANNOTATION} of cluster "${cluster.name}"`;
    const next: InlineState = { text, ...(known?.lastValid ? { lastValid: known.lastValid } : {}) };
    try {
      next.lastValid = { ...parseConfiguration(text, origin), revision: digest };
      this.#log?.info(
        { cluster: cluster.name, rules: next.lastValid.rules.length },
        'cluster proxy configuration loaded from its annotation',
      );
    } catch (err) {
      if (!(err instanceof InvalidConfigurationError)) throw err;
      next.error = describeProblems(err.problems);
      this.#log?.error(
        { cluster: cluster.name, problems: err.problems, keeping: next.lastValid ? 'previous' : 'none' },
        next.lastValid
          ? 'invalid cluster proxy configuration annotation; the previous one stays in force'
          : 'invalid cluster proxy configuration annotation; proxied requests to the cluster are refused until it is fixed',
      );
    }
    this.#inline.set(cluster.name, next);
  }

  #noteIgnored(cluster: AnnotatedCluster): void {
    const notice = cluster.annotations[IGNORED_SETTINGS_ANNOTATION];
    if (notice === this.#ignored.get(cluster.name)) return;
    if (notice === undefined) {
      this.#ignored.delete(cluster.name);
      return;
    }
    this.#ignored.set(cluster.name, notice);
    const log = this.#log?.warn ?? this.#log?.error;
    log?.call(this.#log, { cluster: cluster.name, ignored: notice }, 'settings on a ManagedCluster ignored');
  }

  /** The configurations in force for `cluster`; throws a StatusError when they cannot be known. */
  resolve(cluster: AnnotatedCluster): ResolvedConfigurations {
    if (!this.synced) {
      throw new StatusError(
        failureStatus(503, 'the gateway has not loaded its proxy configurations yet; retry in a moment'),
      );
    }
    const resolved: ResolvedConfigurations = {};
    const global = this.#global();
    if (global) resolved.global = global;
    const own = this.#clusterConfiguration(cluster);
    if (own) resolved.cluster = own;
    return resolved;
  }

  #global(): ProxyConfiguration | undefined {
    const name = this.#globalObjectName;
    const state = name ? this.#objects.get(name) : undefined;
    if (!state) return this.#file;
    return usable(state, `the global ${CONFIGURATION_KIND} "${name}"`);
  }

  #clusterConfiguration(cluster: AnnotatedCluster): ProxyConfiguration | undefined {
    const reference = cluster.annotations[CONFIGURATION_REFERENCE_ANNOTATION];
    const inline = cluster.annotations[INLINE_CONFIGURATION_ANNOTATION];
    if (reference !== undefined && inline !== undefined) {
      throw misconfigured(
        `cluster "${cluster.name}" has both the ${CONFIGURATION_REFERENCE_ANNOTATION} and the ${INLINE_CONFIGURATION_ANNOTATION} annotation; keep one`,
      );
    }
    if (reference !== undefined) {
      const state = this.#objects.get(reference);
      const what = `${CONFIGURATION_KIND} "${reference}" (annotation ${CONFIGURATION_REFERENCE_ANNOTATION} of cluster "${cluster.name}")`;
      if (!state) {
        throw misconfigured(
          this.#watchesObjects
            ? `${what} does not exist`
            : `${what} cannot be read: this gateway does not watch ${CONFIGURATION_KIND} objects`,
        );
      }
      return usable(state, what);
    }
    if (inline === undefined) return undefined;
    this.observeCluster(cluster);
    const state = this.#inline.get(cluster.name);
    if (!state) return undefined;
    return usable(state, `the ${INLINE_CONFIGURATION_ANNOTATION} annotation of cluster "${cluster.name}"`);
  }
}

function usable(state: ObjectState, what: string): ProxyConfiguration {
  if (state.lastValid) return state.lastValid;
  throw misconfigured(
    `${what} is invalid and no valid version of it has been seen since the gateway started: ${state.error ?? 'unknown problem'}`,
  );
}

function misconfigured(message: string): StatusError {
  return new StatusError(failureStatus(500, `proxy configuration: ${message}`));
}

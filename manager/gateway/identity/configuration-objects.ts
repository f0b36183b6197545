/**
 * Watches ClusterGatewayProxyConfiguration objects (the CRD in crds/) and
 * feeds the store: each new generation is validated as a whole, the store
 * keeps the last valid one in force, and the verdict goes to the object's
 * status (object-status.ts) and to the log.
 *
 * Only a new uid or generation is evaluated: status writes (ours, or
 * another replica's) change neither, so replicas that disagree about the
 * last valid generation write once each and never ping-pong. A failed
 * status write is retried with backoff while the generation is current.
 */
import type { KubeClient, KubeObject } from '../../../shared/kube/client.ts';
import { Informer, type InformerClient, type InformerOptions } from '../../../shared/kube/informer.ts';
import { StatusError } from '../../../shared/kube/status.ts';
import {
  CONFIGURATION_KIND,
  CONFIGURATIONS_PATH,
  describeProblems,
  InvalidConfigurationError,
  type ProxyConfiguration,
} from './configuration.ts';
import type { ProxyConfigurationStore } from './configuration-store.ts';
import { type ConfigurationStatus, desiredStatus, type Verdict } from './object-status.ts';
import { validateSpec } from './validate.ts';

export interface ConfigurationObject extends KubeObject {
  spec?: unknown;
  status?: ConfigurationStatus;
}

export interface ObjectsLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

export interface ConfigurationObjectsOptions {
  client: InformerClient & Pick<KubeClient, 'mergePatch'>;
  store: ProxyConfigurationStore;
  log: ObjectsLogger;
  /** Passed to the informer (onError, backoff, timing in tests). */
  informer?: Omit<InformerOptions, 'path'>;
  now?: () => Date;
  /** First delay before retrying a failed status write; doubles up to a minute. */
  retryMs?: number;
}

interface Seen {
  uid: string;
  generation: number;
  lastValid?: { configuration: ProxyConfiguration; generation: number };
}

export class ConfigurationObjects {
  readonly informer: Informer<ConfigurationObject>;
  readonly #client: Pick<KubeClient, 'mergePatch'>;
  readonly #store: ProxyConfigurationStore;
  readonly #log: ObjectsLogger;
  readonly #now: () => Date;
  readonly #retryMs: number;
  readonly #seen = new Map<string, Seen>();
  readonly #retries = new Map<string, NodeJS.Timeout>();

  constructor(options: ConfigurationObjectsOptions) {
    this.#client = options.client;
    this.#store = options.store;
    this.#log = options.log;
    this.#now = options.now ?? (() => new Date());
    this.#retryMs = options.retryMs ?? 2000;
    this.informer = new Informer<ConfigurationObject>(options.client, {
      ...options.informer,
      path: CONFIGURATIONS_PATH,
    });
    this.informer.on({
      onAdd: (obj) => this.#evaluate(obj),
      onUpdate: (_old, obj) => this.#evaluate(obj),
      onDelete: (obj) => this.#forget(obj),
    });
    // The store answers requests only once the first list has been evaluated.
    void this.informer.synced.then(
      () => this.#store.markObjectsSynced(),
      () => {},
    );
  }

  start(): Promise<void> {
    return this.informer.start();
  }

  stop(): void {
    this.informer.stop();
    for (const timer of this.#retries.values()) clearTimeout(timer);
    this.#retries.clear();
  }

  #evaluate(obj: ConfigurationObject): void {
    const name = obj.metadata?.name ?? '';
    const uid = String(obj.metadata?.uid ?? '');
    const generation = Number(obj.metadata?.generation ?? 0);
    const seen = this.#seen.get(name);
    if (seen && seen.uid === uid && seen.generation === generation) return;
    const previous = seen?.uid === uid ? seen.lastValid : undefined;
    const origin = `${CONFIGURATION_KIND} "${name}" generation ${generation}`;
    const next: Seen = { uid, generation, ...(previous ? { lastValid: previous } : {}) };
    let verdict: Verdict;
    let error: string | undefined;
    try {
      const configuration = { ...validateSpec(obj.spec, origin), revision: `${uid}/${generation}` };
      next.lastValid = { configuration, generation };
      verdict = { generation, rules: configuration.rules.length, appliedGeneration: generation };
      this.#log.info(
        { configuration: name, generation, rules: configuration.rules.length },
        'proxy configuration loaded',
      );
    } catch (err) {
      if (!(err instanceof InvalidConfigurationError)) throw err;
      error = describeProblems(err.problems);
      verdict = {
        generation,
        problems: error,
        ...(previous ? { appliedGeneration: previous.generation } : {}),
      };
      this.#log.error(
        { configuration: name, generation, problems: err.problems, inForce: previous?.generation ?? 'none' },
        previous
          ? 'invalid proxy configuration; its previous generation stays in force'
          : 'invalid proxy configuration and no valid generation known; requests it governs are refused',
      );
    }
    this.#seen.set(name, next);
    this.#store.setObject(name, {
      ...(next.lastValid ? { lastValid: next.lastValid.configuration } : {}),
      ...(error ? { error } : {}),
    });
    this.#cancelRetry(name);
    this.#writeStatus(name, obj.status, verdict, 0);
  }

  #forget(obj: ConfigurationObject): void {
    const name = obj.metadata?.name ?? '';
    this.#seen.delete(name);
    this.#store.setObject(name, undefined);
    this.#cancelRetry(name);
    this.#log.info({ configuration: name }, 'proxy configuration deleted');
  }

  #writeStatus(
    name: string,
    current: ConfigurationStatus | undefined,
    verdict: Verdict,
    attempt: number,
  ): void {
    const status = desiredStatus(current, verdict, this.#now());
    if (!status) return;
    this.#client.mergePatch(`${CONFIGURATIONS_PATH}/${name}/status`, { status }).catch((err: unknown) => {
      if (err instanceof StatusError && err.code === 404) return; // deleted meanwhile
      const delay = Math.min(60_000, this.#retryMs * 2 ** attempt);
      this.#log.warn(
        { configuration: name, err: (err as Error).message, retryInMs: delay },
        'cannot write proxy configuration status',
      );
      const timer = setTimeout(() => {
        this.#retries.delete(name);
        if (this.#seen.get(name)?.generation !== verdict.generation) return;
        this.#writeStatus(name, this.informer.get(name)?.status, verdict, attempt + 1);
      }, delay);
      timer.unref();
      this.#retries.set(name, timer);
    });
  }

  #cancelRetry(name: string): void {
    const timer = this.#retries.get(name);
    if (timer) clearTimeout(timer);
    this.#retries.delete(name);
  }
}

/**
 * ExecRefresher: sits between the SecretSource and the registry when
 * --enable-exec-credentials is on, and turns a Dynamic Secret (an exec
 * plugin config) into a usable credential by running the plugin.
 *
 * Like the Go original (pkg/util/exec), a result is cached per cluster and
 * the plugin runs again shortly before status.expirationTimestamp (a
 * result without one stays until the Secret's exec config changes). A
 * failed run is retried with backoff; meanwhile a still-valid cached
 * credential keeps working, otherwise the failure is the cluster's problem.
 * The registry only sees the outcome, so a new token changes connectionKey
 * and the proxy's pools rebuild on the next request.
 */

import {
  type ExecClusterInfo,
  type ExecConfig,
  type ExecResult,
  runExecPlugin,
} from '../../../shared/kube/exec-credential.ts';
import type { Credential } from './cluster.ts';
import type { SecretClusterInfo, SecretSink } from './secret-source.ts';

export interface ExecRefresherOptions {
  /** Runs a plugin; tests may replace it, the default spawns the command. */
  run?: (config: ExecConfig, cluster: ExecClusterInfo) => Promise<ExecResult>;
  /** How long before expiry to refresh (client-go and the original: 1 min). */
  refreshLeadMs?: number;
  minBackoffMs?: number;
  maxBackoffMs?: number;
  now?: () => number;
  /** A run failed; the message never holds the credential. */
  onError?: (cluster: string, message: string) => void;
}

interface State {
  name: string;
  /** What a run depends on; a Secret update that changes it discards the cache. */
  key: string;
  info: SecretClusterInfo;
  result?: ExecResult;
  problem?: string;
  failures: number;
  timer?: NodeJS.Timeout;
}

export class ExecRefresher implements SecretSink {
  readonly #sink: SecretSink;
  readonly #states = new Map<string, State>();
  readonly #run: NonNullable<ExecRefresherOptions['run']>;
  readonly #leadMs: number;
  readonly #minBackoffMs: number;
  readonly #maxBackoffMs: number;
  readonly #now: () => number;
  readonly #onError: NonNullable<ExecRefresherOptions['onError']>;

  constructor(sink: SecretSink, options: ExecRefresherOptions = {}) {
    this.#sink = sink;
    this.#run = options.run ?? ((config, cluster) => runExecPlugin(config, cluster));
    this.#leadMs = options.refreshLeadMs ?? 60_000;
    this.#minBackoffMs = options.minBackoffMs ?? 5_000;
    this.#maxBackoffMs = options.maxBackoffMs ?? 300_000;
    this.#now = options.now ?? Date.now;
    this.#onError = options.onError ?? (() => {});
  }

  setSecret(name: string, info: SecretClusterInfo | undefined, version: number): void {
    const previous = this.#states.get(name);
    if (!info?.exec) {
      if (previous) this.#drop(previous);
      this.#sink.setSecret(name, info, version);
      return;
    }
    // Status annotations and labels change often; only what the plugin sees warrants a new run.
    const key = JSON.stringify([info.exec, info.address ?? '', info.caBundle ?? '']);
    if (previous?.key === key) {
      previous.info = info;
      this.#publish(previous);
      return;
    }
    if (previous) this.#drop(previous);
    const state: State = { name, key, info, failures: 0 };
    this.#states.set(name, state);
    this.#publish(state);
    void this.#refresh(state);
  }

  advance(resourceVersion: string): void {
    this.#sink.advance?.(resourceVersion);
  }

  /** Stops every timer (shutdown). Runs in flight finish but are ignored. */
  stop(): void {
    for (const state of this.#states.values()) clearTimeout(state.timer);
    this.#states.clear();
  }

  async #refresh(state: State): Promise<void> {
    const { exec, address, caBundle } = state.info;
    if (!exec) return;
    let result: ExecResult | undefined;
    let problem: string | undefined;
    try {
      result = await this.#run(exec, {
        ...(address ? { server: address } : {}),
        ...(caBundle ? { caBundle } : {}),
      });
    } catch (err) {
      problem = (err as Error).message;
    }
    // Deleted, changed or stopped while the plugin ran: this result belongs to nobody.
    if (this.#states.get(state.name) !== state) return;
    if (result) {
      state.result = result;
      delete state.problem;
      state.failures = 0;
      if (result.expiresAt !== undefined) {
        // Never sooner than the minimum backoff, so a plugin handing out very short-lived tokens cannot spin.
        this.#schedule(state, Math.max(result.expiresAt - this.#leadMs - this.#now(), this.#minBackoffMs));
      }
    } else {
      state.problem = problem ?? 'exec plugin failed';
      state.failures++;
      this.#onError(state.name, state.problem);
      if (state.result && !this.#valid(state.result)) delete state.result;
      const backoff = this.#minBackoffMs * 2 ** (state.failures - 1);
      this.#schedule(state, Math.min(backoff, this.#maxBackoffMs));
    }
    this.#publish(state);
  }

  #schedule(state: State, delayMs: number): void {
    clearTimeout(state.timer);
    state.timer = setTimeout(() => void this.#refresh(state), delayMs);
    state.timer.unref();
  }

  #drop(state: State): void {
    clearTimeout(state.timer);
    this.#states.delete(state.name);
  }

  #valid(result: ExecResult): boolean {
    return result.expiresAt === undefined || result.expiresAt > this.#now();
  }

  /** Hands the Secret to the registry with the plugin's outcome as its credential or problem. */
  #publish(state: State): void {
    const info: SecretClusterInfo = { ...state.info };
    delete info.credentialProblem;
    if (state.result && this.#valid(state.result)) {
      info.credential = dynamicCredential(state.result);
    } else {
      info.credential = { type: 'Dynamic' };
      info.credentialProblem =
        state.problem ??
        `waiting for exec plugin ${JSON.stringify(state.info.exec?.command)} to return a credential`;
    }
    // A plugin's new credential is this replica's own: it does not change the Secret's version.
    this.#sink.setSecret(state.name, info, state.info.resourceVersion);
  }
}

function dynamicCredential(result: ExecResult): Credential {
  return 'token' in result
    ? { type: 'Dynamic', token: result.token }
    : { type: 'Dynamic', certificate: result.certificate, privateKey: result.privateKey };
}

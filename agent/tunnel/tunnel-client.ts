/**
 * Keeps the agent's tunnel to the gateway up for as long as the agent runs:
 *
 * - connect: attach request to the hub with the current hub credential (attach-request.ts), then
 *   serve HTTP/2 on the connection (relay.ts);
 * - lost (connection closed, pings unanswered, the gateway's GOAWAY): reconnect after an
 *   exponential, jittered wait (backoff.ts), reset once a tunnel held for a while;
 * - the hub credential rotated: connect with the new one first, then drain the old tunnel
 *   (make-before-break: the gateway switches to the newest connection, open watches finish on the
 *   old one). A credential that expired without rotation closes the tunnel: it never outlives the
 *   certificate it was authorized with;
 * - stop: GOAWAY to the gateway, open streams get a grace period.
 */
import { X509Certificate } from 'node:crypto';
import { fixedProxyRoute, type ProxyRoute } from '../../shared/transport/env-proxy.ts';
import { type Connection, KubeconfigError } from '../connection/kubeconfig.ts';
import { AttachRefusedError, requestAttach } from './attach-request.ts';
import { Backoff, type BackoffOptions, defaultBackoff, sleep } from './backoff.ts';
import type { TunnelFailure, TunnelMetrics } from './metrics.ts';
import { Relay, type RelayEnd, type RelayOptions, type RelayTarget } from './relay.ts';

export interface TunnelClientOptions {
  cluster: string;
  /** Reads the hub kubeconfig and its files again: called before every attempt and check. */
  loadHub: () => Connection;
  /** The managed kube-apiserver to relay streams to. */
  target: () => RelayTarget;
  /** Through which proxy the hub is reached (HTTPS_PROXY/NO_PROXY); the hub kubeconfig's proxy-url wins. */
  route?: ProxyRoute;
  metrics: TunnelMetrics;
  log: {
    info(o: object, m: string): void;
    warn(o: object, m: string): void;
    debug(o: object, m: string): void;
  };
  backoff?: BackoffOptions;
  keepalive?: { intervalMs: number; timeoutMs: number };
  attachTimeoutMs?: number;
  /** How often the hub credential files are compared with the tunnel's. */
  credentialCheckMs?: number;
  /** A tunnel that held this long resets the backoff. */
  stableMs?: number;
  /** Open streams' time to finish when a tunnel drains (rotation, stop). */
  drainGraceMs?: number;
  /** The no-credential trust model's server for `impersonate` streams (relay.ts); absent: refused. */
  impersonation?: RelayOptions['impersonation'];
}

type Outcome =
  | { kind: 'ended'; end: RelayEnd }
  | { kind: 'rotated' }
  | { kind: 'expired' }
  | { kind: 'stopped' };

export class TunnelClient {
  readonly #o: TunnelClientOptions;

  constructor(options: TunnelClientOptions) {
    this.#o = options;
  }

  /** Runs until `signal` aborts; then drains the current tunnel and resolves. */
  async run(signal: AbortSignal): Promise<void> {
    const { metrics, log, cluster } = this.#o;
    const backoff = new Backoff(this.#o.backoff ?? defaultBackoff);
    const drainGraceMs = this.#o.drainGraceMs ?? 30_000;
    let current: Relay | undefined;
    while (!signal.aborted) {
      let relay: Relay;
      let hub: Connection;
      let target: RelayTarget;
      try {
        hub = this.#o.loadHub();
        target = this.#o.target();
        const route = hub.proxyUrl ? fixedProxyRoute(hub.proxyUrl) : this.#o.route;
        const upgraded = await requestAttach(hub, cluster, {
          timeoutMs: this.#o.attachTimeoutMs ?? 30_000,
          signal,
          ...(route ? { route } : {}),
        });
        relay = new Relay(upgraded.socket, upgraded.head, {
          target,
          metrics,
          log,
          ...(this.#o.keepalive ? { keepalive: this.#o.keepalive } : {}),
          ...(this.#o.impersonation ? { impersonation: this.#o.impersonation } : {}),
        });
      } catch (err) {
        if (signal.aborted) break;
        const reason = failureReason(err);
        metrics.attachFailed(reason);
        const wait = backoff.next();
        log.warn(
          { reason, err: err instanceof Error ? err.message : String(err), retryInMs: wait },
          'cannot attach the tunnel to the gateway',
        );
        await sleep(wait, signal);
        continue;
      }
      // The new tunnel is up: the previous one (a rotation) stops taking streams.
      current?.drain(drainGraceMs, 'rotated');
      current = relay;
      metrics.connected();
      const since = Date.now();
      log.info({ apiserver: `${target.host}:${target.port}` }, 'tunnel to the gateway connected');

      const outcome = await this.#watch(relay, hub, signal);
      if (outcome.kind === 'stopped') break;
      if (outcome.kind === 'rotated') {
        log.info({}, 'hub credential rotated: reconnecting with the new one, then draining the old tunnel');
        backoff.reset();
        continue;
      }
      if (outcome.kind === 'expired') {
        log.warn({}, 'hub client certificate expired and was not rotated: closing the tunnel');
        relay.drain(drainGraceMs, 'expired');
        metrics.disconnected('credential', false);
        current = undefined;
        await sleep(backoff.next(), signal);
        continue;
      }
      const { reason, detail } = outcome.end;
      metrics.disconnected(reason, false);
      if (reason === 'goaway') relay.drain(drainGraceMs, 'goaway');
      current = reason === 'goaway' ? relay : undefined; // a drained one still carries open streams
      if (Date.now() - since >= (this.#o.stableMs ?? 30_000)) backoff.reset();
      const wait = backoff.next();
      log.warn(
        { reason, ...(detail ? { gateway: detail } : {}), retryInMs: wait },
        'tunnel to the gateway ended: reconnecting',
      );
      await sleep(wait, signal);
    }
    if (current) {
      current.drain(drainGraceMs, 'agent stopping');
      await Promise.race([current.closed, sleep(drainGraceMs)]);
    }
  }

  /** Waits for the tunnel to end, the credential to change or expire, or the stop signal. */
  #watch(relay: Relay, hub: Connection, signal: AbortSignal): Promise<Outcome> {
    const notAfter = certificateNotAfter(hub);
    return new Promise((resolve) => {
      const done = (outcome: Outcome) => {
        clearInterval(check);
        signal.removeEventListener('abort', onAbort);
        resolve(outcome);
      };
      const onAbort = () => done({ kind: 'stopped' });
      signal.addEventListener('abort', onAbort, { once: true });
      void relay.ended.then((end) => done({ kind: 'ended', end }));
      const check = setInterval(() => {
        if (notAfter !== undefined && Date.now() >= notAfter) return done({ kind: 'expired' });
        let fingerprint: string;
        try {
          fingerprint = this.#o.loadHub().fingerprint;
        } catch {
          return; // mid-rotation or unreadable: the tunnel stays, the next check retries
        }
        if (fingerprint !== hub.fingerprint) done({ kind: 'rotated' });
      }, this.#o.credentialCheckMs ?? 10_000);
      check.unref();
    });
  }
}

function certificateNotAfter(hub: Connection): number | undefined {
  const cert = hub.options.cert;
  if (typeof cert !== 'string') return undefined;
  try {
    return Date.parse(new X509Certificate(cert).validTo);
  } catch {
    return undefined;
  }
}

function failureReason(err: unknown): TunnelFailure {
  if (err instanceof AttachRefusedError) {
    return err.code === 401 ? 'unauthorized' : err.code === 403 ? 'forbidden' : 'refused';
  }
  if (err instanceof KubeconfigError) return 'credential';
  return 'network';
}

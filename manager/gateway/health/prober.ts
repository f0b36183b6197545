/**
 * Keeps every cluster's status.healthy true to reality: it GETs /healthz of
 * each managed kube-apiserver (over the proxy's own connection pools, tunnel
 * included, so probing adds no connection of its own) and, in OCM mode,
 * also requires the ManagedCluster's Available condition. The result feeds
 * the registry, so `kubectl get clustergateways` and --reject-unhealthy
 * see it. An operator's unhealthy mark (health subresource) still wins
 * over what the prober finds, until it is cleared: see clusters/health-precedence.ts.
 *
 * Scheduling, so that 1,000 clusters cost what one does times 1,000 and no
 * more (docs/benchmarks-log.md, "Scale"):
 * - each cluster has its own due time: the first probe as soon as the
 *   cluster is seen, the second at a random point of the interval, then
 *   every interval ± `jitter`. Probes are spread over the interval instead
 *   of fired in rounds, which stalled proxied requests at every round;
 * - at most `concurrency` probes run at once, and at most
 *   `maxProbesPerSecond` start per second: with more clusters than that
 *   rate allows per interval, each is probed less often (a log line says
 *   so) instead of the prober taking the CPU from the proxy;
 * - a deleted cluster is forgotten (its schedule, and its pool when the
 *   pools are the prober's own); a probe that finishes after the deletion
 *   reports nothing;
 * - a probe keeps no connection open: it takes an idle one the proxy keeps
 *   warm, else opens one that closes after the answer. A kept TLS
 *   connection costs about 100 KB of RSS, so one per cluster would make
 *   memory grow with the cluster count; the rate limit bounds what the
 *   handshakes cost instead: 2.0 ms of CPU each on the bench machine,
 *   of which 1.7 ms is the resumed TLS connection itself (`npm run
 *   bench:probe`), the request being written by hand (healthz-once.ts)
 *   and no TLS context built for it (shared/transport/one-shot-tls.ts).
 * - no probe runs before every source has listed its clusters
 *   (`sourcesSynced`), and a cluster whose endpoint, credential or problem
 *   changes is probed again at once: a verdict is never about data that
 *   was incomplete or has since changed for longer than one probe takes.
 * Until its first probe a cluster is neither healthy nor unhealthy but
 * unknown (clusters/health-precedence.ts), which --reject-unhealthy does not reject.
 */

import type { Agent } from 'node:http';
import type { OutgoingHttpHeaders } from 'node:http2';
import type { Http2Sessions } from '../../../shared/transport/http2-sessions.ts';
import type { Upstream } from '../../../shared/transport/upstream.ts';
import { encodeTunnelIdentity } from '../../../shared/tunnel/identity.ts';
import type { ClusterEvent, ClusterHealth, ClusterTarget } from '../clusters/cluster.ts';
import type { ClusterPools } from '../proxy/cluster-pools.ts';
import { getHealthz } from './healthz-once.ts';

/**
 * Who a probe of a no-credential cluster asks as. Its agent forwards only as an impersonated hub user
 * and never lends its own identity (shared/tunnel/identity.ts), so a probe without one is refused
 * (403) and such a cluster would never read healthy. This user holds no permission anywhere: on the
 * managed cluster it is any authenticated user, whom Kubernetes' default RBAC
 * (system:public-info-viewer) allows GET /healthz and nothing else of use.
 */
export const proberIdentity = 'cluster-gateway:health-prober';
const proberIdentityHeaders: readonly string[] = (() => {
  const out: string[] = [];
  encodeTunnelIdentity(out, { name: proberIdentity, groups: [], extra: {} });
  return out;
})();

export interface ProberOptions {
  /** Every cluster now; read at start and once per interval. */
  list: () => ClusterTarget[];
  /** The cluster as it is now (a rotated credential), read when its probe starts; defaults to the last list(). */
  get?: (name: string) => ClusterTarget | undefined;
  /**
   * Whether every source of clusters has completed its initial list. No probe runs before: a
   * cluster known from its Secret alone, while the ManagedCluster that gives its URL is still
   * being listed, would read unhealthy ("no endpoint") until its next probe (docs/benchmarks-log.md,
   * "Scale": 25 of 5,000 after a restart, for 200 s). Default: always.
   */
  sourcesSynced?: () => boolean;
  /** Cluster additions and deletions as they happen, so a new cluster is probed at once. */
  subscribe?: (listener: (event: ClusterEvent) => void) => () => void;
  setHealth: (name: string, health: ClusterHealth) => void;
  /** The ManagedCluster's own view, when the cluster is an OCM ManagedCluster. */
  managedClusterHealth?: (name: string) => ClusterHealth | undefined;
  pools: ClusterPools;
  /** The pools are the proxy's too: the proxy forgets deleted clusters and closes them, not the prober. */
  sharedPools?: boolean;
  intervalMs: number;
  timeoutMs?: number;
  /** Probes in flight at most (default 32). */
  concurrency?: number;
  /** Probes started per second at most (default: no limit). */
  maxProbesPerSecond?: number;
  /** Each interval is intervalMs × (1 ± jitter) (default 0.1). */
  jitter?: number;
  userAgent?: string;
  log?: { debug(o: object, m: string): void; info?(o: object, m: string): void };
  /** For tests. */
  now?: () => number;
  random?: () => number;
}

interface Schedule {
  name: string;
  target: ClusterTarget;
  /** When the next probe is due (ms, `now()` clock). */
  due: number;
  probed: boolean;
  /** In the run queue or probing now: not queued again. */
  busy: boolean;
  last?: ClusterHealth;
}

export class HealthProber {
  readonly #o: ProberOptions;
  readonly #now: () => number;
  readonly #random: () => number;
  readonly #concurrency: number;
  readonly #jitter: number;
  readonly #tickMs: number;
  readonly #schedules = new Map<string, Schedule>();
  /** The last tunnel error logged per cluster (healthyReason does not carry it). */
  readonly #tunnelErrors = new Map<string, string>();
  #queue: Schedule[] = [];
  #queueHead = 0;
  /** Queued entries of clusters deleted since the queue was last compacted. */
  #deadQueued = 0;
  #inflight = 0;
  /** Rate limit: probes started in the current one-second window. */
  #windowStart = 0;
  #windowCount = 0;
  #stretchedLogged = false;
  #timer: NodeJS.Timeout | undefined;
  #nextListAt = 0;
  #unsubscribe: (() => void) | undefined;
  #stopped = false;

  constructor(options: ProberOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
    this.#random = options.random ?? Math.random;
    this.#concurrency = Math.max(1, options.concurrency ?? 32);
    this.#jitter = Math.min(0.5, Math.max(0, options.jitter ?? 0.1));
    // Fine enough to spread probes over the interval, coarse enough to cost nothing when idle.
    this.#tickMs = Math.min(1000, Math.max(20, Math.floor(options.intervalMs / 20)));
  }

  start(): void {
    this.#unsubscribe = this.#o.subscribe?.((event) => {
      if (event.type === 'DELETED') this.#forget(event.cluster.name);
      else this.#track(event.cluster);
    });
    this.tick();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#unsubscribe?.();
    if (!this.#o.sharedPools) this.#o.pools.close();
  }

  /** Clusters the prober tracks now (for tests and metrics). */
  get tracked(): number {
    return this.#schedules.size;
  }

  /** Of those, the ones not probed yet (metrics: a restart or a mass registration is done when this is 0). */
  get unprobed(): number {
    let n = 0;
    for (const s of this.#schedules.values()) if (!s.probed) n++;
    return n;
  }

  /** One scheduling step: re-list when due, queue due probes, start what the limits allow. Public for tests. */
  tick(): void {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    const now = this.#now();
    if (now >= this.#nextListAt) {
      this.#reconcile(this.#o.list());
      this.#nextListAt = now + this.#o.intervalMs;
    }
    if (this.#o.sourcesSynced && !this.#o.sourcesSynced()) {
      // Clusters seen meanwhile are tracked (list, subscribe) and probed once the lists are complete.
      this.#timer = setTimeout(() => this.tick(), Math.min(this.#tickMs, 100));
      this.#timer.unref?.();
      return;
    }
    for (const s of this.#schedules.values()) {
      if (!s.busy && s.due <= now) {
        s.busy = true;
        this.#queue.push(s);
      }
    }
    this.#pump();
    this.#timer = setTimeout(() => this.tick(), this.#tickMs);
    this.#timer.unref?.();
  }

  #reconcile(targets: ClusterTarget[]): void {
    const seen = new Set<string>();
    for (const target of targets) {
      seen.add(target.name);
      this.#track(target);
    }
    for (const name of this.#schedules.keys()) if (!seen.has(name)) this.#forget(name);
  }

  #track(target: ClusterTarget): void {
    const s = this.#schedules.get(target.name);
    if (s) {
      // What the last verdict was about changed (an endpoint, a credential, a problem fixed or
      // found): probe again at once rather than show a stale verdict for up to an interval.
      if (s.probed && !s.busy && differs(s.target, target)) s.due = this.#now();
      s.target = target;
    } else {
      this.#schedules.set(target.name, {
        name: target.name,
        target,
        due: this.#now(),
        probed: false,
        busy: false,
      });
    }
  }

  #forget(name: string): void {
    const s = this.#schedules.get(name);
    if (!s) return;
    this.#schedules.delete(name);
    if (!this.#o.sharedPools) this.#o.pools.forget(name);
    // A queued entry is skipped by #pump; when many are (a mass deletion behind a rate-limited
    // queue), drop them now rather than keep their targets (credentials included) until their turn.
    if (s.busy && ++this.#deadQueued > 1024 && this.#deadQueued * 2 > this.#queue.length - this.#queueHead) {
      this.#queue = this.#queue.slice(this.#queueHead).filter((q) => this.#schedules.get(q.name) === q);
      this.#queueHead = 0;
      this.#deadQueued = 0;
    }
  }

  #pump(): void {
    while (this.#inflight < this.#concurrency && this.#queueHead < this.#queue.length) {
      const s = this.#queue[this.#queueHead] as Schedule;
      const live = this.#schedules.get(s.name) === s; // else deleted while queued: dropped, no token spent
      if (live && !this.#takeRateToken()) return;
      this.#queueHead++;
      if (this.#queueHead > 1024 && this.#queueHead * 2 > this.#queue.length) {
        this.#queue.splice(0, this.#queueHead);
        this.#queueHead = 0;
      }
      if (!live) continue;
      this.#inflight++;
      void this.#run(s).finally(() => {
        this.#inflight--;
        if (!this.#stopped) this.#pump();
      });
    }
  }

  #takeRateToken(): boolean {
    const max = this.#o.maxProbesPerSecond;
    if (!max) return true;
    const now = this.#now();
    if (now - this.#windowStart >= 1000) {
      this.#windowStart = now;
      this.#windowCount = 0;
    }
    if (this.#windowCount >= max) {
      this.#logStretched(max);
      return false;
    }
    this.#windowCount++;
    return true;
  }

  #logStretched(max: number): void {
    if (this.#stretchedLogged) return;
    this.#stretchedLogged = true;
    const clusters = this.#schedules.size;
    this.#o.log?.info?.(
      { clusters, maxProbesPerSecond: max, intervalSeconds: this.#o.intervalMs / 1000 },
      `more clusters than ${max} probes per second cover in one interval: each is probed about every ${Math.ceil(clusters / max)} s`,
    );
  }

  async #run(s: Schedule): Promise<void> {
    const target = this.#o.get?.(s.name) ?? s.target;
    s.target = target;
    let health: ClusterHealth;
    try {
      health = await this.probe(target);
    } catch (err) {
      // A bug, not the cluster's state; still a result, so the cluster keeps its place in the schedule.
      health = { healthy: false, reason: `probe failed: ${(err as Error).message}` };
    }
    if (this.#stopped || this.#schedules.get(s.name) !== s) return; // deleted meanwhile: report nothing
    const interval = this.#o.intervalMs;
    // The first probe of a cluster places it at a random point of the interval; later ones keep their place ± jitter.
    // A probe of a target that changed while it ran is repeated at once (see #track).
    s.due = differs(this.#o.get?.(s.name) ?? s.target, target)
      ? this.#now()
      : s.probed
        ? this.#now() + interval * (1 + this.#jitter * (2 * this.#random() - 1))
        : this.#now() + interval * this.#random();
    s.probed = true;
    s.busy = false;
    const previous = s.last;
    s.last = health;
    if (previous?.healthy !== health.healthy || previous?.reason !== health.reason) {
      this.#o.log?.debug({ cluster: s.name, ...health }, 'cluster health changed');
    }
    this.#o.setHealth(s.name, health);
  }

  async probe(target: ClusterTarget): Promise<ClusterHealth> {
    const managed = this.#o.managedClusterHealth?.(target.name);
    if (managed && !managed.healthy) {
      return { healthy: false, reason: `ManagedCluster not available: ${managed.reason ?? 'unknown'}` };
    }
    if (target.problem) return { healthy: false, reason: target.problem };
    const health = await this.#reach(target);
    if (
      health.healthy ||
      target.endpoint?.type !== 'ClusterProxy' ||
      !health.reason?.startsWith('unreachable')
    ) {
      return health;
    }
    // Through a tunnel, the network error is about whatever the route named (a replica's address from a Lease,
    // a stream the agent failed to open): public healthyReason says which path failed, never the error that
    // would tell an open port from a closed one; operators find it in the log.
    // Logged when it changes, not at every probe.
    if (this.#tunnelErrors.get(target.name) !== health.reason) {
      if (this.#tunnelErrors.size > 10_000) this.#tunnelErrors.clear();
      this.#tunnelErrors.set(target.name, health.reason);
      this.#o.log?.info?.(
        { cluster: target.name, err: health.reason },
        'cluster unreachable through its tunnel',
      );
    }
    return {
      healthy: false,
      reason: 'unreachable through its agent tunnel (the gateway log has the details)',
    };
  }

  async #reach(target: ClusterTarget): Promise<ClusterHealth> {
    const upstream = this.#o.pools.get(target);
    if (typeof upstream === 'string') return { healthy: false, reason: upstream };
    const timeoutMs = this.#o.timeoutMs ?? 5000;
    const identity =
      target.endpoint?.type === 'ClusterProxy' && target.endpoint.trustModel === 'no-credential'
        ? proberIdentityHeaders
        : undefined;
    // The proxy's HTTP/2 session is open (the cluster has traffic): the probe is one more stream on it.
    if (upstream.http2?.hasFreeSession())
      return probeOverHttp2(upstream, upstream.http2, timeoutMs, this.#o.userAgent, identity);
    const userAgent = this.#o.userAgent ?? 'cluster-gateway';
    const path = `${upstream.basePath}/healthz`;
    // A connection kept for every cluster costs about 100 KB of RSS each (docs/benchmarks-log.md, "Scale"):
    // a probe reuses one the proxy keeps warm, and otherwise opens one just for itself, makes its one
    // request by hand (healthz-once.ts: a third of the CPU of http.request) and closes it. Such a
    // connection is one-shot: it builds no TLS context of its own and keeps none
    // (shared/transport/tls-context.ts, one-shot-tls.ts).
    if (!hasIdleSocket(upstream.agent)) {
      return upstream
        .connectOnce()
        .then((socket) =>
          getHealthz(socket, {
            path,
            host: upstream.hostHeader,
            userAgent,
            timeoutMs,
            ...(upstream.authorization ? { authorization: upstream.authorization } : {}),
            ...(identity ? { extraHeaders: identity } : {}),
          }),
        )
        .then(
          (answer) => verdict(answer.status, answer.body),
          (err: Error) => ({ healthy: false, reason: `unreachable: ${err.message}` }),
        );
    }
    return new Promise<ClusterHealth>((resolve) => {
      const headers: Record<string, string> = { host: upstream.hostHeader, 'user-agent': userAgent };
      if (upstream.authorization) headers.authorization = upstream.authorization;
      for (let i = 0; identity && i + 1 < identity.length; i += 2) headers[identity[i]!] = identity[i + 1]!;
      const req = upstream.request(
        {
          agent: upstream.agent,
          hostname: upstream.hostname,
          port: upstream.port,
          method: 'GET',
          path,
          headers,
          timeout: timeoutMs,
        },
        (res) => {
          readHealthz(res, () => res.statusCode ?? 0, resolve);
          res.on('error', (err) => resolve({ healthy: false, reason: `unreachable: ${err.message}` }));
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs / 1000}s`)));
      req.on('error', (err) => resolve({ healthy: false, reason: `unreachable: ${err.message}` }));
      req.end();
    });
  }
}

/** Whether a probe of `a` says nothing about `b`: another endpoint or credential, or another problem. */
function differs(a: ClusterTarget, b: ClusterTarget): boolean {
  return a.connectionKey !== b.connectionKey || a.problem !== b.problem;
}

/** GET /healthz as a stream of an open HTTP/2 session. */
function probeOverHttp2(
  upstream: Upstream,
  sessions: Http2Sessions,
  timeoutMs: number,
  userAgent = 'cluster-gateway',
  identity?: readonly string[],
): Promise<ClusterHealth> {
  const headers: OutgoingHttpHeaders = {
    ':method': 'GET',
    ':scheme': 'https',
    ':authority': upstream.hostHeader,
    ':path': `${upstream.basePath}/healthz`,
    'user-agent': userAgent,
    ...(upstream.authorization ? { authorization: upstream.authorization } : {}),
  };
  for (let i = 0; identity && i + 1 < identity.length; i += 2)
    headers[identity[i]!.toLowerCase()] = identity[i + 1]!;
  return new Promise<ClusterHealth>((resolve) => {
    sessions.request(headers, true, (result) => {
      if ('error' in result)
        return resolve({ healthy: false, reason: `unreachable: ${result.error.message}` });
      if ('http1' in result)
        return resolve({ healthy: false, reason: 'unreachable: the HTTP/2 session went away' });
      const { stream } = result;
      let status = 0;
      stream.setTimeout(timeoutMs, () => stream.destroy(new Error(`no answer within ${timeoutMs / 1000}s`)));
      stream.once('response', (h) => {
        status = Number(h[':status']);
      });
      readHealthz(stream, () => status, resolve);
      stream.once('error', (err) => resolve({ healthy: false, reason: `unreachable: ${err.message}` }));
    });
  });
}

/** The verdict of a /healthz answer read from a stream (HTTP/1.1 response or HTTP/2 stream). */
function readHealthz(
  body: NodeJS.ReadableStream,
  status: () => number,
  resolve: (health: ClusterHealth) => void,
): void {
  let text = '';
  body.setEncoding('utf8');
  body.on('data', (chunk: string) => {
    if (text.length < 512) text += chunk;
  });
  body.once('end', () => resolve(verdict(status(), text)));
}

/** 200 is healthy; anything else is not, and says its status and the start of its body. */
function verdict(status: number, body: string): ClusterHealth {
  return status === 200
    ? { healthy: true }
    : { healthy: false, reason: `/healthz returned ${status}: ${body.trim().slice(0, 200)}` };
}

/** Whether the agent holds an idle keep-alive connection a probe can take. */
function hasIdleSocket(agent: Agent): boolean {
  for (const list of Object.values(agent.freeSockets)) if (list?.length) return true;
  return false;
}

/**
 * Keeps every cluster's status.healthy true to reality: each interval it
 * GETs /healthz of each managed kube-apiserver (over the same kind of
 * connection a proxied request uses, tunnel included) and, in OCM mode,
 * also requires the ManagedCluster's Available condition. The result feeds
 * the registry, so `kubectl get clustergateways` and --reject-unhealthy
 * see it. An operator's unhealthy mark (health subresource) still wins
 * over what the prober finds, until it is cleared: see precedence.ts.
 */
import type { ClusterHealth, ClusterTarget } from '../clusters/cluster.ts';
import type { ConnectionPools } from '../proxy/pool.ts';

export interface ProberOptions {
  list: () => ClusterTarget[];
  setHealth: (name: string, health: ClusterHealth) => void;
  /** The ManagedCluster's own view, when the cluster is an OCM ManagedCluster. */
  managedClusterHealth?: (name: string) => ClusterHealth | undefined;
  pools: ConnectionPools;
  intervalMs: number;
  timeoutMs?: number;
  userAgent?: string;
  log?: { debug(o: object, m: string): void };
}

export class HealthProber {
  readonly #o: ProberOptions;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  /** Last result per cluster: target.health may show an operator's mark instead (precedence.ts). */
  readonly #last = new Map<string, ClusterHealth>();

  constructor(options: ProberOptions) {
    this.#o = options;
  }

  start(): void {
    const loop = async () => {
      if (this.#stopped) return;
      await this.probeAll();
      if (!this.#stopped) this.#timer = setTimeout(loop, this.#o.intervalMs);
    };
    void loop();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#o.pools.close();
  }

  async probeAll(): Promise<void> {
    const targets = this.#o.list();
    const names = new Set(targets.map((t) => t.name));
    for (const name of this.#last.keys()) if (!names.has(name)) this.#last.delete(name);
    await Promise.all(
      targets.map(async (target) => {
        const health = await this.probe(target);
        const previous = this.#last.get(target.name);
        this.#last.set(target.name, health);
        if (previous?.healthy !== health.healthy || previous?.reason !== health.reason) {
          this.#o.log?.debug({ cluster: target.name, ...health }, 'cluster health changed');
        }
        this.#o.setHealth(target.name, health);
      }),
    );
  }

  async probe(target: ClusterTarget): Promise<ClusterHealth> {
    const managed = this.#o.managedClusterHealth?.(target.name);
    if (managed && !managed.healthy) {
      return { healthy: false, reason: `ManagedCluster not available: ${managed.reason ?? 'unknown'}` };
    }
    if (target.problem) return { healthy: false, reason: target.problem };
    const upstream = this.#o.pools.get(target);
    if (typeof upstream === 'string') return { healthy: false, reason: upstream };
    const timeoutMs = this.#o.timeoutMs ?? 5000;
    return new Promise<ClusterHealth>((resolve) => {
      const headers: Record<string, string> = {
        host: upstream.hostHeader,
        'user-agent': this.#o.userAgent ?? 'cluster-gateway',
      };
      if (upstream.authorization) headers.authorization = upstream.authorization;
      const req = upstream.request(
        {
          agent: upstream.agent,
          hostname: upstream.hostname,
          port: upstream.port,
          method: 'GET',
          path: `${upstream.basePath}/healthz`,
          headers,
          timeout: timeoutMs,
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            if (body.length < 512) body += chunk;
          });
          res.on('end', () => {
            if (res.statusCode === 200) resolve({ healthy: true });
            else
              resolve({
                healthy: false,
                reason: `/healthz returned ${res.statusCode}: ${body.trim().slice(0, 200)}`,
              });
          });
          res.on('error', (err) => resolve({ healthy: false, reason: `unreachable: ${err.message}` }));
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs / 1000}s`)));
      req.on('error', (err) => resolve({ healthy: false, reason: `unreachable: ${err.message}` }));
      req.end();
    });
  }
}

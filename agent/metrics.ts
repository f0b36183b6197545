/**
 * The agent's Prometheus metrics, in the text exposition format, written by
 * hand. prom-client would do it, but importing it costs about 18 MB of RSS
 * (measured: a bare Node 24 HTTP server 47 MB, with prom-client 65 MB), a
 * quarter of the agent's whole budget, for a handful of counters.
 */

export type LeaseSide = 'hub' | 'spoke';

export class AgentMetrics {
  readonly #renewals = new Map<string, number>();
  readonly #failures = new Map<string, number>();
  readonly #skipped = new Map<string, number>();
  readonly #reloads = new Map<string, number>();
  readonly #lastRenew = new Map<LeaseSide, number>();
  readonly #certificateNotAfter = new Map<LeaseSide, number>();
  #healthy = 0;
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  renewed(side: LeaseSide): void {
    inc(this.#renewals, side);
    this.#lastRenew.set(side, this.#now());
  }

  failed(side: LeaseSide, reason: string): void {
    inc(this.#failures, `${side}\u0000${reason}`);
  }

  skipped(reason: string): void {
    inc(this.#skipped, reason);
  }

  credentialReloaded(side: LeaseSide): void {
    inc(this.#reloads, side);
  }

  /** When the client certificate in use expires (seconds since the epoch); undefined: none in use. */
  setCertificateNotAfter(side: LeaseSide, epochSeconds: number | undefined): void {
    if (epochSeconds === undefined) this.#certificateNotAfter.delete(side);
    else this.#certificateNotAfter.set(side, epochSeconds);
  }

  setHealthy(healthy: boolean): void {
    this.#healthy = healthy ? 1 : 0;
  }

  /** Seconds since the last successful renewal, or undefined if none yet. */
  lastRenewAgeSeconds(side: LeaseSide): number | undefined {
    const at = this.#lastRenew.get(side);
    return at === undefined ? undefined : (this.#now() - at) / 1000;
  }

  render(): string {
    const out: string[] = [];
    const family = (name: string, type: string, help: string) =>
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);

    family(
      'cluster_gateway_agent_lease_renewals_total',
      'counter',
      'Successful Lease renewals (or creations), by side: hub heartbeat or spoke Lease.',
    );
    for (const side of ['hub', 'spoke'] as const) {
      out.push(
        `cluster_gateway_agent_lease_renewals_total{lease="${side}"} ${this.#renewals.get(side) ?? 0}`,
      );
    }
    family(
      'cluster_gateway_agent_lease_renewal_failures_total',
      'counter',
      'Lease renewals that were attempted and failed, by side and reason.',
    );
    for (const [k, v] of this.#failures) {
      const [side, reason] = k.split('\u0000') as [string, string];
      out.push(
        `cluster_gateway_agent_lease_renewal_failures_total{lease="${side}",reason="${escapeLabel(reason)}"} ${v}`,
      );
    }
    family(
      'cluster_gateway_agent_renewals_skipped_total',
      'counter',
      'Renewal rounds skipped because the agent was unhealthy, by reason.',
    );
    for (const [reason, v] of this.#skipped) {
      out.push(`cluster_gateway_agent_renewals_skipped_total{reason="${escapeLabel(reason)}"} ${v}`);
    }
    family(
      'cluster_gateway_agent_lease_last_renew_age_seconds',
      'gauge',
      'Seconds since the last successful renewal, by side (absent until the first one).',
    );
    for (const side of ['hub', 'spoke'] as const) {
      const age = this.lastRenewAgeSeconds(side);
      if (age !== undefined) {
        out.push(`cluster_gateway_agent_lease_last_renew_age_seconds{lease="${side}"} ${age.toFixed(3)}`);
      }
    }
    family(
      'cluster_gateway_agent_credential_reloads_total',
      'counter',
      'Credential changes picked up from the mounted files without a restart, by side.',
    );
    for (const side of ['hub', 'spoke'] as const) {
      out.push(
        `cluster_gateway_agent_credential_reloads_total{lease="${side}"} ${this.#reloads.get(side) ?? 0}`,
      );
    }
    family(
      'cluster_gateway_agent_client_certificate_not_after_seconds',
      'gauge',
      'Expiry of the client certificate in use (Unix time), by side: alert before OCM fails to rotate it.',
    );
    for (const [side, notAfter] of this.#certificateNotAfter) {
      out.push(`cluster_gateway_agent_client_certificate_not_after_seconds{lease="${side}"} ${notAfter}`);
    }
    family('cluster_gateway_agent_healthy', 'gauge', '1 when the last check allowed a renewal, else 0.');
    out.push(`cluster_gateway_agent_healthy ${this.#healthy}`);

    const usage = process.cpuUsage();
    family('process_cpu_seconds_total', 'counter', 'User and system CPU time spent, in seconds.');
    out.push(`process_cpu_seconds_total ${((usage.user + usage.system) / 1e6).toFixed(6)}`);
    family('process_resident_memory_bytes', 'gauge', 'Resident memory size in bytes.');
    out.push(`process_resident_memory_bytes ${process.memoryUsage.rss()}`);
    return `${out.join('\n')}\n`;
  }
}

function inc(map: Map<string, number>, key: string): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}

/** Label values: backslash, double quote and newline escaped, as the format requires. */
function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

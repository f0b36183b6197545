/**
 * The agent's tunnel metrics, written by hand like the rest of the agent's (agent/metrics.ts says
 * why prom-client stays out). Label values come from fixed sets.
 */

/** Why an attach attempt failed or a tunnel ended. */
export type TunnelFailure =
  | 'unauthorized'
  | 'forbidden'
  | 'refused'
  | 'network'
  | 'credential'
  | 'ping-timeout'
  | 'closed'
  | 'goaway';

export class TunnelMetrics {
  #connected = 0;
  #connectedSince: number | undefined;
  #connects = 0;
  readonly #failures = new Map<TunnelFailure, number>();
  readonly #disconnects = new Map<TunnelFailure, number>();
  #openStreams = 0;
  #streams = 0;
  #streamFailures = 0;
  #bytesToCluster = 0;
  #bytesFromCluster = 0;
  #roundTripSeconds: number | undefined;
  readonly #impersonated = new Map<'forwarded' | 'refused' | 'error', number>();
  readonly #credentialWrites = new Map<string, number>();
  #credentialExpiresAt: number | undefined;

  connected(): void {
    this.#connected = 1;
    this.#connectedSince = Date.now();
    this.#connects++;
  }

  disconnected(reason: TunnelFailure, stillConnected: boolean): void {
    inc(this.#disconnects, reason);
    if (!stillConnected) {
      this.#connected = 0;
      this.#connectedSince = undefined;
    }
  }

  attachFailed(reason: TunnelFailure): void {
    inc(this.#failures, reason);
  }

  streamOpened(): void {
    this.#openStreams++;
    this.#streams++;
  }

  streamClosed(bytes: { toCluster: number; fromCluster: number }): void {
    this.#openStreams--;
    this.#bytesToCluster += bytes.toCluster;
    this.#bytesFromCluster += bytes.fromCluster;
  }

  streamFailed(): void {
    this.#streamFailures++;
  }

  /** A request on an impersonation stream (no-credential model): forwarded, refused (no identity), error. */
  impersonated(result: 'forwarded' | 'refused' | 'error'): void {
    inc(this.#impersonated, result);
  }

  /** A pass of the hub credential writer (agent/hub-credential.ts). */
  credentialWrite(result: 'written' | 'unchanged' | 'conflict' | 'error', tokenExpiresAt?: number): void {
    inc(this.#credentialWrites, result);
    if (tokenExpiresAt !== undefined) this.#credentialExpiresAt = tokenExpiresAt;
  }

  roundTrip(ms: number): void {
    this.#roundTripSeconds = ms / 1000;
  }

  get isConnected(): boolean {
    return this.#connected === 1;
  }

  render(): string {
    const out: string[] = [];
    const family = (name: string, type: string, help: string) =>
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    family('cluster_gateway_agent_tunnel_connected', 'gauge', '1 while the tunnel to the gateway is up.');
    out.push(`cluster_gateway_agent_tunnel_connected ${this.#connected}`);
    if (this.#connectedSince !== undefined) {
      family(
        'cluster_gateway_agent_tunnel_connected_since_seconds',
        'gauge',
        'Unix time at which the current tunnel connected.',
      );
      out.push(
        `cluster_gateway_agent_tunnel_connected_since_seconds ${Math.floor(this.#connectedSince / 1000)}`,
      );
    }
    family(
      'cluster_gateway_agent_tunnel_connects_total',
      'counter',
      'Tunnels established (first one and reconnects).',
    );
    out.push(`cluster_gateway_agent_tunnel_connects_total ${this.#connects}`);
    family(
      'cluster_gateway_agent_tunnel_attach_failures_total',
      'counter',
      'Attach attempts that failed, by reason: unauthorized (hub 401), forbidden (403), refused (other status), network, credential (unreadable hub kubeconfig).',
    );
    for (const [reason, n] of this.#failures) {
      out.push(`cluster_gateway_agent_tunnel_attach_failures_total{reason="${reason}"} ${n}`);
    }
    family(
      'cluster_gateway_agent_tunnel_disconnects_total',
      'counter',
      'Tunnels that ended, by reason: closed (connection lost), goaway (the gateway drained it), ping-timeout.',
    );
    for (const [reason, n] of this.#disconnects) {
      out.push(`cluster_gateway_agent_tunnel_disconnects_total{reason="${reason}"} ${n}`);
    }
    family(
      'cluster_gateway_agent_tunnel_open_streams',
      'gauge',
      'Streams relayed to the kube-apiserver right now.',
    );
    out.push(`cluster_gateway_agent_tunnel_open_streams ${this.#openStreams}`);
    family('cluster_gateway_agent_tunnel_streams_total', 'counter', 'Streams opened by the gateway.');
    out.push(`cluster_gateway_agent_tunnel_streams_total ${this.#streams}`);
    family(
      'cluster_gateway_agent_tunnel_stream_failures_total',
      'counter',
      'Streams whose connection to the kube-apiserver could not be opened.',
    );
    out.push(`cluster_gateway_agent_tunnel_stream_failures_total ${this.#streamFailures}`);
    family(
      'cluster_gateway_agent_tunnel_bytes_total',
      'counter',
      'Bytes relayed by closed streams, by direction: to_cluster (from the gateway) or from_cluster.',
    );
    out.push(`cluster_gateway_agent_tunnel_bytes_total{direction="to_cluster"} ${this.#bytesToCluster}`);
    out.push(`cluster_gateway_agent_tunnel_bytes_total{direction="from_cluster"} ${this.#bytesFromCluster}`);
    if (this.#impersonated.size > 0) {
      family(
        'cluster_gateway_agent_impersonated_requests_total',
        'counter',
        'Requests the agent served with its own credential as the impersonated hub caller (no-credential trust model), by result: forwarded, refused (no Impersonate-User), error (no credential of its own).',
      );
      for (const [result, n] of this.#impersonated) {
        out.push(`cluster_gateway_agent_impersonated_requests_total{result="${result}"} ${n}`);
      }
    }
    if (this.#credentialWrites.size > 0) {
      family(
        'cluster_gateway_agent_hub_credential_checks_total',
        'counter',
        "Passes over the cluster's credential Secret on the hub, by result: written, unchanged, conflict (written by someone else, not taken over), error.",
      );
      for (const [result, n] of this.#credentialWrites) {
        out.push(`cluster_gateway_agent_hub_credential_checks_total{result="${result}"} ${n}`);
      }
    }
    if (this.#credentialExpiresAt !== undefined) {
      family(
        'cluster_gateway_agent_hub_credential_token_expiration_seconds',
        'gauge',
        'Unix time at which the token last written to the hub expires.',
      );
      out.push(
        `cluster_gateway_agent_hub_credential_token_expiration_seconds ${Math.floor(this.#credentialExpiresAt / 1000)}`,
      );
    }
    if (this.#roundTripSeconds !== undefined) {
      family(
        'cluster_gateway_agent_tunnel_ping_round_trip_seconds',
        'gauge',
        'Round trip of the last keepalive ping (agent -> hub -> gateway and back).',
      );
      out.push(`cluster_gateway_agent_tunnel_ping_round_trip_seconds ${this.#roundTripSeconds.toFixed(6)}`);
    }
    return `${out.join('\n')}\n`;
  }
}

function inc<K>(map: Map<K, number>, key: K): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}

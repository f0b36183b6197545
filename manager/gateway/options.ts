/**
 * Command-line flags of the gateway. Names follow the Go oam-dev/cluster-gateway
 * where it has the same setting, so existing charts and manifests keep their
 * meaning; flags the original has that do not apply here are rejected with a
 * message that says so rather than silently ignored.
 *
 * This is also the gateway's contract with the addon manager, which deploys it:
 * the manager renders the gateway's container args with renderGatewayArgs and
 * checks the user's --gateway-args with checkGatewayArgs. So this file imports
 * nothing but the flag machinery (no server, no informer): the manager loads it.
 * The one file it reads (--probe-verdict-key-file) is read by parseOptions only,
 * at the gateway's start, never by checkGatewayArgs.
 */
import { readFileSync } from 'node:fs';
import {
  bool,
  type FlagInputs,
  type FlagName,
  flagHelpLines,
  integer,
  OptionsError,
  type ParsedFlags,
  parseFlags,
  renderFlags,
  unknownFlag,
  logLevel as validLogLevel,
} from '../../shared/cli-flags.ts';
import { parsePeerOptions, peerFlags, type TunnelPeerOptions } from './tunnel/peer-options.ts';

export { OptionsError };

export interface GatewayOptions {
  securePort: number;
  bindAddress: string;
  tlsCertFile?: string;
  tlsPrivateKeyFile?: string;
  kubeconfig?: string;
  secretNamespace: string;
  ocmIntegration: boolean;
  /** Run the exec plugins of Dynamic credential Secrets inside the gateway. */
  enableExecCredentials: boolean;
  /** The original's behaviour: a credential Secret without ca.crt skips TLS verification. */
  insecureSkipTlsVerifyWhenNoCa: boolean;
  featureGates: FeatureGates;
  authorizeProxySubpath: boolean;
  /** The original's ClusterGatewayProxyConfiguration file (identity exchange rules), read at start. */
  clusterGatewayProxyConfig?: string;
  /** The ClusterGatewayProxyConfiguration object that applies to every cluster; '' for none. */
  proxyConfigurationName: string;
  /** Watch ClusterGatewayProxyConfiguration objects (needs list/watch and status patch on them). */
  watchProxyConfigurations: boolean;
  /** Bound on cached ExternalIdentityExchanger answers. */
  identityExchangeCacheSize: number;
  healthCheckIntervalSeconds: number;
  /** Health probes started per second at most, whatever the cluster count (health/prober.ts). */
  healthCheckMaxRate: number;
  rejectUnhealthy: boolean;
  /** Offer HTTP/2 to clusters (ALPN) for requests that are not upgrades (shared/transport/http2-sessions.ts). */
  upstreamHttp2: boolean;
  upstreamPassthrough: boolean;
  authorizationAllowTtlSeconds: number;
  authorizationDenyTtlSeconds: number;
  logLevel: string;
  userAgent: string;
  /** Connections beyond this are closed at accept: memory stays bounded under a connection storm. */
  maxConnections: number;
  /** TLS handshake, first request after connecting, and each request's headers must finish within this. */
  requestHeaderTimeoutSeconds: number;
  /** A keep-alive connection idle between requests is closed after this. */
  idleConnectionTimeoutSeconds: number;
  /** Accept agent tunnels on clustergateways/{name}/attach. */
  agentTunnels: boolean;
  /** Only this addon's agents (OCM subject ...:addon:<name>:agent:...) may attach. */
  tunnelAddonName: string;
  /** Several replicas sharing agent tunnels (tunnel/peer-options.ts); undefined: off. */
  tunnelPeers?: TunnelPeerOptions;
  /** --probe-verdict-key-file, as given. */
  probeVerdictKeyFile?: string;
  /**
   * Its content, read at start (parseOptions only): the HMAC key of prober verdicts recorded on
   * ManagedClusters (clusters/verdict-signature.ts). Undefined: no verdict is recorded there.
   */
  probeVerdictKey?: Uint8Array;
}

/** Shortest --probe-verdict-key-file accepted: 256 bits, the HMAC-SHA256 output size. */
export const minProbeVerdictKeyBytes = 32;

export interface FeatureGates {
  /** Probe each cluster and report status.healthy (on by default here; off in the original). */
  HealthinessCheck: boolean;
  /** Impersonate the hub user on the managed cluster for every proxied request. */
  ClientIdentityPenetration: boolean;
}

const knownGates: Record<string, keyof FeatureGates | 'cached'> = {
  HealthinessCheck: 'HealthinessCheck',
  ClientIdentityPenetration: 'ClientIdentityPenetration',
  // Always on here: clusters come from informer caches only.
  SecretCache: 'cached',
  OCMClusterCache: 'cached',
};

export const gatewayFlags = {
  'secure-port': { type: 'string', default: '9443', help: 'HTTPS port of the aggregated API server' },
  'bind-address': { type: 'string', default: '0.0.0.0', help: 'address to listen on' },
  'tls-cert-file': {
    type: 'string',
    help: 'serving certificate (PEM); reloaded when the file changes. Default: a self-signed one',
  },
  'tls-private-key-file': { type: 'string', help: 'serving key (PEM) for --tls-cert-file' },
  kubeconfig: {
    type: 'string',
    help: 'hub kubeconfig; default: KUBECONFIG, then in-cluster service account',
  },
  'secret-namespace': {
    type: 'string',
    default: 'open-cluster-management-credentials',
    help: 'namespace of cluster credential Secrets (label cluster.core.oam.dev/cluster-credential-type)',
  },
  'ocm-integration': {
    type: 'string',
    default: 'true',
    help: 'also serve OCM ManagedClusters (endpoint and CA from spec.managedClusterClientConfigs)',
  },
  'enable-exec-credentials': {
    type: 'string',
    default: 'false',
    help: 'run the exec plugins of Dynamic credential Secrets (data key exec) in the gateway. Off by default: anyone who can write Secrets in --secret-namespace can then run commands as the gateway',
  },
  'insecure-skip-tls-verify-when-no-ca': {
    type: 'string',
    default: 'false',
    help: 'compatibility with the original: do not verify the TLS certificate of a cluster whose credential Secret has an endpoint but no ca.crt (shown as insecure: true). Off: such a cluster is verified against the system trust store',
  },
  'feature-gates': {
    type: 'string',
    default: '',
    help: 'comma-separated Gate=true|false: HealthinessCheck (default true), ClientIdentityPenetration (default false); SecretCache and OCMClusterCache are accepted and always on',
  },
  'authorize-proxy-subpath': {
    type: 'string',
    default: 'false',
    help: 'also authorize the proxied request itself against the hub RBAC (e.g. get pods), as the original; a ClusterGatewayProxyConfiguration can turn it on too (spec.authorizeProxySubpath), globally or per cluster',
  },
  'cluster-gateway-proxy-config': {
    type: 'string',
    help: "the original's ClusterGatewayProxyConfiguration file (identity exchange rules), read at start; an invalid file stops the gateway. The object named by --proxy-configuration-name replaces it while that object exists",
  },
  'proxy-configuration-name': {
    type: 'string',
    default: 'cluster-gateway',
    help: 'the ClusterGatewayProxyConfiguration (gateway.cluster.core.oam.dev/v1alpha1) whose rules apply to every cluster; empty for none. A cluster picks its own with the annotation gateway.cluster.core.oam.dev/proxy-configuration=<name>',
  },
  'watch-proxy-configurations': {
    type: 'string',
    default: 'true',
    help: 'watch ClusterGatewayProxyConfiguration objects (the gateway then needs list/watch on them and patch on their status, and is ready once they are listed)',
  },
  'identity-exchange-cache-size': {
    type: 'string',
    default: '4096',
    help: "answers of ExternalIdentityExchanger services kept at most (each for its rule's cacheTTLSeconds)",
  },
  'health-check-interval': {
    type: 'string',
    default: '10',
    help: 'seconds between /healthz probes of each cluster',
  },
  'health-check-max-rate': {
    type: 'string',
    default: '25',
    help: 'health probes started per second at most: with more clusters than this rate covers in one --health-check-interval, each is probed less often (a probe without a warm connection costs a TLS handshake)',
  },
  'reject-unhealthy': {
    type: 'string',
    default: 'false',
    help: 'answer 503 at once, with a ClusterOffline cause, for clusters marked unhealthy through the health subresource or whose last probe failed, instead of trying them (never for clusters not probed yet; a ClusterProxy cluster without its agent tunnel is answered so always). Off by default as in the original, which forwards whatever the health; the chart turns it on',
  },
  'upstream-http2': {
    type: 'string',
    default: 'true',
    help: 'talk HTTP/2 to clusters that offer it (upgrades always use HTTP/1.1); false: HTTP/1.1 only',
  },
  'upstream-passthrough': {
    type: 'string',
    default: 'true',
    help: 'send plain reads (GETs that are not watches) over kept-alive HTTP/1.1 connections and pass their bodies to the caller as the cluster framed them, the cheapest way to move bytes in Node; false: they go the way of every other request',
  },
  'authorization-allow-ttl': {
    type: 'string',
    default: '10',
    help: 'seconds an allowed SubjectAccessReview is cached',
  },
  'authorization-deny-ttl': {
    type: 'string',
    default: '5',
    help: 'seconds a denied SubjectAccessReview is cached',
  },
  'log-level': { type: 'string', default: 'info', help: 'trace, debug, info, warn, error or fatal' },
  'user-agent': {
    type: 'string',
    default: 'cluster-gateway',
    help: 'User-Agent for requests to managed clusters',
  },
  'max-connections': {
    type: 'string',
    default: '4096',
    help: 'open client connections at most; more are closed at once (each idle TLS connection holds about 70 KB)',
  },
  'request-header-timeout': {
    type: 'string',
    default: '32',
    help: 'seconds a client has for the TLS handshake, its first request after connecting, and the headers of each request (kube-apiserver: 32)',
  },
  'idle-connection-timeout': {
    type: 'string',
    default: '65',
    help: 'seconds a keep-alive connection may sit idle between requests (watches and streams are not idle)',
  },
  'agent-tunnels': {
    type: 'string',
    default: 'true',
    help: "accept agents' reverse tunnels on clustergateways/<cluster>/attach (through the hub kube-apiserver); a cluster uses its tunnel when its credential Secret is labelled cluster.core.oam.dev/cluster-endpoint-type=ClusterProxy",
  },
  'tunnel-addon-name': {
    type: 'string',
    default: 'cluster-gateway',
    help: 'addon whose agents may attach: their hub user must be system:open-cluster-management:cluster:<cluster>:addon:<this>:agent:<agent>',
  },
  'probe-verdict-key-file': {
    type: 'string',
    help: `file whose bytes (${minProbeVerdictKeyBytes} at least, read at start) sign the prober's health verdicts on ManagedClusters of clusters without a credential Secret, which their klusterlets can rewrite. Every replica must get the same file, unreadable by managed clusters; without it no verdict is recorded on ManagedClusters (the probing replica keeps it in memory)`,
  },
  ...peerFlags,
  help: { type: 'boolean', default: false, help: 'show this help' },
} as const;

/** A flag another program may put on the gateway's command line. */
export type GatewayFlagName = FlagName<typeof gatewayFlags>;
/** Values for the gateway's flags, by name: a misspelt or removed flag does not compile. */
export type GatewayFlagValues = FlagInputs<typeof gatewayFlags>;

/** The gateway's arguments for `values`, `--name=value` each, in their order. */
export function renderGatewayArgs(values: GatewayFlagValues): string[] {
  return renderFlags(gatewayFlags, values);
}

/** How to run the gateway, for messages that send a reader to its flags. */
export const gatewayCommand = 'node manager/gateway/main.ts';

export function helpText(): string {
  const usage = [`Usage: ${gatewayCommand} [flags]`, '', 'Flags:'];
  return [...usage, ...flagHelpLines(gatewayFlags, 30)].join('\n');
}

export function parseOptions(argv: string[]): GatewayOptions | 'help' {
  const values = parseFlags(gatewayFlags, argv);
  if (values.help) return 'help';
  const options = optionsFrom(values);
  return options.probeVerdictKeyFile
    ? { ...options, probeVerdictKey: readProbeVerdictKey(options.probeVerdictKeyFile) }
    : options;
}

/**
 * The verdict key: the file's bytes as they are (no trimming, so a binary key works too; replicas agree
 * because they read the same file). An OptionsError naming the flag when unreadable or too short.
 */
export function readProbeVerdictKey(file: string): Uint8Array {
  let key: Buffer;
  try {
    key = readFileSync(file);
  } catch (err) {
    throw new OptionsError(`--probe-verdict-key-file: cannot read ${file}: ${(err as Error).message}`);
  }
  if (key.length < minProbeVerdictKeyBytes) {
    throw new OptionsError(
      `--probe-verdict-key-file: ${file} holds ${key.length} bytes; a verdict key needs ${minProbeVerdictKeyBytes} at least (e.g. openssl rand -hex 32)`,
    );
  }
  return new Uint8Array(key);
}

/**
 * `argv` checked as the gateway checks its command line when it starts, without starting it: the
 * same table, parser and value checks (none of which reads a file or connects anywhere). For the
 * addon manager, which writes the gateway's arguments: what it would run the gateway with, or an
 * OptionsError that names the flag to fix (an unknown one with the closest known flag).
 */
export function checkGatewayArgs(argv: string[]): GatewayOptions {
  const unknown = unknownFlag(gatewayFlags, argv);
  if (unknown) {
    const guess = unknown.suggestion ? `; did you mean ${unknown.suggestion}?` : '';
    throw new OptionsError(
      `${unknown.flag} is not a flag of the gateway (${gatewayCommand} --help lists them${guess})`,
    );
  }
  const values = parseFlags(gatewayFlags, argv, `(${gatewayCommand} --help lists the gateway's flags)`);
  if (values.help) throw new OptionsError('--help would make the gateway print its help and exit');
  return optionsFrom(values);
}

function optionsFrom(values: ParsedFlags<typeof gatewayFlags>): GatewayOptions {
  const str = (k: Exclude<keyof typeof gatewayFlags, 'help'>): string | undefined => values[k];
  const certFile = str('tls-cert-file');
  const keyFile = str('tls-private-key-file');
  if (Boolean(certFile) !== Boolean(keyFile)) {
    throw new OptionsError('--tls-cert-file and --tls-private-key-file must be given together');
  }
  const logLevel = validLogLevel(str('log-level') ?? 'info');
  const tunnelPeers = parsePeerOptions(values);
  if (tunnelPeers && !bool('agent-tunnels', str('agent-tunnels'))) {
    throw new OptionsError(
      '--tunnel-peer-port shares agent tunnels between replicas: it needs --agent-tunnels=true',
    );
  }
  return {
    securePort: integer('secure-port', str('secure-port'), 0, 65535),
    bindAddress: str('bind-address') ?? '0.0.0.0',
    ...(certFile ? { tlsCertFile: certFile } : {}),
    ...(keyFile ? { tlsPrivateKeyFile: keyFile } : {}),
    ...(str('kubeconfig') ? { kubeconfig: str('kubeconfig') } : {}),
    secretNamespace: str('secret-namespace') ?? '',
    ocmIntegration: bool('ocm-integration', str('ocm-integration')),
    enableExecCredentials: bool('enable-exec-credentials', str('enable-exec-credentials')),
    insecureSkipTlsVerifyWhenNoCa: bool(
      'insecure-skip-tls-verify-when-no-ca',
      str('insecure-skip-tls-verify-when-no-ca'),
    ),
    featureGates: parseFeatureGates(str('feature-gates') ?? ''),
    authorizeProxySubpath: bool('authorize-proxy-subpath', str('authorize-proxy-subpath')),
    ...(str('cluster-gateway-proxy-config')
      ? { clusterGatewayProxyConfig: str('cluster-gateway-proxy-config') }
      : {}),
    proxyConfigurationName: objectName('proxy-configuration-name', str('proxy-configuration-name')),
    watchProxyConfigurations: bool('watch-proxy-configurations', str('watch-proxy-configurations')),
    identityExchangeCacheSize: integer(
      'identity-exchange-cache-size',
      str('identity-exchange-cache-size'),
      1,
      1_000_000,
    ),
    healthCheckIntervalSeconds: integer('health-check-interval', str('health-check-interval'), 1, 3600),
    healthCheckMaxRate: integer('health-check-max-rate', str('health-check-max-rate'), 1, 100_000),
    rejectUnhealthy: bool('reject-unhealthy', str('reject-unhealthy')),
    upstreamHttp2: bool('upstream-http2', str('upstream-http2')),
    upstreamPassthrough: bool('upstream-passthrough', str('upstream-passthrough')),
    authorizationAllowTtlSeconds: integer('authorization-allow-ttl', str('authorization-allow-ttl'), 0, 3600),
    authorizationDenyTtlSeconds: integer('authorization-deny-ttl', str('authorization-deny-ttl'), 0, 3600),
    logLevel,
    userAgent: str('user-agent') ?? 'cluster-gateway',
    maxConnections: integer('max-connections', str('max-connections'), 1, 1_000_000),
    requestHeaderTimeoutSeconds: integer('request-header-timeout', str('request-header-timeout'), 1, 3600),
    idleConnectionTimeoutSeconds: integer('idle-connection-timeout', str('idle-connection-timeout'), 1, 3600),
    agentTunnels: bool('agent-tunnels', str('agent-tunnels')),
    tunnelAddonName: nonEmpty('tunnel-addon-name', str('tunnel-addon-name')),
    ...(tunnelPeers ? { tunnelPeers } : {}),
    ...(str('probe-verdict-key-file') ? { probeVerdictKeyFile: str('probe-verdict-key-file') } : {}),
  };
}

function nonEmpty(name: string, value: string | undefined): string {
  if (!value?.trim()) throw new OptionsError(`--${name} must not be empty`);
  return value.trim();
}

/** A Kubernetes object name (DNS-1123 subdomain), or '' for none. */
function objectName(flag: string, value: string | undefined): string {
  const name = (value ?? '').trim();
  if (
    name &&
    (name.length > 253 || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(name))
  ) {
    throw new OptionsError(`--${flag}: "${name}" is not a valid object name (lowercase DNS-1123 subdomain)`);
  }
  return name;
}

export function parseFeatureGates(text: string): FeatureGates {
  const gates: FeatureGates = { HealthinessCheck: true, ClientIdentityPenetration: false };
  for (const part of text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [name, value] = part.split('=');
    const gate = name ? knownGates[name] : undefined;
    if (!gate) {
      throw new OptionsError(
        `--feature-gates: unknown gate "${name}"; known: ${Object.keys(knownGates).join(', ')}`,
      );
    }
    const on = bool(`--feature-gates ${name}`, value);
    if (gate !== 'cached') gates[gate] = on;
  }
  return gates;
}

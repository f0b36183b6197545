/**
 * Command-line flags of the addon agent (one process per managed cluster).
 * The manager renders the agent Deployment's args through this table
 * (renderAgentArgs, manager/addon/deploy/agent-manifests.ts): renaming or
 * removing a flag the manager sets is a compile error there. So this file
 * imports nothing but the flag machinery: the manager loads it.
 */
import {
  bool,
  type FlagInputs,
  flagHelpLines,
  integer,
  logLevel,
  OptionsError,
  parseFlags,
  renderFlags,
} from '../shared/cli-flags.ts';

export { OptionsError };

export interface AgentOptions {
  /** The managed cluster's name on the hub: the namespace of the hub heartbeat Lease. */
  clusterName: string;
  /** Addon name: the name of both Leases (OCM looks for Lease <addon> on the managed cluster). */
  addonName: string;
  /** Namespace of the spoke Lease; where the agent runs. */
  installNamespace: string;
  /** Kubeconfig of the registration Secret <addon>-hub-kubeconfig, mounted as files. */
  hubKubeconfig: string;
  /** Managed cluster kubeconfig; undefined: KUBECONFIG, then the in-cluster ServiceAccount. */
  kubeconfig?: string;
  renewIntervalSeconds: number;
  /** Each wait is interval * (1 + random * jitter), as client-go's wait.Jitter. */
  renewJitter: number;
  bindAddress: string;
  port: number;
  /**
   * Where /metrics is served: loopback by default, so nothing off the pod reads it without a
   * credential (a kube-rbac-proxy sidecar can expose it with TokenReview + SubjectAccessReview).
   * Equal to bindAddress: the probes listener serves /metrics too (metricsPort unused).
   */
  metricsBindAddress: string;
  metricsPort: number;
  logLevel: string;
  /** Hold the reverse tunnel to the gateway through the hub kube-apiserver (agent/tunnel). */
  tunnel: boolean;
  /**
   * Attach straight to the gateway at this URL (its Service, exposed) instead of through the hub's
   * kube-apiserver; same identity (the hub client certificate), same attach path. Empty: the hub.
   */
  tunnelServer: string;
  /** CA of the gateway's serving certificate for --tunnel-server (default: the hub kubeconfig's CA). */
  tunnelCaFile: string;
  /**
   * hub-credential: relay TLS byte streams only (the hub holds the credential). no-credential: also
   * serve requests with the agent's own credential as the impersonated hub caller (docs/tunnel.md).
   */
  trustModel: TrustModel;
  /** Write the cluster's credential Secret in this hub namespace (agent/hub-credential.ts); empty: none. */
  hubCredentialNamespace: string;
  /** hub-credential: the ServiceAccount (install namespace) whose tokens the hub gets. */
  hubCredentialServiceAccount: string;
  hubCredentialTokenSeconds: number;
  hubCredentialRotateSeconds: number;
  hubCredentialCheckSeconds: number;
}

/** --trust-model's values. */
export const trustModels = ['hub-credential', 'no-credential'] as const;
export type TrustModel = (typeof trustModels)[number];

/** Where OCM's addon-framework and AddOnTemplate mount the registration Secret. */
export const defaultHubKubeconfig = '/managed/hub-kubeconfig/kubeconfig';
export const defaultInstallNamespace = 'open-cluster-management-agent-addon';
const serviceAccountNamespaceFile = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

export const agentFlags = {
  'cluster-name': {
    type: 'string',
    help: 'the managed cluster name on the hub (required): the namespace of the hub heartbeat Lease',
  },
  'addon-name': {
    type: 'string',
    default: 'cluster-gateway',
    help: 'addon name: the name of the spoke Lease and of the hub heartbeat Lease',
  },
  'install-namespace': {
    type: 'string',
    help: `namespace of the spoke Lease. Default: POD_NAMESPACE, then the ServiceAccount namespace file, then ${defaultInstallNamespace}`,
  },
  'hub-kubeconfig': {
    type: 'string',
    default: defaultHubKubeconfig,
    help: 'hub kubeconfig from the registration Secret <addon>-hub-kubeconfig; it and the certificate files it names are re-read when they change (OCM rotates them)',
  },
  kubeconfig: {
    type: 'string',
    help: 'managed cluster kubeconfig; default: KUBECONFIG, then the in-cluster ServiceAccount',
  },
  'renew-interval': {
    type: 'string',
    default: '5',
    help: 'seconds between renewals of both Leases',
  },
  'renew-jitter': {
    type: 'string',
    default: '0.2',
    help: 'each wait is the interval times (1 + a random fraction up to this)',
  },
  'bind-address': {
    type: 'string',
    default: '0.0.0.0',
    help: 'address of the probes endpoint (/healthz, /readyz)',
  },
  port: { type: 'string', default: '8080', help: 'port of the probes endpoint (/healthz, /readyz)' },
  'metrics-bind-address': {
    type: 'string',
    default: '127.0.0.1',
    help: 'address of /metrics, which needs no credential: loopback keeps it inside the pod (scrape it through a sidecar such as kube-rbac-proxy). The same address as --bind-address serves /metrics on --port',
  },
  'metrics-port': {
    type: 'string',
    default: '8081',
    help: 'port of /metrics when --metrics-bind-address differs from --bind-address',
  },
  'log-level': { type: 'string', default: 'info', help: 'trace, debug, info, warn, error or fatal' },
  tunnel: {
    type: 'string',
    default: 'true',
    help: "hold a reverse tunnel to the gateway (an upgrade on clustergateways/<cluster>/attach of the hub kube-apiserver, with the hub credential) and relay the gateway's connections to this cluster's kube-apiserver",
  },
  'tunnel-server': {
    type: 'string',
    default: '',
    help: 'attach the tunnel straight to the gateway at this https:// URL (its Service, exposed to the managed clusters) instead of through the hub kube-apiserver: one hop less; the gateway authenticates the same hub client certificate. Empty: through the hub',
  },
  'tunnel-ca-file': {
    type: 'string',
    default: '',
    help: "CA (PEM file) of the gateway's serving certificate, for --tunnel-server; default: the hub kubeconfig's CA",
  },
  'trust-model': {
    type: 'string',
    default: 'hub-credential',
    help: "hub-credential: the tunnel relays TLS byte streams only, with the credential the hub holds; no-credential: the agent also serves the gateway's requests with its own ServiceAccount token, impersonating the hub caller (its RBAC here: impersonate users, groups, uids)",
  },
  'hub-credential-namespace': {
    type: 'string',
    default: '',
    help: "write this cluster's credential Secret (named after the cluster) in this hub namespace, the gateway's --secret-namespace: with hub-credential a ServiceAccount token and this apiserver's CA, with no-credential the labels alone. Empty: write nothing",
  },
  'hub-credential-service-account': {
    type: 'string',
    default: '',
    help: 'hub-credential: the ServiceAccount in the install namespace whose tokens (TokenRequest) are written to the hub',
  },
  'hub-credential-token-seconds': {
    type: 'string',
    default: '86400',
    help: 'lifetime asked for each token (at least 600)',
  },
  'hub-credential-rotate-seconds': {
    type: 'string',
    default: '0',
    help: 'renew the token after this long; 0: half its lifetime (never later than 80 % of it)',
  },
  'hub-credential-check-seconds': {
    type: 'string',
    default: '60',
    help: 'how often the hub Secret is compared with what it should be, and repaired',
  },
  help: { type: 'boolean', default: false, help: 'show this help' },
} as const;

/** Values for the agent's flags, by name: a misspelt or removed flag does not compile. */
export type AgentFlagValues = FlagInputs<typeof agentFlags>;

/** The agent's arguments for `values`, `--name=value` each, in their order. */
export function renderAgentArgs(values: AgentFlagValues): string[] {
  return renderFlags(agentFlags, values);
}

export function helpText(): string {
  return [
    'Usage: node agent/main.ts --cluster-name=<cluster> [flags]',
    '',
    'Flags:',
    ...flagHelpLines(agentFlags, 24),
  ].join('\n');
}

export interface Environment {
  env: Record<string, string | undefined>;
  readFile(path: string): string | undefined;
}

export function parseOptions(argv: string[], environment: Environment): AgentOptions | 'help' {
  const values = parseFlags(agentFlags, argv);
  if (values.help) return 'help';
  const str = (k: Exclude<keyof typeof agentFlags, 'help'>): string | undefined => values[k];
  const clusterName = str('cluster-name');
  if (!clusterName) throw new OptionsError('--cluster-name is required: the managed cluster name on the hub');
  if (!isDnsLabel(clusterName)) {
    throw new OptionsError(`--cluster-name: "${clusterName}" is not a valid namespace name`);
  }
  const addonName = str('addon-name') ?? 'cluster-gateway';
  if (!isDnsSubdomain(addonName)) {
    throw new OptionsError(`--addon-name: "${addonName}" is not a valid Lease name`);
  }
  const installNamespace =
    str('install-namespace') ||
    environment.env.POD_NAMESPACE ||
    environment.readFile(serviceAccountNamespaceFile)?.trim() ||
    defaultInstallNamespace;
  if (!isDnsLabel(installNamespace)) {
    throw new OptionsError(`--install-namespace: "${installNamespace}" is not a valid namespace name`);
  }
  const kubeconfig = str('kubeconfig');
  const tunnelServer = str('tunnel-server') ?? '';
  if (tunnelServer && !/^https:\/\/[^/]+/.test(tunnelServer)) {
    throw new OptionsError(`--tunnel-server: "${tunnelServer}" is not an https:// URL`);
  }
  const trustModel = str('trust-model') ?? 'hub-credential';
  if (!isTrustModel(trustModel)) {
    throw new OptionsError(`--trust-model: "${trustModel}" is not ${trustModels.join(' or ')}`);
  }
  const hubCredentialNamespace = str('hub-credential-namespace') ?? '';
  if (hubCredentialNamespace && !isDnsLabel(hubCredentialNamespace)) {
    throw new OptionsError(`--hub-credential-namespace: "${hubCredentialNamespace}" is not a namespace name`);
  }
  const hubCredentialServiceAccount = str('hub-credential-service-account') ?? '';
  if (hubCredentialServiceAccount && !isDnsSubdomain(hubCredentialServiceAccount)) {
    throw new OptionsError(
      `--hub-credential-service-account: "${hubCredentialServiceAccount}" is not a ServiceAccount name`,
    );
  }
  if (trustModel === 'hub-credential' && hubCredentialNamespace && !hubCredentialServiceAccount) {
    throw new OptionsError(
      '--hub-credential-namespace with --trust-model=hub-credential needs --hub-credential-service-account: the ServiceAccount whose token the hub gets',
    );
  }
  const hubCredentialTokenSeconds = integer(
    'hub-credential-token-seconds',
    str('hub-credential-token-seconds'),
    600,
    2 ** 31,
  );
  const hubCredentialRotateSeconds =
    integer('hub-credential-rotate-seconds', str('hub-credential-rotate-seconds'), 0, 2 ** 31) ||
    Math.floor(hubCredentialTokenSeconds / 2);
  return {
    clusterName,
    addonName,
    installNamespace,
    hubKubeconfig: str('hub-kubeconfig') || defaultHubKubeconfig,
    ...(kubeconfig ? { kubeconfig } : {}),
    renewIntervalSeconds: number('renew-interval', str('renew-interval'), 0.1, 3600),
    renewJitter: number('renew-jitter', str('renew-jitter'), 0, 10),
    bindAddress: str('bind-address') ?? '0.0.0.0',
    port: integer('port', str('port'), 0, 65535),
    metricsBindAddress: str('metrics-bind-address') || '127.0.0.1',
    metricsPort: integer('metrics-port', str('metrics-port'), 0, 65535),
    logLevel: logLevel(str('log-level') ?? 'info'),
    tunnel: bool('tunnel', str('tunnel')),
    tunnelServer,
    tunnelCaFile: str('tunnel-ca-file') ?? '',
    trustModel,
    hubCredentialNamespace,
    hubCredentialServiceAccount,
    hubCredentialTokenSeconds,
    hubCredentialRotateSeconds,
    hubCredentialCheckSeconds: integer(
      'hub-credential-check-seconds',
      str('hub-credential-check-seconds'),
      1,
      86400,
    ),
  };
}

function number(name: string, value: string | undefined, min: number, max: number): number {
  const n = Number(value);
  if (value === undefined || value.trim() === '' || !Number.isFinite(n) || n < min || n > max) {
    throw new OptionsError(`--${name}: "${value}" is not a number between ${min} and ${max}`);
  }
  return n;
}

function isTrustModel(s: string): s is TrustModel {
  return (trustModels as readonly string[]).includes(s);
}

/** A namespace name (DNS-1123 label), as --install-namespace and --hub-credential-namespace need. */
export function isDnsLabel(s: string): boolean {
  return s.length <= 63 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(s);
}

function isDnsSubdomain(s: string): boolean {
  return s.length <= 253 && s.split('.').every(isDnsLabel);
}

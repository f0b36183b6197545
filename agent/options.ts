/**
 * Command-line flags of the addon agent (one process per managed cluster).
 * The manager renders the agent Deployment's args from these names
 * (manager/addon/deploy), so renaming one is a breaking change for both.
 */
import { bool, flagHelpLines, integer, logLevel, OptionsError, parseFlags } from '../shared/cli-flags.ts';

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
  logLevel: string;
  /** Hold the reverse tunnel to the gateway through the hub kube-apiserver (agent/tunnel). */
  tunnel: boolean;
}

/** Where OCM's addon-framework and AddOnTemplate mount the registration Secret. */
export const defaultHubKubeconfig = '/managed/hub-kubeconfig/kubeconfig';
export const defaultInstallNamespace = 'open-cluster-management-agent-addon';
const serviceAccountNamespaceFile = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

const flags = {
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
    help: 'address of the HTTP endpoint (/healthz, /readyz, /metrics)',
  },
  port: { type: 'string', default: '8080', help: 'port of the HTTP endpoint (/healthz, /readyz, /metrics)' },
  'log-level': { type: 'string', default: 'info', help: 'trace, debug, info, warn, error or fatal' },
  tunnel: {
    type: 'string',
    default: 'true',
    help: "hold a reverse tunnel to the gateway (an upgrade on clustergateways/<cluster>/attach of the hub kube-apiserver, with the hub credential) and relay the gateway's connections to this cluster's kube-apiserver",
  },
  help: { type: 'boolean', default: false, help: 'show this help' },
} as const;

export function helpText(): string {
  return [
    'Usage: node agent/main.ts --cluster-name=<cluster> [flags]',
    '',
    'Flags:',
    ...flagHelpLines(flags, 24),
  ].join('\n');
}

export interface Environment {
  env: Record<string, string | undefined>;
  readFile(path: string): string | undefined;
}

export function parseOptions(argv: string[], environment: Environment): AgentOptions | 'help' {
  const values = parseFlags(flags, argv);
  if (values.help) return 'help';
  const str = (k: string) => values[k] as string | undefined;
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
    logLevel: logLevel(str('log-level') ?? 'info'),
    tunnel: bool('tunnel', str('tunnel')),
  };
}

function number(name: string, value: string | undefined, min: number, max: number): number {
  const n = Number(value);
  if (value === undefined || value.trim() === '' || !Number.isFinite(n) || n < min || n > max) {
    throw new OptionsError(`--${name}: "${value}" is not a number between ${min} and ${max}`);
  }
  return n;
}

function isDnsLabel(s: string): boolean {
  return s.length <= 63 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(s);
}

function isDnsSubdomain(s: string): boolean {
  return s.length <= 253 && s.split('.').every(isDnsLabel);
}

/**
 * Command-line flags of the addon manager (node manager/addon/main.ts --help).
 * Parsing is pure so that every rule is unit tested; main.ts turns an
 * OptionsError into exit code 2 with its message.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  bool,
  type FlagInputs,
  flagHelpLines,
  integer,
  logLevels,
  OptionsError,
  parseFlags,
  renderFlags,
  logLevel as validLogLevel,
} from '../../shared/cli-flags.ts';
import type { HealthMode } from './core/addon.ts';
import { type PodSettings, parsePodSettings, podSettingsFlags } from './core/pod-settings.ts';
import { gatewayNames } from './gateway-deploy/names.ts';
import { type GatewayDeployOptions, gatewayFlags, parseGatewayOptions } from './gateway-deploy/options.ts';
import { checkGatewayCommandLine } from './gateway-deploy/workload.ts';

export { logLevels, OptionsError };

export interface PlacementRef {
  namespace: string;
  name: string;
}

export interface AddonManagerOptions {
  kubeconfig?: string;
  addonName: string;
  displayName: string;
  description: string;
  /** The agent's container image before AddOnDeploymentConfig registry overrides. */
  agentImage: string;
  agentInstallNamespace: string;
  /** The agent pods' affinity, priorityClassName, extra annotations and labels (on every managed cluster). */
  agentPod: PodSettings;
  /** Empty: installStrategy Manual (clusteradm addon enable); else Placements. */
  installPlacements: PlacementRef[];
  /** Namespace of the manager itself: its leader-election Lease and the default AddOnDeploymentConfig. */
  namespace: string;
  healthMode: HealthMode;
  leaderElect: boolean;
  leaseDurationSeconds: number;
  renewDeadlineSeconds: number;
  retryPeriodSeconds: number;
  /** Plain HTTP: /healthz, /readyz, /metrics. */
  httpBindAddress: string;
  httpPort: number;
  /** HTTPS for admission webhooks (0: off). */
  webhookPort: number;
  /** Where the hub apiserver calls the webhook: a URL (manager outside the cluster) or a Service in `namespace`. */
  webhookTarget: { url: string } | { service: string };
  tlsCertFile?: string;
  tlsPrivateKeyFile?: string;
  /**
   * PEM CA file: the webhook listener then requires a client certificate it signed (the hub
   * apiserver's, from its WebhookAdmission kubeConfigFile). Unset: callers are not authenticated and
   * the webhook answers only from what the AdmissionReview itself carries.
   */
  webhookClientCaFile?: string;
  resyncSeconds: number;
  workers: number;
  logLevel: string;
  /** The gateway the manager deploys on the hub (--deploy-gateway, --gateway-*). */
  gateway: GatewayDeployOptions;
}

const packageVersion = (() => {
  try {
    const file = path.join(import.meta.dirname, '..', '..', 'package.json');
    return (JSON.parse(readFileSync(file, 'utf8')) as { version?: string }).version ?? 'latest';
  } catch {
    return 'latest';
  }
})();

export const defaultAgentImage = `ghcr.io/oam-dev/cluster-gateway-ts:${packageVersion}`;

export const managerFlags = {
  kubeconfig: {
    type: 'string',
    help: 'hub kubeconfig; default: KUBECONFIG, then in-cluster service account',
  },
  'addon-name': {
    type: 'string',
    default: 'cluster-gateway',
    help: 'name of the ClusterManagementAddOn and of every ManagedClusterAddOn it manages',
  },
  'display-name': { type: 'string', default: 'Cluster Gateway', help: 'addOnMeta.displayName' },
  description: {
    type: 'string',
    default: 'Multi-cluster Kubernetes API gateway: proxies hub requests to managed clusters',
    help: 'addOnMeta.description',
  },
  'agent-image': {
    type: 'string',
    default: defaultAgentImage,
    help: "the agent's container image (AddOnDeploymentConfig registries may rewrite it)",
  },
  'agent-install-namespace': {
    type: 'string',
    default: 'open-cluster-management-agent-addon',
    help: 'namespace of the agent on managed clusters when neither the AddOnDeploymentConfig nor the ManagedClusterAddOn names one',
  },
  // The AddOnDeploymentConfig's nodePlacement has no affinity nor priority class: these apply to every
  // cluster's agent (a PriorityClass named here must exist on each managed cluster, or its pod is refused).
  ...podSettingsFlags('agent', 'the agent pods'),
  'install-placements': {
    type: 'string',
    default: '',
    help: 'comma-separated namespace/name of Placements: installStrategy Placements (OCM creates the ManagedClusterAddOns). Empty: Manual (clusteradm addon enable)',
  },
  namespace: {
    type: 'string',
    default: '',
    help: "the manager's namespace: its leader-election Lease and the default AddOnDeploymentConfig (default: POD_NAMESPACE, then the service account's namespace, then cluster-gateway-system)",
  },
  'health-mode': {
    type: 'string',
    default: 'Customized',
    help: "Customized (the manager writes Available) or Lease (OCM reads the agent's Lease on the managed cluster)",
  },
  'leader-elect': { type: 'string', default: 'true', help: 'elect one active manager over a Lease' },
  'leader-election-lease-duration': {
    type: 'string',
    default: '10',
    help: 'seconds a standby waits after the last renewal before taking over',
  },
  'leader-election-renew-deadline': {
    type: 'string',
    default: '8',
    help: 'seconds the leader keeps trying to renew before it gives up leadership (and exits)',
  },
  'leader-election-retry-period': {
    type: 'string',
    default: '2',
    help: 'seconds between attempts to acquire or renew',
  },
  'http-bind-address': { type: 'string', default: '0.0.0.0', help: 'address of the probes/metrics listener' },
  'http-port': { type: 'string', default: '8000', help: 'plain HTTP port: /healthz, /readyz, /metrics' },
  'webhook-port': {
    type: 'string',
    default: '9443',
    help: 'HTTPS port of the admission webhooks (0: off)',
  },
  'webhook-service': {
    type: 'string',
    default: 'cluster-gateway-addon-manager',
    help: 'Service (in --namespace, port 443) in front of the webhook listener, named in the MutatingWebhookConfiguration',
  },
  'webhook-url': {
    type: 'string',
    default: '',
    help: 'https://host:port at which the hub apiserver reaches the webhook listener, instead of --webhook-service (a manager outside the cluster: https://127.0.0.1:<webhook-port>)',
  },
  'tls-cert-file': {
    type: 'string',
    help: 'webhook serving certificate (PEM); then the manager does not register the webhook (bring your own configuration and caBundle). Default: a CA and certificate the manager keeps in Secret <addon-name>-addon-manager-webhook',
  },
  'tls-private-key-file': { type: 'string', help: 'key (PEM) for --tls-cert-file' },
  'webhook-client-ca': {
    type: 'string',
    default: '',
    help: "CA (PEM file) of the client certificate the hub apiserver presents to webhooks (--admission-control-config-file, WebhookAdmission kubeConfigFile): the webhook listener then refuses every other caller (401) and rewrites with the manager's current verdict. Empty: callers are not authenticated, so the webhook never answers with the manager's verdicts, only from the AdmissionReview's own old object (or WaitingForAddonManager)",
  },
  'resync-period': {
    type: 'string',
    default: '300',
    help: 'seconds between full reconciles of every addon (events drive the rest)',
  },
  workers: {
    type: 'string',
    default: '4',
    help: 'addons reconciled in parallel (one at a time per cluster)',
  },
  'log-level': { type: 'string', default: 'info', help: logLevels.join(', ') },
  ...gatewayFlags,
  help: { type: 'boolean', default: false, help: 'show this help' },
} as const;

/** Values for the manager's flags, by name: a misspelt or removed flag does not compile. */
export type ManagerFlagValues = FlagInputs<typeof managerFlags>;

/** The manager's arguments for `values`, `--name=value` each, in their order (for whoever starts it). */
export function renderManagerArgs(values: ManagerFlagValues): string[] {
  return renderFlags(managerFlags, values);
}

export function helpText(): string {
  return [
    'Usage: node manager/addon/main.ts [flags]',
    '',
    'The cluster-gateway addon manager: ClusterManagementAddOn, agent ManifestWorks, registration and health.',
    '',
    'Flags:',
    ...flagHelpLines(managerFlags, 36),
  ].join('\n');
}

/** DNS-1123 label: namespaces and most names on both sides. */
const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export function isDnsLabel(value: string): boolean {
  return value.length <= 63 && dnsLabel.test(value);
}

export function parseOptions(
  argv: string[],
  env: Record<string, string | undefined> = process.env,
  serviceAccountNamespace: () => string | undefined = readServiceAccountNamespace,
): AddonManagerOptions | 'help' {
  const values = parseFlags(managerFlags, argv);
  if (values.help) return 'help';
  const str = (k: Exclude<keyof typeof managerFlags, 'help'>): string => values[k] ?? '';

  const addonName = str('addon-name');
  // The addon name becomes part of Secret, Lease, ManifestWork and RBAC names on both sides.
  if (!isDnsLabel(addonName) || addonName.length > 50) {
    throw new OptionsError(
      `--addon-name: "${addonName}" must be a lowercase DNS label (a-z, 0-9, "-") of at most 50 characters`,
    );
  }
  const agentInstallNamespace = str('agent-install-namespace');
  if (!isDnsLabel(agentInstallNamespace)) {
    throw new OptionsError(`--agent-install-namespace: "${agentInstallNamespace}" is not a namespace name`);
  }
  const namespace =
    str('namespace') || env.POD_NAMESPACE || serviceAccountNamespace() || 'cluster-gateway-system';
  if (!isDnsLabel(namespace)) throw new OptionsError(`--namespace: "${namespace}" is not a namespace name`);
  const healthMode = str('health-mode');
  if (healthMode !== 'Customized' && healthMode !== 'Lease') {
    throw new OptionsError(`--health-mode: "${healthMode}" is not Customized or Lease`);
  }
  const certFile = str('tls-cert-file');
  const keyFile = str('tls-private-key-file');
  if (Boolean(certFile) !== Boolean(keyFile)) {
    throw new OptionsError('--tls-cert-file and --tls-private-key-file must be given together');
  }
  const webhookClientCa = str('webhook-client-ca');
  if (webhookClientCa) readWebhookClientCa(webhookClientCa);
  const webhookUrl = str('webhook-url');
  if (webhookUrl) parseWebhookUrl(webhookUrl);
  const webhookService = str('webhook-service');
  if (!webhookUrl && !isDnsLabel(webhookService)) {
    throw new OptionsError(`--webhook-service: "${webhookService}" is not a Service name`);
  }
  const logLevel = validLogLevel(str('log-level'));
  if (!str('agent-image').trim()) throw new OptionsError('--agent-image must not be empty');
  const leaseDurationSeconds = integer(
    'leader-election-lease-duration',
    str('leader-election-lease-duration'),
    2,
    600,
  );
  const renewDeadlineSeconds = integer(
    'leader-election-renew-deadline',
    str('leader-election-renew-deadline'),
    1,
    600,
  );
  const retryPeriodSeconds = integer(
    'leader-election-retry-period',
    str('leader-election-retry-period'),
    1,
    600,
  );
  // client-go's rules: a leader must give up before a standby may take over.
  if (renewDeadlineSeconds >= leaseDurationSeconds) {
    throw new OptionsError(
      '--leader-election-renew-deadline must be shorter than --leader-election-lease-duration, or two managers could both act',
    );
  }
  if (retryPeriodSeconds >= renewDeadlineSeconds) {
    throw new OptionsError(
      '--leader-election-retry-period must be shorter than --leader-election-renew-deadline, or the leader gets a single renewal attempt',
    );
  }
  const options: AddonManagerOptions = {
    ...(str('kubeconfig') ? { kubeconfig: str('kubeconfig') } : {}),
    addonName,
    displayName: str('display-name'),
    description: str('description'),
    agentImage: str('agent-image').trim(),
    agentInstallNamespace,
    agentPod: parsePodSettings('agent', values),
    installPlacements: parsePlacements(str('install-placements')),
    namespace,
    healthMode,
    leaderElect: bool('leader-elect', str('leader-elect')),
    leaseDurationSeconds,
    renewDeadlineSeconds,
    retryPeriodSeconds,
    httpBindAddress: str('http-bind-address'),
    httpPort: integer('http-port', str('http-port'), 0, 65535),
    webhookPort: integer('webhook-port', str('webhook-port'), 0, 65535),
    webhookTarget: webhookUrl ? { url: webhookUrl.replace(/\/$/, '') } : { service: webhookService },
    ...(certFile ? { tlsCertFile: certFile, tlsPrivateKeyFile: keyFile } : {}),
    ...(webhookClientCa ? { webhookClientCaFile: webhookClientCa } : {}),
    resyncSeconds: integer('resync-period', str('resync-period'), 10, 86400),
    workers: integer('workers', str('workers'), 1, 64),
    logLevel,
    gateway: parseGatewayOptions(values, str('agent-image').trim()),
  };
  // The gateway's command line as the manager would run it, through the gateway's own checks: a flag
  // of --gateway-args the gateway would refuse stops the manager here, not the gateway's pods.
  const { gateway } = options;
  checkGatewayCommandLine({
    names: gatewayNames(namespace, gateway.name, gateway.credentialNamespace),
    options: gateway,
    addonName,
  });
  return options;
}

/** The webhook client CA bundle: a readable file with at least one PEM certificate. */
export function readWebhookClientCa(file: string): string {
  let pem: string;
  try {
    pem = readFileSync(file, 'utf8');
  } catch (err) {
    throw new OptionsError(`--webhook-client-ca: cannot read ${file}: ${(err as Error).message}`);
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) {
    throw new OptionsError(`--webhook-client-ca: ${file} holds no PEM certificate`);
  }
  return pem;
}

/** The hub apiserver calls webhooks over https only, at a URL without credentials, query or fragment. */
export function parseWebhookUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new OptionsError(`--webhook-url: "${text}" is not a URL`);
  }
  if (url.protocol !== 'https:' || url.username || url.password || url.search || url.hash) {
    throw new OptionsError(
      `--webhook-url: "${text}" must be https://host[:port] (no credentials, query or fragment): the apiserver calls webhooks over TLS`,
    );
  }
  if (url.pathname !== '/') {
    throw new OptionsError(
      `--webhook-url: "${text}" must not have a path: the manager adds its webhook's path`,
    );
  }
  return url;
}

export function parsePlacements(text: string): PlacementRef[] {
  const placements: PlacementRef[] = [];
  for (const item of text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [namespace, name, extra] = item.split('/');
    if (extra !== undefined || !namespace || !name || !isDnsLabel(namespace) || !isDnsLabel(name)) {
      throw new OptionsError(`--install-placements: "${item}" is not namespace/name of a Placement`);
    }
    placements.push({ namespace, name });
  }
  return placements;
}

function readServiceAccountNamespace(): string | undefined {
  try {
    return (
      readFileSync('/var/run/secrets/kubernetes.io/serviceaccount/namespace', 'utf8').trim() || undefined
    );
  } catch {
    return undefined;
  }
}

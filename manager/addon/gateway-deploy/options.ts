/**
 * The manager's flags for the gateway it deploys (--deploy-gateway and
 * --gateway-*). A table and a pure parser of their own, merged into the
 * manager's flags by ../options.ts, so that everything about the gateway's
 * shape is read, checked and unit tested in one place.
 *
 * Structured settings (resources, node selector, tolerations, extra gateway
 * flags) are JSON: the chart renders them with `toJson` from its values, and
 * a change of any of them changes the manager's pod template, so `helm
 * upgrade` rolls the manager, which then rolls the gateway.
 *
 * The extra gateway flags (--gateway-args) are checked here by the gateway's
 * own table and parser (manager/gateway/options.ts), so that a misspelt flag
 * or a bad value stops the manager at start rather than every gateway pod.
 */
import { bool, integer, OptionsError } from '../../../shared/cli-flags.ts';
import { checkGatewayArgs, type GatewayFlagName } from '../../gateway/options.ts';
import { type PodSettings, parsePodSettings, podSettingsFlags } from '../core/pod-settings.ts';
import { parseRotationSchedule } from './rotation-schedule.ts';

export type PullPolicy = 'Always' | 'IfNotPresent' | 'Never';

export interface GatewayDeployOptions {
  /** Off: the manager leaves the gateway alone (someone else installs it). */
  enabled: boolean;
  /** Name of the gateway's Deployment, Service, ServiceAccount and PodDisruptionBudget in the manager's namespace. */
  name: string;
  image: string;
  imagePullPolicy: PullPolicy;
  imagePullSecrets: string[];
  replicas: number;
  /** The gateway's HTTPS container port. */
  port: number;
  /** Non-zero: the container port is also bound on the node (hostPort). */
  hostPort: number;
  /** Non-empty: the Service is `type: ExternalName` with this name, for an apiserver that cannot reach pod IPs. */
  serviceExternalName: string;
  /** Namespace of the cluster credential Secrets (the gateway's --secret-namespace). */
  credentialNamespace: string;
  /** More gateway flags, after the ones the manager sets itself. */
  args: string[];
  resources: Record<string, unknown>;
  nodeSelector: Record<string, string>;
  tolerations: Record<string, unknown>[];
  /** Affinity (over the default spread of replicas), priorityClassName, extra pod annotations and labels. */
  pod: PodSettings;
  caValiditySeconds: number;
  certificateValiditySeconds: number;
  /** A node-cron expression (UTC): rotations wait for its next tick, up to a sixth of life left. '': none. */
  rotationSchedule: string;
  /**
   * A ClusterRole whose deletion removes the gateway (the chart passes its own manager ClusterRole, so
   * `helm uninstall` does): the APIService is owned by it, and everything else by it and by the
   * APIService, so the garbage collector deletes the APIService first. Empty: no owner references.
   */
  ownerClusterRole: string;
}

// Rotation is measured on the certificate's life, of which the backdate for clock skew is a tenth of the
// validity at most (serving-certificate.ts): a minute still rotates 38 s after issue, 22 s before expiry.
const minValiditySeconds = 60;
const maxValiditySeconds = 100 * 365 * 86400;
/** Shorter validities exist so that tests can watch rotations happen: the manager warns about them. */
export const shortValiditySeconds = 3600;

/** Flags the manager sets on the gateway itself: --gateway-args may not repeat them. */
export const managedGatewayFlags = [
  'secure-port',
  'bind-address',
  'tls-cert-file',
  'tls-private-key-file',
  'kubeconfig',
  'secret-namespace',
  'tunnel-addon-name',
  // The replicas' shared key (workload.ts): one of their own would make them disagree.
  'probe-verdict-key-file',
  // Tunnel sharing between replicas (workload.ts: peerFlags).
  'tunnel-peer-port',
  'tunnel-peer-cert',
  'tunnel-peer-key',
  'tunnel-peer-ca',
  'tunnel-peer-address',
  'tunnel-replica-name',
  'tunnel-lease-namespace',
  // The namespace in the replicas' peer certificate subjects, which the manager's approver checks.
  'tunnel-peer-namespace',
] as const satisfies readonly GatewayFlagName[];

export const gatewayFlags = {
  'deploy-gateway': {
    type: 'string',
    default: 'false',
    help: 'deploy and repair the gateway on the hub: Deployment, Service, PodDisruptionBudget, serving certificate, RBAC and the APIService (registered once the gateway is available)',
  },
  'gateway-name': {
    type: 'string',
    default: 'cluster-gateway',
    help: "name of the gateway's Deployment, Service, ServiceAccount and PodDisruptionBudget in --namespace",
  },
  'gateway-image': {
    type: 'string',
    default: '',
    help: "the gateway's container image (default: --agent-image, the same image)",
  },
  'gateway-image-pull-policy': {
    type: 'string',
    default: 'IfNotPresent',
    help: 'Always, IfNotPresent or Never',
  },
  'gateway-image-pull-secrets': {
    type: 'string',
    default: '',
    help: 'comma-separated Secret names in --namespace for pulling the gateway image',
  },
  'gateway-replicas': { type: 'string', default: '2', help: 'gateway replicas (spread over nodes)' },
  'gateway-port': { type: 'string', default: '9443', help: "the gateway's HTTPS container port" },
  'gateway-host-port': {
    type: 'string',
    default: '0',
    help: 'also bind the container port on the node (0: no); with --gateway-service-external-name, the APIService port',
  },
  'gateway-service-external-name': {
    type: 'string',
    default: '',
    help: "make the gateway's Service type ExternalName with this host, for a hub apiserver that cannot reach pod IPs (the gateway then runs with --gateway-host-port). Empty: a ClusterIP Service",
  },
  'gateway-credential-namespace': {
    type: 'string',
    default: 'open-cluster-management-credentials',
    help: "namespace of the cluster credential Secrets (the gateway's --secret-namespace); the gateway may read and annotate Secrets there only",
  },
  'gateway-args': {
    type: 'string',
    default: '[]',
    help: `JSON array of more gateway flags, e.g. ["--log-level=debug"] (not ${managedGatewayFlags.map((f) => `--${f}`).join(', ')}: the manager sets those)`,
  },
  'gateway-resources': {
    type: 'string',
    default: '{}',
    help: "JSON: the gateway container's resources (requests, limits)",
  },
  'gateway-node-selector': { type: 'string', default: '{}', help: "JSON: the gateway pods' nodeSelector" },
  'gateway-tolerations': { type: 'string', default: '[]', help: "JSON: the gateway pods' tolerations" },
  // An affinity of a kind the gateway sets (podAntiAffinity: replicas spread over nodes) replaces it.
  ...podSettingsFlags('gateway', 'the gateway pods'),
  'gateway-ca-validity': {
    type: 'string',
    default: String(5 * 365 * 86400),
    help: `seconds the gateway's CA is valid (${minValiditySeconds} to ${maxValiditySeconds}); renewed with a third left, the old CA kept in the APIService caBundle until it expires; lowering it renews at once (or at the next --gateway-rotation-schedule tick). Below ${shortValiditySeconds}: for tests that force rotations only (the kubelet may take a minute or more to update the gateway's mounted certificate)`,
  },
  'gateway-certificate-validity': {
    type: 'string',
    default: String(90 * 86400),
    help: `seconds the gateway's serving certificate is valid (${minValiditySeconds} up to --gateway-ca-validity); renewed with a third left. Below ${shortValiditySeconds}: for tests only, as for --gateway-ca-validity`,
  },
  'gateway-rotation-schedule': {
    type: 'string',
    default: '',
    help: 'maintenance window for certificate rotation: a cron expression in UTC (5 fields, or 6 with seconds first; e.g. "0 2 * * 6", Saturdays 02:00). A due rotation (a third of life left) waits for its next tick, but never beyond a sixth of life left. Empty: rotate as soon as due',
  },
  'owner-cluster-role': {
    type: 'string',
    default: '',
    help: 'a ClusterRole whose deletion removes what the manager made on the hub: the gateway (its APIService first), the ClusterManagementAddOn (and so every agent) and the webhook registration. The chart passes its own, so helm uninstall does. Empty: nothing is removed with it',
  },
} as const;

const pullPolicies: PullPolicy[] = ['Always', 'IfNotPresent', 'Never'];
const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** `values` as parseFlags returns them for gatewayFlags; `agentImage` is the default image. */
export function parseGatewayOptions(
  values: Record<string, string | boolean | undefined>,
  agentImage: string,
): GatewayDeployOptions {
  const str = (k: keyof typeof gatewayFlags) => String(values[k] ?? gatewayFlags[k].default).trim();
  const name = str('gateway-name');
  // Cluster-scoped RBAC names are derived from it with a suffix: keep room for it.
  if (!dnsLabel.test(name) || name.length > 40) {
    throw new OptionsError(
      `--gateway-name: "${name}" must be a lowercase DNS label of at most 40 characters`,
    );
  }
  const pullPolicy = str('gateway-image-pull-policy');
  if (!pullPolicies.includes(pullPolicy as PullPolicy)) {
    throw new OptionsError(
      `--gateway-image-pull-policy: "${pullPolicy}" is not one of ${pullPolicies.join(', ')}`,
    );
  }
  const pullSecrets = str('gateway-image-pull-secrets')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const secret of pullSecrets) {
    if (!dnsSubdomain.test(secret)) {
      throw new OptionsError(`--gateway-image-pull-secrets: "${secret}" is not a Secret name`);
    }
  }
  const credentialNamespace = str('gateway-credential-namespace');
  if (!dnsLabel.test(credentialNamespace) || credentialNamespace.length > 63) {
    throw new OptionsError(
      `--gateway-credential-namespace: "${credentialNamespace}" is not a namespace name`,
    );
  }
  const externalName = str('gateway-service-external-name');
  if (externalName && !dnsSubdomain.test(externalName)) {
    throw new OptionsError(`--gateway-service-external-name: "${externalName}" is not a DNS name`);
  }
  const hostPort = integer('gateway-host-port', str('gateway-host-port'), 0, 65535);
  const ownerClusterRole = str('owner-cluster-role');
  if (ownerClusterRole && /[/%]|^\.\.?$/.test(ownerClusterRole)) {
    throw new OptionsError(`--owner-cluster-role: "${ownerClusterRole}" is not a ClusterRole name`);
  }
  const caValiditySeconds = integer(
    'gateway-ca-validity',
    str('gateway-ca-validity'),
    minValiditySeconds,
    maxValiditySeconds,
  );
  const certificateValiditySeconds = integer(
    'gateway-certificate-validity',
    str('gateway-certificate-validity'),
    minValiditySeconds,
    maxValiditySeconds,
  );
  // A serving certificate outliving its CA would be renewed against a CA that is itself being replaced.
  if (certificateValiditySeconds > caValiditySeconds) {
    throw new OptionsError(
      `--gateway-certificate-validity (${certificateValiditySeconds} s) must not be longer than --gateway-ca-validity (${caValiditySeconds} s)`,
    );
  }
  const rotationSchedule = str('gateway-rotation-schedule');
  try {
    parseRotationSchedule(rotationSchedule);
  } catch (err) {
    throw new OptionsError(`--gateway-rotation-schedule: ${(err as Error).message}`);
  }
  return {
    enabled: bool('deploy-gateway', str('deploy-gateway')),
    name,
    image: str('gateway-image') || agentImage,
    imagePullPolicy: pullPolicy as PullPolicy,
    imagePullSecrets: pullSecrets,
    replicas: integer('gateway-replicas', str('gateway-replicas'), 1, 100),
    port: integer('gateway-port', str('gateway-port'), 1, 65535),
    hostPort,
    serviceExternalName: externalName,
    credentialNamespace,
    args: gatewayArgs(str('gateway-args')),
    resources: jsonObject('gateway-resources', str('gateway-resources')),
    nodeSelector: stringMap('gateway-node-selector', str('gateway-node-selector')),
    tolerations: jsonArray('gateway-tolerations', str('gateway-tolerations')).map((t, i) => {
      if (!t || typeof t !== 'object' || Array.isArray(t)) {
        throw new OptionsError(`--gateway-tolerations: item ${i} is not an object`);
      }
      return t as Record<string, unknown>;
    }),
    pod: parsePodSettings('gateway', values),
    caValiditySeconds,
    certificateValiditySeconds,
    rotationSchedule,
    ownerClusterRole,
  };
}

function gatewayArgs(text: string): string[] {
  const args = jsonArray('gateway-args', text).map((arg, i) => {
    if (typeof arg !== 'string' || !arg.startsWith('--')) {
      throw new OptionsError(`--gateway-args: item ${i} (${JSON.stringify(arg)}) is not a --flag string`);
    }
    const flag = arg.slice(2).split('=')[0] ?? '';
    if ((managedGatewayFlags as readonly string[]).includes(flag)) {
      throw new OptionsError(
        `--gateway-args: --${flag} is set by the manager (see the --gateway-* flags); remove it`,
      );
    }
    return arg;
  });
  checkAsGateway(args);
  return args;
}

/**
 * `args` as the gateway would take them (manager/gateway/options.ts: its flags, parser and value
 * checks), or an OptionsError naming the flag; workload.ts checks the whole command line the same way.
 */
export function checkAsGateway(args: string[]): void {
  try {
    checkGatewayArgs(args);
  } catch (err) {
    if (!(err instanceof OptionsError)) throw err;
    throw new OptionsError(`--gateway-args: ${err.message}`);
  }
}

function parseJson(flag: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new OptionsError(`--${flag}: not JSON (${(err as Error).message})`);
  }
}

function jsonArray(flag: string, text: string): unknown[] {
  const value = parseJson(flag, text);
  if (!Array.isArray(value)) throw new OptionsError(`--${flag}: must be a JSON array`);
  return value;
}

function jsonObject(flag: string, text: string): Record<string, unknown> {
  const value = parseJson(flag, text);
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw new OptionsError(`--${flag}: must be a JSON object`);
  }
  return value as Record<string, unknown>;
}

function stringMap(flag: string, text: string): Record<string, string> {
  const value = jsonObject(flag, text);
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== 'string') throw new OptionsError(`--${flag}: the value of "${k}" must be a string`);
  }
  return value as Record<string, string>;
}

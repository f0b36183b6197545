/**
 * AddOnDeploymentConfig -> the values the agent manifests are rendered
 * from. Pure: which config applies to an addon, and what it means, with the
 * same rules as OCM's addon-framework (addonfactory/addondeploymentconfig.go,
 * utils/addon_config.go), so a config written for any OCM addon means the
 * same here.
 */
import { createHash } from 'node:crypto';
// The values become the agent's flags: checked with the agent's own rules (agent/options.ts).
import { isDnsLabel, type TrustModel } from '../../../agent/options.ts';
import { logLevels } from '../../../shared/cli-flags.ts';
import type { AddonDefinition } from '../core/addon.ts';
import {
  type AddOnDeploymentConfigSpec,
  addonGroup,
  type ClusterManagementAddOn,
  type ConfigReferent,
  type ContainerResources,
  type ManagedClusterAddOn,
  type Toleration,
} from '../core/resources.ts';

export const deploymentConfigResource = 'addondeploymentconfigs';

export interface DeploymentConfigRef {
  namespace: string;
  name: string;
  /** From OCM's status.configReferences; goes into the work's config-spec-hash annotation. */
  specHash?: string;
  /** Where the reference came from, for messages. */
  source:
    | 'status.configReferences'
    | 'spec.configs'
    | 'ClusterManagementAddOn default'
    | 'ClusterManagementAddOn placement';
}

export interface AgentValues {
  installNamespace: string;
  image: string;
  nodeSelector: Record<string, string>;
  tolerations: Toleration[];
  proxy: { httpProxy?: string; httpsProxy?: string; noProxy?: string; caBundle?: string };
  logLevel: string;
  /** The agent container's resources: the defaults, or the last resourceRequirements entry matching it. */
  resources: ContainerResources;
  /** customizedVariables this agent does not know (reported, never passed on). */
  ignoredVariables: string[];
  /**
   * The tunnel's trust model (customizedVariables TUNNEL_TRUST_MODEL), when one is chosen; absent: the
   * agent relays TLS bytes and writes nothing on the hub (an admin's Secret decides, docs/tunnel.md).
   */
  tunnel?: TunnelValues;
}

export interface TunnelValues {
  trustModel: TrustModel;
  /** Where the agent writes its cluster's credential Secret: the gateway's --secret-namespace. */
  credentialNamespace: string;
  /** hub-credential: what the hub may do on the cluster (HUB_CREDENTIAL_CLUSTER_ROLE). */
  hubCredentialClusterRole?: string;
}

/** TUNNEL_TRUST_MODEL values, as the AddOnDeploymentConfig spells them. */
export const trustModelValues = {
  HubCredential: 'hub-credential',
  NoCredential: 'no-credential',
} as const satisfies Record<string, TrustModel>;
export const defaultHubCredentialClusterRole = 'cluster-admin';

export class InvalidConfigError extends Error {}

type AdcReference = { group?: string; resource?: string } & Partial<ConfigReferent>;

const isAdc = (c: { group?: string; resource?: string }) =>
  c.group === addonGroup && c.resource === deploymentConfigResource;

/**
 * The ADC references the hub's admins configured for `mca`, as OCM's addon-manager resolves them: the
 * addon's own spec.configs when it names one, else those of the ClusterManagementAddOn (its default and
 * its install strategy's placements; which placement picked the cluster is OCM's to decide, and every
 * one of them is an admin's choice). Empty namespaces are the cluster's, as for spec.configs.
 */
function configuredRefs(
  mca: ManagedClusterAddOn,
  cma: ClusterManagementAddOn | undefined,
): DeploymentConfigRef[] {
  const clusterNamespace = mca.metadata.namespace || '';
  const own = mca.spec?.configs?.find(isAdc);
  if (own?.name)
    return [{ namespace: own.namespace || clusterNamespace, name: own.name, source: 'spec.configs' }];
  const refs: DeploymentConfigRef[] = [];
  const fallback: ConfigReferent | undefined = cma?.spec?.supportedConfigs?.find(isAdc)?.defaultConfig;
  if (fallback?.name) {
    refs.push({
      namespace: fallback.namespace ?? '',
      name: fallback.name,
      source: 'ClusterManagementAddOn default',
    });
  }
  // v1alpha1 installStrategy.placements[].configs (not in core/resources.ts's type: read, never written).
  const placements = (cma?.spec?.installStrategy?.placements ?? []) as Array<{ configs?: AdcReference[] }>;
  for (const placement of placements) {
    for (const config of placement.configs ?? []) {
      if (!isAdc(config) || !config.name) continue;
      refs.push({
        namespace: config.namespace || clusterNamespace,
        name: config.name,
        source: 'ClusterManagementAddOn placement',
      });
    }
  }
  return refs;
}

/** The ADC OCM's addon-manager resolved, from status.configReferences, if any. */
function statusRef(mca: ManagedClusterAddOn): DeploymentConfigRef | undefined {
  const resolved = mca.status?.configReferences?.find((c) => isAdc(c) && c.desiredConfig?.name);
  if (!resolved?.desiredConfig) return undefined;
  return {
    namespace: resolved.desiredConfig.namespace || mca.metadata.namespace || '',
    name: resolved.desiredConfig.name,
    ...(resolved.desiredConfig.specHash ? { specHash: resolved.desiredConfig.specHash } : {}),
    source: 'status.configReferences',
  };
}

/**
 * The AddOnDeploymentConfig in effect for `mca`:
 * 1. status.configReferences desiredConfig (OCM's addon-manager resolved it: MCA spec.configs over
 *    Placement configs over the CMA default), with its spec hash, *when it is one of those the hub's
 *    admins configured*: the status is not only OCM's to write. OCM gives every managed cluster's
 *    klusterlet `patch`/`update` on managedclusteraddons/status in its namespace (registration's
 *    ClusterRole open-cluster-management:managedcluster:registration, OCM v1.3.1), so a managed
 *    cluster could otherwise pick any AddOnDeploymentConfig on the hub for its agent: another
 *    cluster's, with its TUNNEL_TRUST_MODEL, HUB_CREDENTIAL_CLUSTER_ROLE, registries and proxy. The
 *    spec (get/list/watch only for the klusterlet) and the ClusterManagementAddOn are the admins';
 * 2. otherwise spec.configs, and before OCM has resolved anything, the same;
 * 3. otherwise the ClusterManagementAddOn's default config.
 * ignoredConfigReference() says when and why a status reference was not used.
 */
export function deploymentConfigRef(
  mca: ManagedClusterAddOn,
  cma: ClusterManagementAddOn | undefined,
): DeploymentConfigRef | undefined {
  const configured = configuredRefs(mca, cma);
  const resolved = statusRef(mca);
  if (resolved && configured.some((c) => c.namespace === resolved.namespace && c.name === resolved.name)) {
    return resolved;
  }
  // Not the placements' (which one applies is OCM's decision, known only from a status we do not believe).
  return configured.find((c) => c.source !== 'ClusterManagementAddOn placement') ?? undefined;
}

/**
 * Why `mca`'s status.configReferences names an AddOnDeploymentConfig that is not used (none of the
 * hub's admins configured it for this addon); undefined when it is used or there is none.
 */
export function ignoredConfigReference(
  mca: ManagedClusterAddOn,
  cma: ClusterManagementAddOn | undefined,
): string | undefined {
  const resolved = statusRef(mca);
  if (!resolved || deploymentConfigRef(mca, cma)?.source === 'status.configReferences') return undefined;
  return `status.configReferences names AddOnDeploymentConfig ${resolved.namespace}/${resolved.name}, which neither the addon's spec.configs nor the ClusterManagementAddOn configures: it is not used (the status may be written by the managed cluster's klusterlet)`;
}

/**
 * Where the agent goes: the config's agentInstallNamespace, then the MCA's
 * (v1alpha1) spec.installNamespace, then the manager's default, as
 * addon-framework resolves it. Registration (status.namespace) must use the
 * same value: OCM's registration agent writes the hub kubeconfig Secret there.
 */
export function installNamespace(
  addon: Pick<AddonDefinition, 'defaultInstallNamespace'>,
  mca: ManagedClusterAddOn,
  spec: AddOnDeploymentConfigSpec | undefined,
): string {
  return spec?.agentInstallNamespace || mca.spec?.installNamespace || addon.defaultInstallNamespace;
}

/** addon-framework's image override: a matching source prefix becomes the mirror; an empty source re-homes every image. */
export function overrideImage(registries: AddOnDeploymentConfigSpec['registries'], image: string): string {
  let result = image;
  for (const registry of registries ?? []) {
    const name = overrideImageDirectly(registry.source ?? '', registry.mirror ?? '', image);
    if (name !== image) result = name;
  }
  return result;
}

function overrideImageDirectly(sourceIn: string, mirrorIn: string, image: string): string {
  const source = sourceIn.replace(/\/$/, '');
  const mirror = mirrorIn.replace(/\/$/, '');
  const nameTag = image.split('/').at(-1) ?? image;
  if (source === '') return mirror === '' ? nameTag : `${mirror}/${nameTag}`;
  if (!image.startsWith(source)) return image;
  return `${mirror}${image.slice(source.length)}`;
}

/** The agent Deployment's only container. */
export const agentContainerName = 'agent';
/** What the agent asks for without a config: measured idle RSS is about 80 MB (docs/benchmarks.md). */
export const defaultAgentResources: ContainerResources = {
  requests: { cpu: '10m', memory: '64Mi' },
  limits: { memory: '128Mi' },
};

/**
 * addon-framework's resourceRequirements: `containerID` is `<kind>:<name>:<container>`, `*` in any part
 * matches anything, and the last matching entry wins (whole, as its requests and limits are given).
 */
export function containerResources(
  requirements: AddOnDeploymentConfigSpec['resourceRequirements'],
  deployment: string,
  container: string,
): ContainerResources {
  let result = defaultAgentResources;
  for (const requirement of requirements ?? []) {
    const parts = requirement.containerID.split(':');
    if (parts.length !== 3) continue; // the CRD's pattern rejects these; never guess
    const wanted = ['deployments', deployment, container];
    if (parts.every((part, i) => wildcardMatch(part, wanted[i] ?? ''))) result = requirement.resources ?? {};
  }
  return result;
}

function wildcardMatch(pattern: string, value: string): boolean {
  const regex = pattern
    .split('*')
    .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
  return new RegExp(`^${regex}$`).test(value);
}

export function agentValues(
  addon: Pick<AddonDefinition, 'defaultInstallNamespace' | 'agentImage' | 'agentName'> &
    Partial<Pick<AddonDefinition, 'credentialNamespace'>>,
  mca: ManagedClusterAddOn,
  spec: AddOnDeploymentConfigSpec | undefined,
  where = 'the AddOnDeploymentConfig',
): AgentValues {
  const namespace = installNamespace(addon, mca, spec);
  if (!isDnsLabel(namespace)) {
    throw new InvalidConfigError(
      `install namespace "${namespace}" (from ${where} or spec.installNamespace) is not a namespace name`,
    );
  }
  let logLevel = 'info';
  let trustModel: TunnelValues['trustModel'] | undefined;
  let clusterRole: string | undefined;
  const ignoredVariables: string[] = [];
  for (const variable of spec?.customizedVariables ?? []) {
    if (variable.name === 'TUNNEL_TRUST_MODEL') {
      const value = (variable.value ?? '').trim();
      if (value === '') continue;
      trustModel = Object.hasOwn(trustModelValues, value)
        ? trustModelValues[value as keyof typeof trustModelValues]
        : undefined;
      if (!trustModel) {
        throw new InvalidConfigError(
          `${where}: customizedVariables TUNNEL_TRUST_MODEL "${value}" is not HubCredential or NoCredential`,
        );
      }
      continue;
    }
    if (variable.name === 'HUB_CREDENTIAL_CLUSTER_ROLE') {
      clusterRole = (variable.value ?? '').trim();
      if (!/^[a-z0-9]([-a-z0-9.:]*[a-z0-9])?$/.test(clusterRole)) {
        throw new InvalidConfigError(
          `${where}: customizedVariables HUB_CREDENTIAL_CLUSTER_ROLE "${variable.value ?? ''}" is not a ClusterRole name`,
        );
      }
      continue;
    }
    if (variable.name === 'LOG_LEVEL') {
      const value = (variable.value ?? '').trim().toLowerCase();
      if (!(logLevels as readonly string[]).includes(value)) {
        throw new InvalidConfigError(
          `${where}: customizedVariables LOG_LEVEL "${variable.value ?? ''}" is not one of ${logLevels.join(', ')}`,
        );
      }
      logLevel = value;
    } else {
      ignoredVariables.push(variable.name);
    }
  }
  const proxy: AgentValues['proxy'] = {};
  const p = spec?.proxyConfig;
  if (p?.httpProxy) proxy.httpProxy = p.httpProxy;
  if (p?.httpsProxy) proxy.httpsProxy = p.httpsProxy;
  if (p?.noProxy) proxy.noProxy = p.noProxy;
  if (p?.caBundle) {
    // format: byte in the CRD: base64 of the PEM bundle.
    const pem = Buffer.from(p.caBundle, 'base64').toString('utf8');
    if (!pem.includes('-----BEGIN CERTIFICATE-----')) {
      throw new InvalidConfigError(
        `${where}: proxyConfig.caBundle is not a base64-encoded PEM certificate bundle`,
      );
    }
    proxy.caBundle = pem;
  }
  return {
    installNamespace: namespace,
    resources: containerResources(spec?.resourceRequirements, addon.agentName, agentContainerName),
    image: overrideImage(spec?.registries, addon.agentImage),
    nodeSelector: { ...(spec?.nodePlacement?.nodeSelector ?? {}) },
    tolerations: [...(spec?.nodePlacement?.tolerations ?? [])],
    proxy,
    logLevel,
    ignoredVariables,
    ...(trustModel
      ? {
          tunnel: {
            trustModel,
            credentialNamespace: addon.credentialNamespace ?? 'open-cluster-management-credentials',
            ...(trustModel === 'hub-credential'
              ? { hubCredentialClusterRole: clusterRole ?? defaultHubCredentialClusterRole }
              : {}),
          },
        }
      : {}),
  };
}

/** Stable hash of the values: a change rolls the agent out again even when it shows nowhere else in the pod template. */
export function valuesHash(values: AgentValues): string {
  return createHash('sha256').update(stableJson(values)).digest('hex').slice(0, 16);
}

export function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stableJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

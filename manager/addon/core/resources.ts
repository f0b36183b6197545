/**
 * The OCM objects the manager reads and writes, typed by the fields it uses.
 *
 * API version: addon.open-cluster-management.io/v1alpha1, on purpose. OCM
 * v1.2.1 and v1.3.1 both serve v1alpha1 and v1beta1 with v1alpha1 as the
 * *storage* version (checked in .cache/ocm/v1.{2,3}.1/crds/hub); OCM v1.3's
 * own components moved to v1beta1 and go through the conversion webhook.
 * Reading and writing the storage version means:
 * - it works on both releases with nothing converted on our side of the wire,
 *   and no write of ours can lose a field in a round trip;
 * - the fields v1beta1 moved into annotations are plain fields here
 *   (ManagedClusterAddOn spec.installNamespace, which `clusteradm addon
 *   enable --namespace` writes in v1alpha1; ClusterManagementAddOn
 *   spec.supportedConfigs[].defaultConfig instead of v1beta1 defaultConfigs).
 * When OCM drops v1alpha1 (not before it stops being the storage version),
 * this file and the builders that use it are the only places to change.
 */
import type { KubeObject } from '../../../shared/kube/client.ts';
import type { OwnerReference } from '../../../shared/kube/lease.ts';

export type { OwnerReference } from '../../../shared/kube/lease.ts';

export const addonGroup = 'addon.open-cluster-management.io';
export const addonApiVersion = `${addonGroup}/v1alpha1`;
export const addonApi = `/apis/${addonApiVersion}`;
export const workApiVersion = 'work.open-cluster-management.io/v1';
export const workApi = `/apis/${workApiVersion}`;

/**
 * The one builder of a ManagedClusterAddOn's URL (every name encoded): the
 * object, or its status subresource.
 */
export function managedClusterAddOnPath(cluster: string, name: string, subresource?: 'status'): string {
  return `${addonApi}/namespaces/${encodeURIComponent(cluster)}/managedclusteraddons/${encodeURIComponent(name)}${subresource ? `/${subresource}` : ''}`;
}

/** The ClusterManagementAddOn's URL (cluster-scoped), or its status subresource. */
export function clusterManagementAddOnPath(name: string, subresource?: 'status'): string {
  return `${addonApi}/clustermanagementaddons/${encodeURIComponent(name)}${subresource ? `/${subresource}` : ''}`;
}

/** Label OCM (addon-framework, the addon-manager's progressing controller) uses to find an addon's works. */
export const addonNameLabel = 'open-cluster-management.io/addon-name';
/** Annotation on the deploy work: the spec hashes of the configs it was rendered from (OCM's Progressing reads it). */
export const configSpecHashAnnotation = 'open-cluster-management.io/config-spec-hash';

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
}

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  [key: string]: unknown;
}

export interface ConfigReferent {
  namespace?: string;
  name: string;
}

export interface ConfigReference extends ConfigReferent {
  group: string;
  resource: string;
  desiredConfig?: ConfigReferent & { specHash?: string };
  lastAppliedConfig?: ConfigReferent & { specHash?: string };
}

export interface ManagedClusterAddOn extends KubeObject {
  metadata: ObjectMeta;
  spec?: {
    installNamespace?: string;
    configs?: ({ group: string; resource: string } & ConfigReferent)[];
  };
  status?: {
    namespace?: string;
    conditions?: Condition[];
    configReferences?: ConfigReference[];
    healthCheck?: { mode?: string };
    registrations?: unknown[];
    [key: string]: unknown;
  };
}

export interface ClusterManagementAddOn extends KubeObject {
  metadata: ObjectMeta;
  spec?: {
    addOnMeta?: { displayName?: string; description?: string };
    supportedConfigs?: { group: string; resource: string; defaultConfig?: ConfigReferent }[];
    installStrategy?: {
      type: 'Manual' | 'Placements';
      placements?: { namespace: string; name: string; rolloutStrategy?: { type: string } }[];
    };
  } /** Written by OCM (and the spec hashes by configs/spec-hash-controller.ts); v1alpha1 field names. */;
  status?: { [key: string]: unknown };
}

export interface Toleration {
  key?: string;
  operator?: string;
  value?: string;
  effect?: string;
  tolerationSeconds?: number;
}

export interface AddOnDeploymentConfigSpec {
  agentInstallNamespace?: string;
  customizedVariables?: { name: string; value?: string }[];
  nodePlacement?: { nodeSelector?: Record<string, string>; tolerations?: Toleration[] };
  registries?: { source?: string; mirror: string }[];
  proxyConfig?: { httpProxy?: string; httpsProxy?: string; noProxy?: string; caBundle?: string };
  resourceRequirements?: { containerID: string; resources?: ContainerResources }[];
}

/** A container's compute resources (core/v1 ResourceRequirements, the parts an agent uses). */
export interface ContainerResources {
  requests?: Record<string, string>;
  limits?: Record<string, string>;
}

export interface AddOnDeploymentConfig extends KubeObject {
  metadata: ObjectMeta;
  spec?: AddOnDeploymentConfigSpec;
}

export interface ManagedCluster extends KubeObject {
  metadata: ObjectMeta;
  spec?: { hubAcceptsClient?: boolean; [key: string]: unknown };
  status?: { conditions?: Condition[]; [key: string]: unknown };
}

export interface FeedbackValue {
  name: string;
  fieldValue: {
    type: 'Integer' | 'String' | 'Boolean' | 'JsonRaw';
    integer?: number;
    string?: string;
    boolean?: boolean;
    jsonRaw?: string;
  };
}

export interface ManifestWork extends KubeObject {
  metadata: ObjectMeta;
  spec?: {
    workload?: { manifests?: KubeObject[] };
    deleteOption?: unknown;
    manifestConfigs?: unknown[];
  };
  status?: {
    conditions?: Condition[];
    resourceStatus?: {
      manifests?: {
        resourceMeta: { group?: string; resource?: string; kind?: string; name?: string; namespace?: string };
        conditions?: Condition[];
        statusFeedback?: { values?: FeedbackValue[] };
      }[];
    };
  };
}

export function findCondition(conditions: Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

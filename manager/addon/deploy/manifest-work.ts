/**
 * The deploy ManifestWork `addon-<addon>-deploy-0` and the ManifestApplied
 * condition read from it. Pure.
 */
import { createHash } from 'node:crypto';
import type { AddonDefinition } from '../core/addon.ts';
import { manifestAppliedType } from '../core/conditions.ts';
import {
  addonApiVersion,
  addonGroup,
  addonNameLabel,
  type Condition,
  configSpecHashAnnotation,
  findCondition,
  type ManagedClusterAddOn,
  type ManifestWork,
  workApiVersion,
} from '../core/resources.ts';
import { agentManifests, sharedNamespaces } from './agent-manifests.ts';
import {
  type AgentValues,
  type DeploymentConfigRef,
  deploymentConfigResource,
  stableJson,
} from './deployment-config.ts';

/** Hash of what this manager wrote: a field it stops writing changes it, so removals are applied too. */
export const workHashAnnotation = 'addon.cluster-gateway.oam.dev/work-hash';

/** Status the work agent reports back from the agent Deployment (read by the availability controller). */
export const deploymentFeedbackPaths = [
  { name: 'Generation', path: '.metadata.generation' },
  { name: 'ObservedGeneration', path: '.status.observedGeneration' },
  { name: 'UpdatedReplicas', path: '.status.updatedReplicas' },
  { name: 'UnavailableReplicas', path: '.status.unavailableReplicas' },
  { name: 'AvailableStatus', path: '.status.conditions[?(@.type=="Available")].status' },
  { name: 'AvailableReason', path: '.status.conditions[?(@.type=="Available")].reason' },
  { name: 'AvailableMessage', path: '.status.conditions[?(@.type=="Available")].message' },
  { name: 'ProgressingReason', path: '.status.conditions[?(@.type=="Progressing")].reason' },
  { name: 'ProgressingMessage', path: '.status.conditions[?(@.type=="Progressing")].message' },
  { name: 'ReplicaFailureMessage', path: '.status.conditions[?(@.type=="ReplicaFailure")].message' },
];

export function deployWork(
  addon: Pick<
    AddonDefinition,
    'name' | 'agentName' | 'spokeLeaseName' | 'hubKubeconfigSecretName' | 'deployWorkName'
  >,
  mca: ManagedClusterAddOn,
  values: AgentValues,
  config: DeploymentConfigRef | undefined,
): ManifestWork {
  const cluster = mca.metadata.namespace ?? '';
  const ns = values.installNamespace;
  // OCM's addon-manager compares these hashes with status.configReferences to report Progressing/Completed.
  const annotations: Record<string, string> = {};
  if (config?.specHash) {
    annotations[configSpecHashAnnotation] = JSON.stringify({
      [`${deploymentConfigResource}.${addonGroup}/${config.namespace}/${config.name}`]: config.specHash,
    });
  }
  const work: ManifestWork = {
    apiVersion: workApiVersion,
    kind: 'ManifestWork',
    metadata: {
      name: addon.deployWorkName,
      namespace: cluster,
      labels: { [addonNameLabel]: addon.name },
      // Garbage collection removes the work with its addon even while no manager runs.
      ownerReferences: [
        {
          apiVersion: addonApiVersion,
          kind: 'ManagedClusterAddOn',
          name: mca.metadata.name,
          uid: mca.metadata.uid ?? '',
          controller: true,
        },
      ],
    },
    spec: {
      workload: { manifests: agentManifests(addon, cluster, values) },
      // A namespace shared with others is created if missing but never deleted; a dedicated one goes
      // with the work, and with it anything in it the agent created (its Lease).
      ...(sharedNamespaces.has(ns)
        ? {
            deleteOption: {
              propagationPolicy: 'SelectivelyOrphan',
              selectivelyOrphans: { orphaningRules: [{ group: '', resource: 'namespaces', name: ns }] },
            },
          }
        : {}),
      manifestConfigs: [
        {
          resourceIdentifier: {
            group: 'apps',
            resource: 'deployments',
            name: addon.agentName,
            namespace: ns,
          },
          feedbackRules: [
            { type: 'WellKnownStatus' },
            { type: 'JSONPaths', jsonPaths: deploymentFeedbackPaths },
          ],
        },
      ],
    },
  };
  annotations[workHashAnnotation] = createHash('sha256').update(stableJson(work)).digest('hex').slice(0, 16);
  work.metadata.annotations = annotations;
  return work;
}

/**
 * Nothing to apply: the work carries the hash of exactly what we would write
 * (so fields we stopped writing are noticed) and still holds every field we
 * write (so a hand edit of one of them is undone).
 */
export function workUpToDate(existing: ManifestWork | undefined, desired: ManifestWork): boolean {
  if (!existing) return false;
  const hash = desired.metadata.annotations?.[workHashAnnotation];
  return (
    hash !== undefined &&
    existing.metadata.annotations?.[workHashAnnotation] === hash &&
    sameJson(desired.metadata.labels, existing.metadata.labels ?? {}) &&
    sameJson(desired.metadata.annotations, existing.metadata.annotations ?? {}) &&
    (desired.metadata.ownerReferences ?? []).every((o) =>
      existing.metadata.ownerReferences?.some((e) => e.uid === o.uid && e.kind === o.kind),
    ) &&
    sameJson(desired.spec, existing.spec)
  );
}

/**
 * Does `actual` (as stored: the API server adds defaults) contain every
 * field of `wanted`? Arrays must match in length and order, element-wise.
 */
export function sameJson(wanted: unknown, actual: unknown): boolean {
  if (Array.isArray(wanted)) {
    return (
      Array.isArray(actual) &&
      wanted.length === actual.length &&
      wanted.every((w, i) => sameJson(w, actual[i]))
    );
  }
  if (wanted && typeof wanted === 'object') {
    if (!actual || typeof actual !== 'object' || Array.isArray(actual)) return false;
    return Object.entries(wanted as Record<string, unknown>).every(([k, v]) =>
      v === undefined ? true : sameJson(v, (actual as Record<string, unknown>)[k]),
    );
  }
  return wanted === actual;
}

/** OCM's reason strings (api addon/v1alpha1 types_managedclusteraddon.go, addon-framework agentdeploy). */
export const manifestAppliedReasons = {
  applied: 'AddonManifestApplied',
  applyFailed: 'AddonManifestAppliedFailed',
  workApplyFailed: 'ManifestWorkApplyFailed',
} as const;

/**
 * ManifestApplied as addon-framework reports it: True once the work agent
 * says Applied; False with the work's own message when it says otherwise;
 * undefined while the work agent has not reported (the condition is then
 * left alone, or dropped if it was False, so a stale failure never shows).
 */
export function manifestAppliedCondition(
  work: ManifestWork | undefined,
): Omit<Condition, 'lastTransitionTime'> | undefined {
  const applied = findCondition(work?.status?.conditions, 'Applied');
  if (!work || !applied) return undefined;
  if (applied.status === 'True') {
    return {
      type: manifestAppliedType,
      status: 'True',
      reason: manifestAppliedReasons.applied,
      message: 'manifests of addon are applied successfully',
    };
  }
  const failures = (work.status?.resourceStatus?.manifests ?? [])
    .filter((m) => findCondition(m.conditions, 'Applied')?.status === 'False')
    .map((m) => {
      const r = m.resourceMeta;
      const what =
        `${r.kind ?? r.resource ?? ''} ${r.namespace ? `${r.namespace}/` : ''}${r.name ?? ''}`.trim();
      return `${what}: ${findCondition(m.conditions, 'Applied')?.message ?? 'not applied'}`;
    });
  return {
    type: manifestAppliedType,
    status: 'False',
    reason: manifestAppliedReasons.applyFailed,
    message: `failed to apply the manifests of addon: ${failures.length > 0 ? failures.join('; ') : applied.message || applied.reason}`,
  };
}

export function workApplyFailedCondition(message: string): Omit<Condition, 'lastTransitionTime'> {
  return {
    type: manifestAppliedType,
    status: 'False',
    reason: manifestAppliedReasons.workApplyFailed,
    message,
  };
}

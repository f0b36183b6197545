/**
 * Writing conditions of a ManagedClusterAddOn without touching anyone
 * else's: server-side apply on the status subresource. The CRD declares
 * status.conditions a map list keyed by type, so each field manager owns
 * only the condition types it applies. Each controller must use a field
 * manager of its own: applying without a condition type the same manager
 * applied before removes it.
 */
import type { KubeClient } from '../../shared/kube/client.ts';
import {
  addonApi,
  addonApiVersion,
  type Condition,
  findCondition,
  type ManagedClusterAddOn,
} from './resources.ts';

export type NewCondition = Omit<Condition, 'lastTransitionTime'>;

/** metav1.Time: RFC 3339, whole seconds. */
export function metaTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
}

/** The condition to write: lastTransitionTime moves only when the status does. */
export function withTransitionTime(
  current: Condition | undefined,
  next: NewCondition,
  now: number,
): Condition {
  const keep = current && current.status === next.status && current.lastTransitionTime;
  return { ...next, lastTransitionTime: keep ? (current.lastTransitionTime as string) : metaTime(now) };
}

export function conditionUnchanged(
  current: Condition | undefined,
  next: Pick<Condition, 'status' | 'reason' | 'message'>,
): boolean {
  return (
    current !== undefined &&
    current.status === next.status &&
    current.reason === next.reason &&
    current.message === next.message
  );
}

export function addonStatusPath(namespace: string, name: string): string {
  return `${addonApi}/namespaces/${namespace}/managedclusteraddons/${name}/status`;
}

/**
 * Applies `conditions` as everything `fieldManager` owns in the addon's
 * status.conditions (an empty list drops what it owned).
 */
export async function applyAddonConditions(
  hub: Pick<KubeClient, 'apply'>,
  mca: ManagedClusterAddOn,
  conditions: NewCondition[],
  fieldManager: string,
  now = Date.now(),
): Promise<void> {
  const current = mca.status?.conditions;
  const written = conditions.map((c) => withTransitionTime(findCondition(current, c.type), c, now));
  const namespace = mca.metadata.namespace ?? '';
  await hub.apply(
    addonStatusPath(namespace, mca.metadata.name),
    {
      apiVersion: addonApiVersion,
      kind: 'ManagedClusterAddOn',
      metadata: { name: mca.metadata.name, namespace },
      status: { conditions: written },
    },
    fieldManager,
  );
}

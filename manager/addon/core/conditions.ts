/**
 * metav1.Condition helpers for ManagedClusterAddOn status, and the condition
 * types the manager writes. The manager writes only its own condition types
 * (merge by type) and never touches the ones OCM writes; lastTransitionTime
 * moves only when the status changes, as meta.SetStatusCondition does in Go.
 */
import type { Condition } from './resources.ts';

export type { Condition } from './resources.ts';
export { findCondition } from './resources.ts';
export type ConditionStatus = Condition['status'];

/** Written by the registration controller (OCM's type and reasons). */
export const registrationAppliedType = 'RegistrationApplied';
/** Written by the deploy controller: its ManifestWork's state. */
export const manifestAppliedType = 'ManifestApplied';
/** Written by the availability controller (Customized health mode). */
export const availableType = 'Available';

/** What a controller decides; the helpers below add the bookkeeping. */
export interface ConditionVerdict {
  status: ConditionStatus;
  reason: string;
  message: string;
}

/** A condition as a controller decides it: the writer adds lastTransitionTime. */
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
): Condition & { lastTransitionTime: string } {
  const keep = current && current.status === next.status && current.lastTransitionTime;
  return { ...next, lastTransitionTime: keep ? (current.lastTransitionTime as string) : metaTime(now) };
}

/** `current` already says what the verdict says (no write needed). */
export function sameVerdict(
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

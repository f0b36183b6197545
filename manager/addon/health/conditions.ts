/**
 * metav1.Condition helpers for ManagedClusterAddOn status. The manager writes
 * only its own condition types (merge by type) and never touches the ones OCM
 * writes; lastTransitionTime moves only when the status changes, as
 * meta.SetStatusCondition does in Go.
 */

import type { Condition } from '../resources.ts';
import { withTransitionTime } from '../status.ts';

export type { Condition } from '../resources.ts';
export type ConditionStatus = Condition['status'];

/** What a controller decides; the helpers below add the bookkeeping. */
export interface ConditionVerdict {
  status: ConditionStatus;
  reason: string;
  message: string;
}

export { findCondition } from '../resources.ts';
/** sameVerdict: `current` already says what the verdict says (no write needed). */
export { conditionUnchanged as sameVerdict, metaTime } from '../status.ts';

/** The condition to write: keeps lastTransitionTime unless the status changes. */
export function nextCondition(
  current: Condition | undefined,
  type: string,
  verdict: ConditionVerdict,
  now: number = Date.now(),
): Condition & { lastTransitionTime: string } {
  return withTransitionTime(current, { type, ...verdict }, now) as Condition & { lastTransitionTime: string };
}

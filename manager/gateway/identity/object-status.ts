/**
 * The status the gateway reports on a ClusterGatewayProxyConfiguration: a
 * `Valid` condition (True, or False with every problem and its field) and
 * `appliedGeneration`, the generation in force, which stays at the last
 * valid one while a newer generation is invalid. Pure, so the decision of
 * whether to write is testable: an unchanged verdict is never rewritten
 * (its lastTransitionTime included), and a write never loops through the
 * watch it triggers.
 */

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  observedGeneration?: number;
  lastTransitionTime: string;
}

export interface ConfigurationStatus {
  observedGeneration?: number;
  /** null in a written status: a merge patch removes the field (nothing in force). */
  appliedGeneration?: number | null;
  conditions?: Condition[];
  [key: string]: unknown;
}

export interface Verdict {
  generation: number;
  /** Rule count when valid. */
  rules?: number;
  /** Problems of this generation, when invalid. */
  problems?: string;
  /** The generation in force (the last valid one), if any. */
  appliedGeneration?: number;
}

export const VALID_CONDITION = 'Valid';
/** metav1.Condition caps messages at 32768; problems lists stay far below so the API never refuses them. */
const MAX_MESSAGE = 4000;

export function validCondition(verdict: Verdict): Omit<Condition, 'lastTransitionTime'> {
  if (verdict.problems === undefined) {
    return {
      type: VALID_CONDITION,
      status: 'True',
      reason: 'Valid',
      message: `generation ${verdict.generation} is valid (${verdict.rules ?? 0} rules) and in force`,
      observedGeneration: verdict.generation,
    };
  }
  const problems =
    verdict.problems.length > MAX_MESSAGE ? `${verdict.problems.slice(0, MAX_MESSAGE)}...` : verdict.problems;
  const consequence =
    verdict.appliedGeneration !== undefined
      ? `generation ${verdict.appliedGeneration} stays in force until this is fixed`
      : 'no valid generation is known to the gateway, so requests to the clusters this configuration governs are refused until it is fixed';
  return {
    type: VALID_CONDITION,
    status: 'False',
    reason: 'InvalidSpec',
    message: `generation ${verdict.generation} is invalid and was not applied: ${problems}; ${consequence}`,
    observedGeneration: verdict.generation,
  };
}

/**
 * The status to write, or undefined when `current` already says the same.
 * Conditions other than Valid (written by someone else) are kept.
 */
export function desiredStatus(
  current: ConfigurationStatus | undefined,
  verdict: Verdict,
  now: Date,
): ConfigurationStatus | undefined {
  const wanted = validCondition(verdict);
  const existing = current?.conditions?.find((c) => c.type === VALID_CONDITION);
  const sameCondition =
    existing !== undefined &&
    existing.status === wanted.status &&
    existing.reason === wanted.reason &&
    existing.message === wanted.message &&
    existing.observedGeneration === wanted.observedGeneration;
  if (
    sameCondition &&
    current?.observedGeneration === verdict.generation &&
    (current?.appliedGeneration ?? undefined) === verdict.appliedGeneration
  ) {
    return undefined;
  }
  const lastTransitionTime =
    existing && existing.status === wanted.status
      ? existing.lastTransitionTime
      : now.toISOString().replace(/\.\d+Z$/, 'Z');
  const others = (current?.conditions ?? []).filter((c) => c.type !== VALID_CONDITION);
  return {
    observedGeneration: verdict.generation,
    appliedGeneration: verdict.appliedGeneration ?? null,
    conditions: [...others, { ...wanted, lastTransitionTime }],
  };
}

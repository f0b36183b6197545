/**
 * When to rotate a certificate of the gateway, as pure logic (no timers):
 * - due with a third of its life left;
 * - with a maintenance window (--gateway-rotation-schedule, a node-cron
 *   expression, evaluated in UTC), at the first tick of the schedule at or
 *   after the due point;
 * - but never later than the urgent point, a sixth of its life left: a
 *   schedule may delay a rotation, never let a certificate expire. At that
 *   point the old CA still has a sixth of its life to stay in the
 *   APIService caBundle next to the new one.
 * A certificate that would outlive one issued now (its validity was lowered
 * since) is due at once: a shorter validity takes effect at the next window.
 *
 * The gateway controller asks at every reconcile whether a rotation is due
 * (`rotationTime(...).at <= now`) and requeues itself for `at`, so a tick is
 * met by a reconcile a few milliseconds after it: a reconcile up to
 * `tickToleranceMs` after a tick still counts it, one that comes later waits
 * for the next tick (or the urgent point).
 */
import cron from 'node-cron';

export const dueFraction = 1 / 3;
export const urgentFraction = 1 / 6;
export const tickToleranceMs = 60_000;
/** A schedule must fire at least this often: ticks further apart are effectively never (Feb 30). */
const horizonDays = 4 * 366 + 1;
const dayMs = 86400_000;

export interface RotationSchedule {
  readonly expression: string;
  /** The first tick at or after `fromMs` and before `beforeMs`, or undefined. */
  nextTick(fromMs: number, beforeMs: number): number | undefined;
}

/**
 * A node-cron expression (5 fields, or 6 with seconds first; nicknames like `@daily`) as a schedule in UTC;
 * '' is no schedule. Throws an Error that says what is wrong with it.
 */
export function parseRotationSchedule(expression: string, now = Date.now()): RotationSchedule | undefined {
  const text = expression.trim();
  if (text === '') return undefined;
  let fields: ReturnType<typeof cron.parse>;
  try {
    fields = cron.parse(text);
  } catch (err) {
    throw new Error(`"${text}" is not a cron expression: ${(err as Error).message}`);
  }
  // node-cron's own matcher decides which days match (L, W, #, names and all); the times of day come from
  // the parsed fields, so a search steps over days, not seconds.
  const task = cron.createTask(text, () => {}, { timezone: 'UTC' });
  const sorted = (values: readonly (number | string)[]) =>
    values.filter((v): v is number => typeof v === 'number').sort((a, b) => a - b);
  const times: number[] = [];
  for (const h of sorted(fields.hour)) {
    for (const m of sorted(fields.minute)) {
      for (const s of sorted(fields.second)) times.push(((h * 60 + m) * 60 + s) * 1000);
    }
  }
  const first = times[0];
  if (first === undefined) throw new Error(`"${text}" names no time of day`);
  const schedule: RotationSchedule = {
    expression: text,
    nextTick(fromMs, beforeMs) {
      for (let day = fromMs - (fromMs % dayMs); day < beforeMs; day += dayMs) {
        if (!task.match(new Date(day + first))) continue;
        for (const t of times) {
          const tick = day + t;
          if (tick >= beforeMs) return undefined;
          if (tick >= fromMs) return tick;
        }
      }
      return undefined;
    },
  };
  if (schedule.nextTick(now, now + horizonDays * dayMs) === undefined) {
    throw new Error(`"${text}" never fires in the next ${horizonDays} days (UTC)`);
  }
  return schedule;
}

export interface Lifetime {
  notBefore: number;
  notAfter: number;
}

export interface RotationTime {
  /** A third of the life left (or at once, for a certificate that outlives its validity). */
  due: number;
  /** A sixth of the life left: the latest a rotation may wait for the schedule. */
  urgent: number;
  /** When to rotate: `due`, or the first tick after it, but not after `urgent`. */
  at: number;
  /** What `at` is, for the log. */
  reason: 'due' | 'shortened' | 'window' | 'urgent';
}

/**
 * When to rotate a certificate living `cert`, now that its configured validity is `validityMs` (plus
 * `skewMs` for clocks: a certificate is issued that much before now).
 */
export function rotationTime(
  cert: Lifetime,
  validityMs: number,
  skewMs: number,
  now: number,
  schedule?: RotationSchedule,
): RotationTime {
  const life = Math.max(0, cert.notAfter - cert.notBefore);
  const urgent = cert.notAfter - life * urgentFraction;
  // One issued now would expire at now + validity: this one lives longer, so its validity was lowered.
  const shortened = cert.notAfter - now > validityMs + skewMs;
  const due = shortened ? cert.notBefore : cert.notAfter - life * dueFraction;
  if (!schedule) return { due, urgent, at: due, reason: shortened ? 'shortened' : 'due' };
  const tick = schedule.nextTick(Math.max(due, now - tickToleranceMs), urgent);
  if (tick !== undefined) return { due, urgent, at: tick, reason: 'window' };
  return { due, urgent, at: Math.max(due, urgent), reason: 'urgent' };
}

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseRotationSchedule, rotationTime, tickToleranceMs } from './rotation-schedule.ts';

const day = 86400_000;
const hour = 3600_000;
const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();
const schedule = (expression: string, now = at('2026-12-01T00:00:00Z')) => {
  const parsed = parseRotationSchedule(expression, now);
  assert.ok(parsed, expression);
  return parsed;
};

describe('parseRotationSchedule', () => {
  test('empty is no schedule', () => {
    assert.equal(parseRotationSchedule(''), undefined);
    assert.equal(parseRotationSchedule('   '), undefined);
  });

  test('invalid or never-firing expressions are refused, saying why', () => {
    assert.throws(
      () => parseRotationSchedule('daily'),
      /"daily" is not a cron expression: expected 5 or 6 fields/,
    );
    assert.throws(() => parseRotationSchedule('60 2 * * *'), /60 is a invalid expression for minute/);
    assert.throws(() => parseRotationSchedule('0 0 30 2 *'), /impossible day of month/);
    // 29 February on a Monday (node-cron wants both day fields to match): not until 2044.
    assert.throws(
      () => parseRotationSchedule('0 0 29 2 1', at('2026-12-01T00:00:00Z')),
      /never fires in the next 1465 days/,
    );
  });

  test('next tick in UTC: weekly, with seconds, nicknames, last day of month', () => {
    const from = at('2026-12-01T10:00:00Z'); // a Tuesday
    const far = from + 400 * day;
    assert.equal(iso(schedule('0 2 * * 6').nextTick(from, far) ?? 0), '2026-12-05T02:00:00.000Z');
    assert.equal(iso(schedule('0 2 * * sat').nextTick(from, far) ?? 0), '2026-12-05T02:00:00.000Z');
    assert.equal(iso(schedule('*/20 * * * * *').nextTick(from + 1, far) ?? 0), '2026-12-01T10:00:20.000Z');
    assert.equal(iso(schedule('@daily').nextTick(from, far) ?? 0), '2026-12-02T00:00:00.000Z');
    assert.equal(iso(schedule('30 23 L * *').nextTick(from, far) ?? 0), '2026-12-31T23:30:00.000Z');
    // A tick exactly at `from` counts; none before `before`.
    assert.equal(schedule('0 10 * * *').nextTick(from, far), from);
    assert.equal(schedule('0 2 * * 6').nextTick(from, at('2026-12-05T02:00:00Z')), undefined);
  });
});

describe('rotationTime', () => {
  // A 90-day certificate issued on 1 September (no backdate, for round figures), expiring on 30 November:
  // due with 30 days left (31 October), urgent with 15 left (15 November).
  const issued = at('2026-09-01T00:00:00Z');
  const cert = { notBefore: issued, notAfter: issued + 90 * day };
  const validity = 90 * day;
  const skew = hour;

  test('no schedule: at a third of life left', () => {
    const r = rotationTime(cert, validity, skew, issued + day);
    assert.equal(iso(r.due), '2026-10-31T00:00:00.000Z');
    assert.equal(iso(r.urgent), '2026-11-15T00:00:00.000Z');
    assert.equal(r.at, r.due);
    assert.equal(r.reason, 'due');
  });

  test('a schedule: the first tick at or after the due point', () => {
    // 31 October 2026 is a Saturday: due at midnight, rotated at 02:00; Tuesdays 02:00 is 3 November.
    const weekly = schedule('0 2 * * 6');
    const before = rotationTime(cert, validity, skew, issued + day, weekly);
    assert.equal(iso(before.at), '2026-10-31T02:00:00.000Z');
    assert.equal(before.reason, 'window');
    assert.equal(
      iso(rotationTime(cert, validity, skew, issued, schedule('0 2 * * 2')).at),
      '2026-11-03T02:00:00.000Z',
    );
    // Due, but not in the window yet: still the coming tick.
    assert.equal(rotationTime(cert, validity, skew, at('2026-10-31T01:00:00Z'), weekly).at, before.at);
    // The reconcile that the tick's timer wakes, a little late, rotates.
    const late = at('2026-10-31T02:00:00Z') + 250;
    assert.ok(rotationTime(cert, validity, skew, late, weekly).at <= late);
  });

  test('a tick missed by more than the tolerance waits for the next one', () => {
    const daily = schedule('0 2 * * *');
    const now = at('2026-11-02T02:00:00Z') + tickToleranceMs + 1000;
    assert.equal(iso(rotationTime(cert, validity, skew, now, daily).at), '2026-11-03T02:00:00.000Z');
    const inTime = at('2026-11-02T02:00:00Z') + tickToleranceMs - 1000;
    assert.equal(iso(rotationTime(cert, validity, skew, inTime, daily).at), '2026-11-02T02:00:00.000Z');
  });

  test('never beyond the urgent point: a window too rare, or one that never comes before it', () => {
    const yearly = schedule('0 0 1 1 *'); // 1 January, after this certificate's urgent point
    const r = rotationTime(cert, validity, skew, issued + day, yearly);
    assert.equal(iso(r.at), '2026-11-15T00:00:00.000Z');
    assert.equal(r.reason, 'urgent');
    assert.ok(r.at < cert.notAfter, 'before expiry, with a sixth of the life to spare');
    // Past the urgent point (the manager was down): at once.
    const after = at('2026-11-20T00:00:00Z');
    assert.ok(rotationTime(cert, validity, skew, after, yearly).at <= after);
  });

  test('a lowered validity: due at once, or at the next tick', () => {
    const now = issued + day;
    const r = rotationTime(cert, 30 * day, skew, now);
    assert.ok(r.at <= now);
    assert.equal(r.reason, 'shortened');
    assert.equal(
      iso(rotationTime(cert, 30 * day, skew, now, schedule('0 2 * * *')).at),
      '2026-09-02T02:00:00.000Z',
    );
    // A raised one changes nothing until the next rotation.
    assert.equal(rotationTime(cert, 365 * day, skew, now).at, rotationTime(cert, validity, skew, now).at);
  });

  test('short test validities: a 60 s certificate with a 6 s backdate rotates 38 s after issue', () => {
    const t0 = at('2026-12-01T12:00:00Z');
    const short = { notBefore: t0 - 6000, notAfter: t0 + 60_000 };
    const r = rotationTime(short, 60_000, 6000, t0);
    assert.equal(r.at - t0, 38_000);
    assert.equal(r.urgent - t0, 49_000);
    assert.ok(r.at > t0, 'not renewed on every reconcile');
    // A clock 5 s ahead on another replica does not count as a lowered validity.
    assert.equal(rotationTime(short, 60_000, 6000, t0 - 5000).reason, 'due');
  });
});

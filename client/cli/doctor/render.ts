/**
 * The doctor's table: one line per check, in order, with ✓ / ✗ / - on a terminal (PASS / FAIL / SKIP without
 * colour, so that logs and grep read the same), and under each failure the object to look at and the fix. The
 * first failure is marked: later ones are often its consequences.
 */
import { type Output, oneLine } from '../output.ts';
import type { CheckResult } from './model.ts';

export interface Columns {
  cluster: number;
  title: number;
}

export function columnsFor(checks: { title: string; cluster?: string }[]): Columns {
  return {
    cluster: Math.max(3, ...checks.map((c) => (c.cluster ?? 'hub').length)),
    title: Math.max(...checks.map((c) => c.title.length), 5),
  };
}

export function mark(result: CheckResult['result'], out: Pick<Output, 'colour' | 'paint'>): string {
  if (!out.colour) return result === 'pass' ? 'PASS' : result === 'fail' ? 'FAIL' : 'SKIP';
  return result === 'pass'
    ? out.paint('green', '✓')
    : result === 'fail'
      ? out.paint('red', '✗')
      : out.paint('dim', '-');
}

export function renderResult(
  r: CheckResult,
  title: string,
  columns: Columns,
  first: boolean,
  out: Pick<Output, 'colour' | 'paint'>,
): string[] {
  const indent = ' '.repeat(out.colour ? 2 : 5);
  const head = `${mark(r.result, out)} ${(r.cluster ?? 'hub').padEnd(columns.cluster)}  ${title.padEnd(columns.title)}  `;
  // One line each: a message carries text of cluster objects, whose newlines must not forge lines of their own.
  const message = r.result === 'skipped' ? out.paint('dim', oneLine(r.message)) : oneLine(r.message);
  const line = `${head}${message}${first ? `  ${out.paint('bold', '<- first failure')}` : ''}`;
  const lines = [first ? out.paint('bold', line) : line];
  if (r.result === 'fail') {
    if (r.object) lines.push(`${indent}look at: ${oneLine(r.object)}`);
    const fix = (r.fix ?? '').split('\n');
    fix.forEach((f, i) => {
      lines.push(`${indent}${i === 0 ? 'fix:     ' : '         '}${f}`);
    });
  }
  return lines;
}

export function summary(results: CheckResult[], titleOf: (r: CheckResult) => string): string {
  const failed = results.filter((r) => r.result === 'fail');
  const skipped = results.filter((r) => r.result === 'skipped').length;
  const passed = results.filter((r) => r.result === 'pass').length;
  const counts = `${passed} passed, ${failed.length} failed, ${skipped} skipped`;
  const first = failed[0];
  if (!first) return `healthy: ${counts}`;
  return `${failed.length} check${failed.length === 1 ? '' : 's'} failed (${counts}); first: ${first.cluster ?? 'hub'} ${titleOf(first)}: ${oneLine(first.message)}`;
}

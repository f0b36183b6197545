/**
 * `doctor [cluster...]`: ordered checks from the hub down to each cluster (doctor/run.ts), one line each,
 * every failure with the object to look at and the command that fixes it. Exit 0 when nothing failed, 1 when a
 * check failed, 2 when the hub cannot be asked at all (no kubeconfig, unreachable, credential refused) or the
 * arguments are wrong.
 */

import type { CheckResult } from '../doctor/model.ts';
import { columnsFor, renderResult, summary } from '../doctor/render.ts';
import { checkTitle, planDoctor, runChecks } from '../doctor/run.ts';
import { CliError, type ExitCode, exitCodes } from '../exit-codes.ts';
import type { CommandContext } from '../main.ts';

/** A managed cluster's name is a namespace name on the hub; ClusterGateways also allow dots. */
const clusterName = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

export async function runDoctor(ctx: CommandContext, clusters: string[]): Promise<ExitCode> {
  for (const c of clusters) {
    if (!clusterName.test(c)) {
      throw new CliError(`"${c}" is not a cluster name (lower-case letters, digits, "-" and ".")`);
    }
  }
  const hub = ctx.hub();
  const done = ctx.output.progress('checking the hub and the clusters');
  const results: CheckResult[] = [];
  try {
    const plan = await planDoctor(hub.client, [...new Set(clusters)]);
    if (plan.connectionProblem) {
      throw new CliError(`cannot ask the hub at ${hub.connection.server}: ${plan.connectionProblem}`);
    }
    const table = ctx.output.format === 'table';
    const columns = columnsFor(plan.checks);
    let firstFailureShown = false;
    for await (const r of runChecks(plan.checks)) {
      results.push(r);
      if (!table) continue;
      done();
      const first = r.result === 'fail' && !firstFailureShown;
      if (first) firstFailureShown = true;
      for (const line of renderResult(r, checkTitle(plan.checks, r.name), columns, first, ctx.output)) {
        ctx.output.line(line);
      }
    }
    if (plan.clusterNote) ctx.output.note(`note: ${plan.clusterNote}`);
    if (table) {
      const text = summary(results, (r) => checkTitle(plan.checks, r.name));
      ctx.output.line();
      ctx.output.line(
        results.some((r) => r.result === 'fail')
          ? ctx.output.paint('red', text)
          : ctx.output.paint('green', text),
      );
    } else {
      ctx.output.data({
        healthy: !results.some((r) => r.result === 'fail'),
        checks: results,
      });
    }
  } finally {
    done();
  }
  return results.some((r) => r.result === 'fail') ? exitCodes.checkFailed : exitCodes.ok;
}

/**
 * `status`: one row per managed cluster. Six collections are listed once each, at the same time (status/sources.ts);
 * the proxied /healthz probes start as soon as the ClusterGateways are listed, bounded in number and time
 * (status/healthz.ts); the rows are a pure function of all that (status/rows.ts).
 */
import type { ExitCode } from '../exit-codes.ts';
import { CliError, exitCodes } from '../exit-codes.ts';
import type { CommandContext } from '../main.ts';
import { type HealthzResult, healthzConcurrency, healthzTimeoutMs, probeAll } from '../status/healthz.ts';
import { statusRows } from '../status/rows.ts';
import {
  type ClusterGateway,
  failureOf,
  itemsOf,
  type Listed,
  type ListFailure,
  listSources,
} from '../status/sources.ts';
import { statusCells, statusHeaders } from '../status/table.ts';

export interface StatusOptions {
  healthzConcurrency?: number;
  healthzTimeoutMs?: number;
}

/** Which columns each collection feeds, for the note when it cannot be listed. */
const columnsOf: Record<string, string> = {
  managedClusters: 'the rows come from the ClusterGateways and ManagedClusterAddOns only',
  addons: 'AVAILABLE and REASON',
  works: 'AGENT',
  heartbeats: 'HEARTBEAT',
  tunnelLeases: "TUNNEL and REPLICA (taken from the ClusterGateways' status instead)",
  gateways: 'ENDPOINT, HEALTHY and HEALTHZ',
};

/**
 * What the person at the terminal needs to know beyond the table: each collection that could not be listed (one
 * note per resource and cause, with the permission that is missing and the columns it empties), and proxied
 * /healthz requests refused for lack of `get clustergateways/proxy`.
 */
export function statusNotes(
  failures: readonly (readonly [string, ListFailure])[],
  healthz: Map<string, HealthzResult> | { unknown: string },
): string[] {
  const grouped = new Map<string, { failure: ListFailure; affects: string[] }>();
  for (const [key, f] of failures) {
    const id = `${f.resource} ${f.word}`;
    const entry = grouped.get(id) ?? { failure: f, affects: [] };
    entry.affects.push(columnsOf[key] ?? key);
    grouped.set(id, entry);
  }
  const notes = [...grouped.values()].map(
    ({ failure: f, affects }) =>
      `note: cannot list ${f.resource} (${f.word})${f.missingPermission ? `: missing permission ${f.missingPermission}` : `: ${f.message}`}; affects ${affects.join('; ')}`,
  );
  if (healthz instanceof Map) {
    const refused = [...healthz].filter(([, r]) => r.error === 'forbidden').map(([c]) => c);
    if (refused.length > 0) {
      notes.push(
        `note: GET clustergateways/<cluster>/proxy/healthz forbidden for ${refused.length === healthz.size ? 'every cluster' : refused.join(', ')}: missing permission get clustergateways/proxy (cluster.core.oam.dev); HEALTHZ shows forbidden`,
      );
    }
  }
  return notes;
}

export async function runStatus(ctx: CommandContext, options: StatusOptions = {}): Promise<ExitCode> {
  const hub = ctx.hub();
  const concurrency = options.healthzConcurrency ?? healthzConcurrency;
  const timeoutMs = options.healthzTimeoutMs ?? healthzTimeoutMs;
  const done = ctx.output.progress('listing managed clusters and probing /healthz through the gateway');
  let probes: Promise<Map<string, HealthzResult> | { unknown: string }> = Promise.resolve({
    unknown: 'error',
  });
  let sources: Awaited<ReturnType<typeof listSources>>;
  let healthz: Map<string, HealthzResult> | { unknown: string };
  try {
    sources = await listSources(hub.client, (gateways: Listed<ClusterGateway>) => {
      const failure = failureOf(gateways);
      probes = failure
        ? Promise.resolve({ unknown: failure.word })
        : probeAll(
            hub.client,
            itemsOf(gateways).map((g) => g.metadata.name),
            { concurrency, timeoutMs },
          );
    });
    healthz = await probes;
  } finally {
    done();
  }

  const failures = Object.entries(sources)
    .map(([key, listed]) => [key, failureOf(listed)] as const)
    .filter((e): e is readonly [string, ListFailure] => e[1] !== undefined);
  const clustersFailed = failureOf(sources.managedClusters);
  const gatewaysFailed = failureOf(sources.gateways);
  if (clustersFailed && gatewaysFailed) {
    const connection = failures.every(([, f]) => f.connection);
    throw new CliError(
      connection
        ? `cannot reach the hub at ${hub.connection.server}: ${clustersFailed.message}`
        : `cannot list the managed clusters: ${clustersFailed.message}; nor the ClusterGateways: ${gatewaysFailed.message}`,
    );
  }

  const now = Date.now();
  const rows = statusRows(sources, healthz, now);
  if (ctx.output.format === 'table') {
    if (rows.length === 0) ctx.output.note('No managed clusters and no ClusterGateways found.');
    else
      ctx.output.table(
        statusHeaders,
        rows.map((r) => statusCells(r, ctx.output.paint.bind(ctx.output))),
      );
    for (const note of statusNotes(failures, healthz)) ctx.output.note(note);
  } else {
    ctx.output.data({
      time: new Date(now).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      healthz: { concurrency, timeoutSeconds: timeoutMs / 1000 },
      clusters: rows,
      problems: failures.map(([key, f]) => ({
        collection: key,
        resource: f.resource,
        error: f.word,
        ...(f.missingPermission ? { missingPermission: f.missingPermission } : {}),
        message: f.message,
        affects: columnsOf[key],
      })),
    });
  }
  return exitCodes.ok;
}

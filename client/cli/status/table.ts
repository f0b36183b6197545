/** The status rows as table cells: short values, kubectl-style ages, colour for what needs a look. */
import { type Colour, humanAge } from '../output.ts';
import { isUnknown, type Known, type StatusRow } from './rows.ts';

export const statusHeaders = [
  'NAME',
  'AVAILABLE',
  'REASON',
  'AGENT',
  'ENDPOINT',
  'TUNNEL',
  'REPLICA',
  'HEARTBEAT',
  'HEALTHY',
  'HEALTHZ',
];

type Paint = (colour: Colour, text: string) => string;
const none = '-';

function cell<T>(v: Known<T>, show: (x: NonNullable<T>) => string, empty = none): string {
  if (isUnknown(v)) return v.unknown;
  if (v === null || v === undefined) return empty;
  return show(v as NonNullable<T>);
}

export function statusCells(row: StatusRow, paint: Paint = (_c, t) => t): string[] {
  const available = cell(row.addon, (a) =>
    paint(a.available === 'True' ? 'green' : a.available === 'False' ? 'red' : 'yellow', a.available),
  );
  const reason = cell(
    row.addon,
    (a) => a.reason ?? none,
    row.managedCluster === false ? 'NoManagedCluster' : 'NotEnabled',
  );
  const agent = cell(row.agent, (a) =>
    a.rolledOut ? a.version : paint('yellow', `${a.version} (rolling out)`),
  );
  const endpoint = cell(row.endpointType, (t) => t || none);
  const tunnel = cell(row.tunnel, (t) =>
    t.connected ? paint('green', 'Connected') : paint('red', t.stale ? 'Stale' : 'Disconnected'),
  );
  const replica = cell(row.tunnel, (t) => (t.connected && t.replica ? t.replica : none));
  const heartbeat = cell(
    row.heartbeat,
    (h) => (h.ageSeconds === undefined ? 'never' : humanAge(h.ageSeconds)),
    'missing',
  );
  const healthy = cell(row.gateway, (g) =>
    g.healthy === true
      ? paint('green', 'true')
      : g.healthy === false
        ? paint('red', g.reason ? `false (${g.reason})` : 'false')
        : 'unknown',
  );
  const healthz = cell(row.healthz, (h) => (h.ok ? `${h.milliseconds}ms` : paint('red', h.error ?? 'error')));
  return [row.name, available, reason, agent, endpoint, tunnel, replica, heartbeat, healthy, healthz];
}

/**
 * Server-side printing: `kubectl get clustergateways` asks for
 * `application/json;as=Table;v=v1;g=meta.k8s.io` and prints whatever
 * columns the server defines. Shapes follow meta/v1 Table, TableRow and
 * TableColumnDefinition; row objects follow `includeObject` (default
 * Metadata: a PartialObjectMetadata), as the apiserver's asTable does.
 *
 * Columns are the Go original's printer.go (Name, Provider,
 * Credential-Type, Endpoint-Type, Healthy) plus Age, and for `-o wide`
 * (priority 1) Reason, so a broken cluster explains itself, and the agent
 * tunnel's state: Tunnel, Tunnel-Age, Gateway (the replica holding it).
 */
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import type { ClusterTarget } from '../clusters/cluster.ts';
import { type ObjectMeta, renderClusterGateway, renderMetadata } from './clustergateway.ts';

export type TableVersion = 'v1' | 'v1beta1';
export type IncludeObject = 'None' | 'Metadata' | 'Object';

export interface TableColumnDefinition {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
}

export interface TableRow {
  cells: unknown[];
  object?: unknown;
}

export interface Table {
  kind: 'Table';
  apiVersion: string;
  metadata: { resourceVersion?: string };
  /** null on watch events after the first, like the apiserver's NoHeaders. */
  columnDefinitions: TableColumnDefinition[] | null;
  rows: TableRow[];
}

export interface PartialObjectMetadata {
  kind: 'PartialObjectMetadata';
  apiVersion: string;
  metadata: ObjectMeta;
}

const creationTimestampDoc =
  'CreationTimestamp is a timestamp representing the server time when this object was created. ' +
  'It is not guaranteed to be set in happens-before order across separate operations. ' +
  'Clients may not set this value. It is represented in RFC3339 form and is in UTC.';

export const columnDefinitions: TableColumnDefinition[] = [
  { name: 'Name', type: 'string', format: 'name', description: 'the name of the cluster', priority: 0 },
  { name: 'Provider', type: 'string', format: '', description: 'the cluster provider type', priority: 0 },
  { name: 'Credential-Type', type: 'string', format: '', description: 'the credential type', priority: 0 },
  { name: 'Endpoint-Type', type: 'string', format: '', description: 'the endpoint type', priority: 0 },
  { name: 'Healthy', type: 'string', format: '', description: 'the healthiness of the gateway', priority: 0 },
  { name: 'Age', type: 'string', format: '', description: creationTimestampDoc, priority: 0 },
  {
    name: 'Reason',
    type: 'string',
    format: '',
    description: 'why the cluster is unhealthy or cannot be proxied',
    priority: 1,
  },
  {
    name: 'Tunnel',
    type: 'string',
    format: '',
    description: "the cluster's agent tunnel: Connected, Disconnected, or empty when the cluster uses none",
    priority: 1,
  },
  {
    name: 'Tunnel-Age',
    type: 'string',
    format: '',
    description: 'how long the current agent tunnel has been connected',
    priority: 1,
  },
  {
    name: 'Gateway',
    type: 'string',
    format: '',
    description: 'the gateway replica (pod name) holding the agent tunnel',
    priority: 1,
  },
];

export function parseIncludeObject(value: string | null | undefined): IncludeObject {
  if (!value) return 'Metadata';
  if (value === 'None' || value === 'Metadata' || value === 'Object') return value;
  throw new StatusError(
    failureStatus(
      400,
      `Unable to convert to Table as requested: includeObject: Unsupported value: ${JSON.stringify(value)}: supported values: "Metadata", "None", "Object"`,
    ),
  );
}

export function partialObjectMetadata(cluster: ClusterTarget, version: TableVersion): PartialObjectMetadata {
  return {
    kind: 'PartialObjectMetadata',
    apiVersion: `meta.k8s.io/${version}`,
    metadata: renderMetadata(cluster),
  };
}

export function tableRow(
  cluster: ClusterTarget,
  version: TableVersion,
  includeObject: IncludeObject,
  now: number,
): TableRow {
  const gateway = renderClusterGateway(cluster);
  const row: TableRow = {
    cells: [
      gateway.metadata.name,
      gateway.spec.provider,
      gateway.spec.access.credential?.type ?? '<none>',
      gateway.spec.access.endpoint.type,
      String(gateway.status.healthy),
      cluster.creationTimestamp ? humanDuration(now - Date.parse(cluster.creationTimestamp)) : '<unknown>',
      gateway.status.healthyReason ?? '',
      tunnelCell(cluster),
      cluster.tunnel?.since ? humanDuration(now - Date.parse(cluster.tunnel.since)) : '',
      cluster.tunnel?.replica ?? '',
    ],
  };
  if (includeObject === 'Metadata') row.object = partialObjectMetadata(cluster, version);
  else if (includeObject === 'Object') row.object = gateway;
  return row;
}

function tunnelCell(cluster: ClusterTarget): string {
  if (!cluster.tunnel) return '';
  return cluster.tunnel.connected ? 'Connected' : 'Disconnected';
}

export interface TableOptions {
  version: TableVersion;
  includeObject: IncludeObject;
  resourceVersion?: string;
  /** Watch events after the first carry no column definitions. */
  noHeaders?: boolean;
  now?: number;
}

export function renderTable(clusters: ClusterTarget[], options: TableOptions): Table {
  const now = options.now ?? Date.now();
  return {
    kind: 'Table',
    apiVersion: `meta.k8s.io/${options.version}`,
    metadata: options.resourceVersion ? { resourceVersion: options.resourceVersion } : {},
    columnDefinitions: options.noHeaders ? null : columnDefinitions,
    rows: clusters.map((c) => tableRow(c, options.version, options.includeObject, now)),
  };
}

/** kubectl's age format (apimachinery duration.HumanDuration): 5s, 3m20s, 5h10m, 2d3h, 1y20d. */
export function humanDuration(ms: number): string {
  const seconds = Math.trunc(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 60 * 2) return `${seconds}s`;
  const minutes = Math.trunc(seconds / 60);
  if (minutes < 10) {
    const s = seconds % 60;
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`;
  }
  if (minutes < 60 * 3) return `${minutes}m`;
  const hours = Math.trunc(minutes / 60);
  if (hours < 8) {
    const m = minutes % 60;
    return m === 0 ? `${hours}h` : `${hours}h${m}m`;
  }
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) {
    const h = hours % 24;
    return h === 0 ? `${Math.trunc(hours / 24)}d` : `${Math.trunc(hours / 24)}d${h}h`;
  }
  if (hours < 24 * 365 * 2) return `${Math.trunc(hours / 24)}d`;
  if (hours < 24 * 365 * 8) {
    const dy = Math.trunc(hours / 24) % 365;
    const y = Math.trunc(hours / 24 / 365);
    return dy === 0 ? `${y}y` : `${y}y${dy}d`;
  }
  return `${Math.trunc(hours / 24 / 365)}y`;
}

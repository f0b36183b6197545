/**
 * A kubeconfig that sends every request of plain kubectl to one managed cluster through the gateway, as the caller:
 * the hub's own cluster entry (CA, tls-server-name, proxy-url, insecure-skip-tls-verify kept) with its server
 * replaced by <hub>/apis/cluster.core.oam.dev/v1alpha1/clustergateways/<cluster>/proxy, and the caller's user entry
 * copied as it stands: certificate and token files, exec plugins and impersonation are referenced, not resolved, so a
 * rotated file or a plugin's fresh token keeps working; relative paths are made absolute (they were relative to the
 * kubeconfig that named them, which is not where the output goes). No other credential is ever written.
 *
 * Files are merged as client-go merges KUBECONFIG (the first file that defines a name wins, the first non-empty
 * current-context wins, missing files skipped when there are several), so the user entry is the one kubectl uses.
 */
import path from 'node:path';
import { dump, load } from 'js-yaml';

type Entry = Record<string, unknown>;

interface KubeconfigDoc {
  'current-context'?: string;
  contexts?: { name?: string; context?: Entry }[];
  clusters?: { name?: string; cluster?: Entry }[];
  users?: { name?: string; user?: Entry }[];
}

export interface SourceFile {
  file: string;
  /** The file's text, or undefined when it does not exist. */
  text: string | undefined;
}

export class KubeconfigGenerationError extends Error {}

export function gatewayServer(hubServer: string, cluster: string): string {
  return `${hubServer.replace(/\/+$/, '')}/apis/cluster.core.oam.dev/v1alpha1/clustergateways/${encodeURIComponent(cluster)}/proxy`;
}

/** Names the kubeconfig's context `<hub context>@<cluster>`: several clusters' files merge without clashes. */
export function contextName(hubContext: string, cluster: string): string {
  return `${hubContext}@${cluster}`;
}

const clusterPathFields = ['certificate-authority'];
const userPathFields = ['client-certificate', 'client-key', 'tokenFile', 'token-file'];

function absolute(value: unknown, dir: string): unknown {
  return typeof value === 'string' && value !== '' && !path.isAbsolute(value) ? path.join(dir, value) : value;
}

function withAbsolutePaths(entry: Entry, fields: string[], dir: string): Entry {
  const out: Entry = { ...entry };
  for (const f of fields) if (f in out) out[f] = absolute(out[f], dir);
  return out;
}

export function gatewayKubeconfig(
  sources: SourceFile[],
  cluster: string,
  contextOverride?: string,
): { kubeconfig: string; context: string } {
  const clusters = new Map<string, { value: Entry; file: string }>();
  const users = new Map<string, { value: Entry; file: string }>();
  const contexts = new Map<string, Entry>();
  let current: string | undefined;
  for (const { file, text } of sources) {
    if (text === undefined) continue;
    let doc: KubeconfigDoc;
    try {
      doc = (load(text) ?? {}) as KubeconfigDoc;
    } catch (err) {
      throw new KubeconfigGenerationError(`kubeconfig ${file} is not valid YAML: ${(err as Error).message}`);
    }
    current ||= doc['current-context'] || undefined;
    for (const c of doc.clusters ?? [])
      if (c?.name && !clusters.has(c.name)) clusters.set(c.name, { value: c.cluster ?? {}, file });
    for (const u of doc.users ?? [])
      if (u?.name && !users.has(u.name)) users.set(u.name, { value: u.user ?? {}, file });
    for (const c of doc.contexts ?? [])
      if (c?.name && !contexts.has(c.name)) contexts.set(c.name, c.context ?? {});
  }
  const hubContext =
    contextOverride || current || (contexts.size === 1 ? [...contexts.keys()][0] : undefined);
  const context = hubContext === undefined ? undefined : contexts.get(hubContext);
  if (!hubContext || !context) {
    throw new KubeconfigGenerationError(
      hubContext ? `the kubeconfig has no context "${hubContext}"` : 'the kubeconfig has no current context',
    );
  }
  const clusterName = typeof context.cluster === 'string' ? context.cluster : undefined;
  const hubCluster = clusterName === undefined ? undefined : clusters.get(clusterName);
  const server = hubCluster?.value.server;
  if (!hubCluster || typeof server !== 'string' || !server) {
    throw new KubeconfigGenerationError(`context "${hubContext}" has no cluster with a server`);
  }
  const userName = typeof context.user === 'string' ? context.user : undefined;
  const hubUser = userName === undefined ? undefined : users.get(userName);

  const name = contextName(hubContext, cluster);
  const clusterEntry = {
    ...withAbsolutePaths(hubCluster.value, clusterPathFields, path.dirname(hubCluster.file)),
    server: gatewayServer(server, cluster),
  };
  const userEntry = hubUser ? userWithAbsolutePaths(hubUser.value, path.dirname(hubUser.file)) : undefined;
  const doc = {
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': name,
    clusters: [{ name, cluster: clusterEntry }],
    // The user keeps its name: it is the same identity as on the hub, and merges with the hub's kubeconfig unchanged.
    ...(userEntry && userName ? { users: [{ name: userName, user: userEntry }] } : {}),
    contexts: [{ name, context: { cluster: name, ...(userEntry && userName ? { user: userName } : {}) } }],
  };
  return { kubeconfig: dump(doc, { noRefs: true, lineWidth: -1 }), context: name };
}

function userWithAbsolutePaths(user: Entry, dir: string): Entry {
  const out = withAbsolutePaths(user, userPathFields, dir);
  const exec = out.exec as Entry | undefined;
  // client-go runs an exec command named with a path relative to the kubeconfig's directory from there; a bare name
  // is looked up in PATH and stays as it is.
  if (
    exec &&
    typeof exec.command === 'string' &&
    exec.command.includes('/') &&
    !path.isAbsolute(exec.command)
  ) {
    out.exec = { ...exec, command: path.join(dir, exec.command) };
  }
  return out;
}

/**
 * Kubeconfig and in-cluster config, read without @kubernetes/client-node:
 * loading that package costs about 90 MB of RSS (docs/benchmarks-log.md), more
 * than the agent may use in all and half of what the gateway and the addon
 * manager use. What is read is what client-go reads for a server component:
 *
 * - clusters: server, certificate-authority(-data), insecure-skip-tls-verify,
 *   tls-server-name, proxy-url (applied by client.ts: every connection to the
 *   server goes through it, HTTPS_PROXY and NO_PROXY notwithstanding, as in client-go);
 * - users: client-certificate(-data) and client-key(-data), token and
 *   tokenFile (re-read by the client, see credential-source.ts),
 *   username/password, impersonation (as, as-groups, as-uid,
 *   as-user-extra) and exec plugins (run by credential-source.ts);
 * - KUBECONFIG lists merged as client-go merges them, and in-cluster config.
 *
 * Relative file names are resolved against the directory of the kubeconfig
 * that names them, as client-go does. auth-provider entries (gcp, azure,
 * oidc: removed from client-go or replaced by exec plugins) are refused with
 * a message that says so.
 *
 * Every read returns the content of all the files it used, hashed, so a
 * caller can tell when a rotated credential needs a new connection.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import type https from 'node:https';
import os from 'node:os';
import path from 'node:path';
// js-yaml, not the project's `yaml`: loading it costs about 3.5 MB of RSS against 12.5 MB (measured).
import { load as parse } from 'js-yaml';
import { redactProxyUrl } from '../transport/env-proxy.ts';
import type { ExecClusterInfo, ExecConfig } from './exec-credential.ts';

export interface Connection {
  server: string;
  /** TLS and auth options for node:https (ca, cert, key, servername, rejectUnauthorized, headers). */
  options: https.RequestOptions;
  /** Hash of every file and setting the connection was built from: changes when any of them does. */
  fingerprint: string;
  /** The token, when the credential is one (e.g. to read the ServiceAccount it names). */
  token?: string;
  /** The token came from this file, which its owner rotates (the kubelet, in a pod): read it again. */
  tokenFile?: string;
  /** The credential comes from this client-go exec plugin, to run before the first request. */
  exec?: { config: ExecConfig; cluster: ExecClusterInfo };
  /** The cluster's proxy-url: every connection to the server goes through this proxy (client.ts). */
  proxyUrl?: string;
}

export class KubeconfigError extends Error {}

export type ReadFile = (file: string) => string;
const readText: ReadFile = (file) => readFileSync(file, 'utf8');

interface ClusterEntry {
  server?: string;
  'certificate-authority'?: string;
  'certificate-authority-data'?: string;
  'insecure-skip-tls-verify'?: boolean;
  'tls-server-name'?: string;
  'proxy-url'?: string;
}

interface UserEntry {
  'client-certificate'?: string;
  'client-certificate-data'?: string;
  'client-key'?: string;
  'client-key-data'?: string;
  token?: string;
  tokenFile?: string;
  /** client-node's spelling of tokenFile, accepted for kubeconfigs written for it. */
  'token-file'?: string;
  username?: string;
  password?: string;
  as?: string;
  'as-groups'?: string[];
  'as-uid'?: string;
  'as-user-extra'?: Record<string, string[]>;
  exec?: ExecConfig;
  'auth-provider'?: { name?: string };
}

interface ContextEntry {
  cluster?: string;
  user?: string;
}

interface KubeconfigDoc {
  'current-context'?: string;
  contexts?: { name?: string; context?: ContextEntry }[];
  clusters?: { name?: string; cluster?: ClusterEntry }[];
  users?: { name?: string; user?: UserEntry }[];
}

/** An entry and the file that defined it (relative paths are resolved against its directory). */
interface Defined<T> {
  value: T;
  file: string;
}

/**
 * Reads a kubeconfig and everything it refers to. A list of files is merged as
 * client-go merges KUBECONFIG: the first file that defines a name wins, the
 * first non-empty current-context wins, and a file that does not exist is skipped.
 */
export function loadKubeconfig(
  files: string | string[],
  readFile: ReadFile = readText,
  /** kubectl's --context: this context instead of the current one. */
  contextOverride?: string,
): Connection {
  const list = typeof files === 'string' ? [files] : files;
  const clusters = new Map<string, Defined<ClusterEntry>>();
  const users = new Map<string, Defined<UserEntry>>();
  const contexts = new Map<string, Defined<ContextEntry>>();
  let currentContext: string | undefined;
  let read = 0;
  for (const file of list) {
    const doc = readDoc(file, readFile, list.length > 1);
    if (!doc) continue;
    read++;
    currentContext ||= doc['current-context'] || undefined;
    for (const c of doc.clusters ?? [])
      if (c?.name && !clusters.has(c.name)) clusters.set(c.name, { value: c.cluster ?? {}, file });
    for (const u of doc.users ?? [])
      if (u?.name && !users.has(u.name)) users.set(u.name, { value: u.user ?? {}, file });
    for (const c of doc.contexts ?? [])
      if (c?.name && !contexts.has(c.name)) contexts.set(c.name, { value: c.context ?? {}, file });
  }
  const where = list.join(path.delimiter);
  if (read === 0) throw new KubeconfigError(`none of the kubeconfig files ${where} exists`);
  // client-go uses the only context when none is current; so does kubectl.
  const contextName =
    contextOverride || (currentContext ?? (contexts.size === 1 ? [...contexts.keys()][0] : undefined));
  const context = contextName === undefined ? undefined : contexts.get(contextName)?.value;
  if (!context && contextOverride) {
    throw new KubeconfigError(
      `kubeconfig ${where}: no context "${contextOverride}" (it has: ${[...contexts.keys()].join(', ') || 'none'})`,
    );
  }
  if (!context) throw new KubeconfigError(`kubeconfig ${where}: no current context`);
  const cluster = context.cluster === undefined ? undefined : clusters.get(context.cluster);
  if (!cluster?.value.server) {
    throw new KubeconfigError(`kubeconfig ${where}: context "${contextName}" has no cluster with a server`);
  }
  const user = (context.user === undefined ? undefined : users.get(context.user)) ?? {
    value: {},
    file: cluster.file,
  };
  return fromEntries(cluster, user, readFile);
}

function readDoc(file: string, readFile: ReadFile, skipMissing: boolean): KubeconfigDoc | undefined {
  let text: string;
  try {
    text = readFile(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (skipMissing && code === 'ENOENT') return undefined;
    throw new KubeconfigError(`cannot read kubeconfig ${file}: ${code ?? err}`);
  }
  try {
    const doc = parse(text) ?? {};
    if (typeof doc !== 'object') throw new Error('not a mapping');
    return doc as KubeconfigDoc;
  } catch (err) {
    throw new KubeconfigError(`kubeconfig ${file} is not valid YAML: ${(err as Error).message}`);
  }
}

function fromEntries(
  { value: cluster, file: clusterFile }: Defined<ClusterEntry>,
  { value: user, file: userFile }: Defined<UserEntry>,
  readFile: ReadFile,
): Connection {
  const server = cluster.server as string;
  const refReader = (file: string) => {
    const dir = path.dirname(file);
    const resolve = (p: string) => (path.isAbsolute(p) ? p : path.join(dir, p));
    return (what: string, p: string) => {
      try {
        return readFile(resolve(p));
      } catch (err) {
        throw new KubeconfigError(
          `kubeconfig ${file}: cannot read ${what} ${resolve(p)}: ${(err as NodeJS.ErrnoException).code ?? err}`,
        );
      }
    };
  };
  const readClusterRef = refReader(clusterFile);
  const readUserRef = refReader(userFile);
  const ca = cluster['certificate-authority-data']
    ? decode(cluster['certificate-authority-data'])
    : cluster['certificate-authority']
      ? readClusterRef('certificate-authority', cluster['certificate-authority'])
      : undefined;
  const pickUser = (what: string, data: string | undefined, ref: string | undefined) =>
    data ? decode(data) : ref ? readUserRef(what, ref) : undefined;
  const cert = pickUser('client-certificate', user['client-certificate-data'], user['client-certificate']);
  const key = pickUser('client-key', user['client-key-data'], user['client-key']);
  if (Boolean(cert) !== Boolean(key)) {
    throw new KubeconfigError(
      `kubeconfig ${userFile}: a client certificate needs its key, and a key its certificate`,
    );
  }
  if (user['auth-provider']) {
    throw new KubeconfigError(
      `kubeconfig ${userFile}: auth-provider "${user['auth-provider'].name ?? ''}" is not supported (client-go dropped gcp and azure); use an exec plugin, a client certificate or a token`,
    );
  }
  const tokenFileRef = user.tokenFile || user['token-file'];
  // As in client-go, a token file wins over an inline token: it is the one kept fresh.
  const tokenFile = tokenFileRef
    ? path.isAbsolute(tokenFileRef)
      ? tokenFileRef
      : path.join(path.dirname(userFile), tokenFileRef)
    : undefined;
  const token = tokenFileRef ? readUserRef('tokenFile', tokenFileRef).trim() : user.token || undefined;
  const basic = user.username ? { username: user.username, password: user.password ?? '' } : undefined;
  if (basic && token) {
    throw new KubeconfigError(
      `kubeconfig ${userFile}: username/password and a bearer token are both set; keep one`,
    );
  }
  const exec = user.exec ? execEntry(user.exec, userFile, server, ca) : undefined;
  return connection(server, {
    ...(ca ? { ca } : {}),
    ...(cert && key ? { cert, key } : {}),
    ...(token ? { token } : {}),
    ...(tokenFile ? { tokenFile } : {}),
    ...(basic ? { basic } : {}),
    ...(exec ? { exec } : {}),
    impersonation: impersonationHeaders(user),
    insecure: cluster['insecure-skip-tls-verify'] === true,
    ...(cluster['tls-server-name'] ? { servername: cluster['tls-server-name'] } : {}),
    ...(cluster['proxy-url'] ? { proxyUrl: proxyUrlOf(cluster['proxy-url'], clusterFile) } : {}),
  });
}

/** client-go's validation: a URL with scheme http, https or socks5 (which connect-egress.ts may refuse). */
function proxyUrlOf(value: string, file: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new KubeconfigError(`kubeconfig ${file}: proxy-url is not a URL`);
  }
  if (!['http:', 'https:', 'socks5:', 'socks5h:'].includes(url.protocol) || !url.host) {
    throw new KubeconfigError(
      `kubeconfig ${file}: proxy-url ${redactProxyUrl(url)} must be an http://, https:// or socks5:// URL with a host`,
    );
  }
  return value;
}

function execEntry(
  config: ExecConfig,
  file: string,
  server: string,
  ca: string | undefined,
): NonNullable<Connection['exec']> {
  if (typeof config !== 'object' || typeof config.command !== 'string' || !config.command) {
    throw new KubeconfigError(`kubeconfig ${file}: the user's exec has no command`);
  }
  // client-go runs a command named with a path relative to the kubeconfig's directory from there.
  const command =
    config.command.includes('/') && !path.isAbsolute(config.command)
      ? path.join(path.dirname(file), config.command)
      : config.command;
  return { config: { ...config, command }, cluster: { server, ...(ca ? { caBundle: ca } : {}) } };
}

function impersonationHeaders(user: UserEntry): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  if (user.as) headers['impersonate-user'] = user.as;
  if (user['as-groups']?.length) headers['impersonate-group'] = user['as-groups'];
  if (user['as-uid']) headers['impersonate-uid'] = user['as-uid'];
  for (const [k, values] of Object.entries(user['as-user-extra'] ?? {})) {
    headers[`impersonate-extra-${encodeURIComponent(k)}`] = values;
  }
  return headers;
}

export const serviceAccountDir = '/var/run/secrets/kubernetes.io/serviceaccount';

/** The pod's own identity: KUBERNETES_SERVICE_HOST/PORT, the ServiceAccount token and CA (the kubelet rotates the token: read it again). */
export function loadInCluster(
  env: Record<string, string | undefined> = process.env,
  readFile: ReadFile = readText,
  dir = serviceAccountDir,
): Connection {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) {
    throw new KubeconfigError(
      'not in a cluster (KUBERNETES_SERVICE_HOST/PORT unset): pass --kubeconfig or set KUBECONFIG',
    );
  }
  const read = (name: string) => {
    try {
      return readFile(path.join(dir, name));
    } catch (err) {
      throw new KubeconfigError(
        `cannot read the ServiceAccount ${name} in ${dir}: ${(err as NodeJS.ErrnoException).code ?? err}`,
      );
    }
  };
  const hostPart = host.includes(':') ? `[${host}]` : host;
  return connection(`https://${hostPart}:${port}`, {
    ca: read('ca.crt'),
    token: read('token').trim(),
    tokenFile: path.join(dir, 'token'),
    impersonation: {},
    insecure: false,
  });
}

/**
 * The hub connection of a server component: the file given, else KUBECONFIG
 * (a list), else in-cluster config, else ~/.kube/config: controller-runtime's
 * order, so that a pod uses its ServiceAccount even where a home directory
 * holds a kubeconfig.
 */
export function loadDefault(
  file?: string,
  env: Record<string, string | undefined> = process.env,
  readFile: ReadFile = readText,
  inClusterDir = serviceAccountDir,
): Connection {
  if (file) return loadKubeconfig(file, readFile);
  const list = (env.KUBECONFIG ?? '').split(path.delimiter).filter(Boolean);
  if (list.length > 0) return loadKubeconfig(list, readFile);
  if (env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT) {
    return loadInCluster(env, readFile, inClusterDir);
  }
  const home = env.HOME || os.homedir();
  const homeConfig = home ? path.join(home, '.kube', 'config') : undefined;
  if (homeConfig && existsSync(homeConfig)) return loadKubeconfig(homeConfig, readFile);
  throw new KubeconfigError(
    'no kubeconfig: pass --kubeconfig, set KUBECONFIG, run in a pod (in-cluster config) or create ~/.kube/config',
  );
}

function decode(data: string): string {
  return Buffer.from(data, 'base64').toString('utf8');
}

function connection(
  server: string,
  c: {
    ca?: string;
    cert?: string;
    key?: string;
    token?: string;
    tokenFile?: string;
    basic?: { username: string; password: string };
    exec?: NonNullable<Connection['exec']>;
    impersonation: Record<string, string | string[]>;
    insecure: boolean;
    servername?: string;
    proxyUrl?: string;
  },
): Connection {
  const headers: Record<string, string | string[]> = { ...c.impersonation };
  if (c.token) headers.authorization = `Bearer ${c.token}`;
  else if (c.basic) {
    headers.authorization = `Basic ${Buffer.from(`${c.basic.username}:${c.basic.password}`).toString('base64')}`;
  }
  const options: https.RequestOptions = {
    ...(c.ca ? { ca: c.ca } : {}),
    ...(c.cert && c.key ? { cert: c.cert, key: c.key } : {}),
    ...(Object.keys(headers).length > 0 ? { headers } : {}),
    ...(c.servername ? { servername: c.servername } : {}),
    rejectUnauthorized: !c.insecure,
  };
  const fingerprint = createHash('sha256')
    .update(
      JSON.stringify([
        server,
        c.ca,
        c.cert,
        c.key,
        c.token,
        c.basic,
        c.exec,
        c.impersonation,
        c.insecure,
        c.servername,
        c.proxyUrl,
      ]),
    )
    .digest('hex');
  return {
    server,
    options,
    fingerprint,
    ...(c.token ? { token: c.token } : {}),
    ...(c.tokenFile ? { tokenFile: c.tokenFile } : {}),
    ...(c.exec ? { exec: c.exec } : {}),
    ...(c.proxyUrl ? { proxyUrl: c.proxyUrl } : {}),
  };
}

/**
 * A small kubeconfig reader for the agent. @kubernetes/client-node's
 * KubeConfig would do this, but loading that package costs about 90 MB of
 * RSS, more than the whole agent may use (docs/benchmarks.md). The agent
 * needs only what OCM writes and what a pod has: certificate and key (data
 * or files, relative paths resolved against the kubeconfig's directory, as
 * client-go does), a token or token file, the CA, and in-cluster config.
 * Exec plugins and auth providers are refused with a message that says so.
 *
 * Every read returns the content of all the files it used, so the caller
 * can tell when a rotated credential needs a new connection.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type https from 'node:https';
import path from 'node:path';
// js-yaml, not the project's `yaml`: loading it costs about 3.5 MB of RSS against 12.5 MB (measured).
import { load as parse } from 'js-yaml';

export interface Connection {
  server: string;
  /** TLS and auth options for node:https. */
  options: https.RequestOptions;
  /** Hash of every file and setting the connection was built from: changes when any of them does. */
  fingerprint: string;
  /** The token, when the credential is one (e.g. to read the ServiceAccount it names). */
  token?: string;
}

export class KubeconfigError extends Error {}

interface NamedEntry<T> {
  name: string;
  [key: string]: unknown;
  cluster?: T;
  user?: T;
  context?: T;
}

interface ClusterEntry {
  server?: string;
  'certificate-authority'?: string;
  'certificate-authority-data'?: string;
  'insecure-skip-tls-verify'?: boolean;
  'tls-server-name'?: string;
}

interface UserEntry {
  'client-certificate'?: string;
  'client-certificate-data'?: string;
  'client-key'?: string;
  'client-key-data'?: string;
  token?: string;
  tokenFile?: string;
  exec?: unknown;
  'auth-provider'?: unknown;
  username?: string;
}

type ReadFile = (file: string) => string;
const readText: ReadFile = (file) => readFileSync(file, 'utf8');

/** Reads a kubeconfig file and everything it refers to. */
export function loadKubeconfig(file: string, readFile: ReadFile = readText): Connection {
  let text: string;
  try {
    text = readFile(file);
  } catch (err) {
    throw new KubeconfigError(
      `cannot read kubeconfig ${file}: ${(err as NodeJS.ErrnoException).code ?? err}`,
    );
  }
  let doc: {
    'current-context'?: string;
    contexts?: NamedEntry<{ cluster?: string; user?: string }>[];
    clusters?: NamedEntry<ClusterEntry>[];
    users?: NamedEntry<UserEntry>[];
  };
  try {
    doc = parse(text) ?? {};
  } catch (err) {
    throw new KubeconfigError(`kubeconfig ${file} is not valid YAML: ${(err as Error).message}`);
  }
  const dir = path.dirname(file);
  const contexts = doc.contexts ?? [];
  const contextName = doc['current-context'] || (contexts.length === 1 ? contexts[0]?.name : undefined);
  const context = contexts.find((c) => c.name === contextName)?.context;
  if (!context) throw new KubeconfigError(`kubeconfig ${file}: no current context`);
  const cluster = doc.clusters?.find((c) => c.name === context.cluster)?.cluster;
  if (!cluster?.server) {
    throw new KubeconfigError(`kubeconfig ${file}: context "${contextName}" has no cluster with a server`);
  }
  const user = doc.users?.find((u) => u.name === context.user)?.user ?? {};
  if (user.exec || user['auth-provider']) {
    throw new KubeconfigError(
      `kubeconfig ${file}: exec plugins and auth providers are not supported by the agent; use a client certificate or a token`,
    );
  }
  const resolve = (p: string) => (path.isAbsolute(p) ? p : path.join(dir, p));
  const readRef = (what: string, p: string) => {
    try {
      return readFile(resolve(p));
    } catch (err) {
      throw new KubeconfigError(
        `kubeconfig ${file}: cannot read ${what} ${resolve(p)}: ${(err as NodeJS.ErrnoException).code ?? err}`,
      );
    }
  };
  const pick = (what: string, data: string | undefined, ref: string | undefined) =>
    data ? Buffer.from(data, 'base64').toString('utf8') : ref ? readRef(what, ref) : undefined;

  const ca = pick(
    'certificate-authority',
    cluster['certificate-authority-data'],
    cluster['certificate-authority'],
  );
  const cert = pick('client-certificate', user['client-certificate-data'], user['client-certificate']);
  const key = pick('client-key', user['client-key-data'], user['client-key']);
  if (Boolean(cert) !== Boolean(key)) {
    throw new KubeconfigError(
      `kubeconfig ${file}: a client certificate needs its key, and a key its certificate`,
    );
  }
  const token = user.token || (user.tokenFile ? readRef('tokenFile', user.tokenFile).trim() : undefined);
  return connection(cluster.server, {
    ...(ca ? { ca } : {}),
    ...(cert && key ? { cert, key } : {}),
    ...(token ? { token } : {}),
    insecure: cluster['insecure-skip-tls-verify'] === true,
    ...(cluster['tls-server-name'] ? { servername: cluster['tls-server-name'] } : {}),
  });
}

export const serviceAccountDir = '/var/run/secrets/kubernetes.io/serviceaccount';

/** The pod's own identity: KUBERNETES_SERVICE_HOST/PORT, the ServiceAccount token and CA (re-read: the kubelet rotates the token). */
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
    insecure: false,
  });
}

function connection(
  server: string,
  c: { ca?: string; cert?: string; key?: string; token?: string; insecure: boolean; servername?: string },
): Connection {
  const options: https.RequestOptions = {
    ...(c.ca ? { ca: c.ca } : {}),
    ...(c.cert && c.key ? { cert: c.cert, key: c.key } : {}),
    ...(c.token ? { headers: { authorization: `Bearer ${c.token}` } } : {}),
    ...(c.servername ? { servername: c.servername } : {}),
    rejectUnauthorized: !c.insecure,
  };
  const fingerprint = createHash('sha256')
    .update(JSON.stringify([server, c.ca, c.cert, c.key, c.token, c.insecure, c.servername]))
    .digest('hex');
  return { server, options, fingerprint, ...(c.token ? { token: c.token } : {}) };
}

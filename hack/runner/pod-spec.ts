/**
 * Turns a Deployment's pod template into a local process description: the
 * command to run, its environment, and the files its volumes hold. Pure
 * functions; deployment-runner.ts does the I/O.
 *
 * Processes share this machine's filesystem and network, so two rewrites
 * make a pod template runnable here:
 * - every volume mount path (say /etc/hub) is replaced, in args and env
 *   values, by a private directory holding that volume's files;
 * - image paths named in `pathMap` (say /app -> the repository) and the
 *   `node` executable (-> the Node that runs the tests) are mapped;
 * - optionally (`portMap`), each declared container port gets a host port of
 *   its own, rewritten in args and env (`--port=8080` -> `--port=23456`), as
 *   a pod's own network namespace would allow: the same Deployment on two
 *   managed clusters then runs twice on this one machine.
 */
import { createHash } from 'node:crypto';
import path from 'node:path';

export interface Container {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  ports?: { name?: string; containerPort: number; hostPort?: number }[];
  volumeMounts?: { name: string; mountPath: string; subPath?: string; readOnly?: boolean }[];
  readinessProbe?: Probe;
  livenessProbe?: Probe;
}

export interface Probe {
  httpGet?: { path?: string; port: number | string; scheme?: 'HTTP' | 'HTTPS' };
  tcpSocket?: { port: number | string };
}

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    fieldRef?: { fieldPath: string };
    secretKeyRef?: { name: string; key: string; optional?: boolean };
    configMapKeyRef?: { name: string; key: string; optional?: boolean };
  };
}

export interface Volume {
  name: string;
  secret?: { secretName: string; items?: { key: string; path: string }[]; optional?: boolean };
  configMap?: { name: string; items?: { key: string; path: string }[]; optional?: boolean };
  emptyDir?: Record<string, unknown>;
}

export interface PodTemplate {
  metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: { containers: Container[]; volumes?: Volume[]; serviceAccountName?: string };
}

/** What the pod's references resolve to: Secret and ConfigMap data (decoded). */
export interface ResolvedObjects {
  secrets: Map<string, Record<string, string> | undefined>;
  configMaps: Map<string, Record<string, string> | undefined>;
}

export interface PodIdentity {
  name: string;
  namespace: string;
  nodeName: string;
  serviceAccountName: string;
}

export interface LocalProcessSpec {
  command: string;
  args: string[];
  env: Record<string, string>;
  /** Volume name -> files (relative path -> content) to write under volumeDir(name). */
  volumes: Map<string, Map<string, string>>;
  /** Directory standing in for each mount path. */
  mounts: { mountPath: string; localPath: string }[];
  /** Container port -> host port, when ports are remapped. */
  ports: Map<number, number>;
}

export class MissingReference extends Error {}

export interface TranslateOptions {
  template: PodTemplate;
  pod: PodIdentity;
  objects: ResolvedObjects;
  /** Directory holding this pod's volumes: <podDir>/volumes/<name>. */
  podDir: string;
  /** Image path prefix -> local directory. */
  pathMap: Record<string, string>;
  /** Executable to use for a container command of `node`. */
  nodeExecutable: string;
  /** Container port -> host port; absent: processes bind the declared ports themselves. */
  portMap?: Map<number, number>;
}

export function translatePod(options: TranslateOptions): LocalProcessSpec {
  const { template, pod, objects, podDir } = options;
  const container = template.spec.containers[0];
  if (!container) throw new Error('pod template has no containers');
  const argv = [...(container.command ?? []), ...(container.args ?? [])];
  if (argv.length === 0)
    throw new Error(`container "${container.name}" has no command: the runner cannot use image entrypoints`);

  const volumes = new Map<string, Map<string, string>>();
  for (const volume of template.spec.volumes ?? []) {
    volumes.set(volume.name, volumeFiles(volume, objects));
  }
  const mounts = (container.volumeMounts ?? [])
    .map((m) => ({
      mountPath: m.mountPath,
      localPath: m.subPath
        ? path.join(podDir, 'volumes', m.name, m.subPath)
        : path.join(podDir, 'volumes', m.name),
    }))
    // Longest first, so /etc/hub/extra is rewritten before /etc/hub.
    .sort((a, b) => b.mountPath.length - a.mountPath.length);
  for (const m of container.volumeMounts ?? []) {
    if (!volumes.has(m.name)) throw new Error(`volumeMount "${m.name}" names no volume of the pod`);
  }

  const ports = options.portMap ?? new Map<number, number>();
  const rewrite = (value: string) => rewritePorts(rewritePaths(value, mounts, options.pathMap), ports);
  const env: Record<string, string> = {};
  for (const v of container.env ?? []) {
    const value = envValue(v, pod, objects);
    if (value !== undefined) env[v.name] = rewrite(value);
  }
  // As the kubelet does: $(VAR) in command and args is the container's env var VAR ($$ is a literal $).
  const [first, ...rest] = argv.map((a) => rewrite(expandEnvReferences(a, env)));
  const command = first === 'node' ? options.nodeExecutable : (first as string);
  return { command, args: rest, env, volumes, mounts, ports };
}

/** `$(NAME)` -> env NAME where it is defined (left as written otherwise, as Kubernetes does); `$$` -> `$`. */
export function expandEnvReferences(value: string, env: Record<string, string>): string {
  return value.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name?: string) => {
    if (name === undefined) return '$';
    return env[name] ?? whole;
  });
}

/** Replaces a mapped port where a value ends with it: `--port=8080`, `0.0.0.0:8080`, `8080`. */
export function rewritePorts(value: string, ports: Map<number, number>): string {
  const m = /^(.*[=:])?(\d+)$/.exec(value);
  const port = m ? ports.get(Number(m[2])) : undefined;
  return port === undefined ? value : `${m?.[1] ?? ''}${port}`;
}

/**
 * Replaces mount paths and mapped image paths at the start of any path-like token, in one pass: each token
 * is rewritten once, by the first prefix that matches (mounts, longest first, then image paths). Rewriting
 * prefix by prefix rewrote results again: with an emptyDir at /tmp and a repository under /tmp, a mount
 * already rewritten to /tmp/<repo>/.../volumes/tls became .../volumes/tmp/<repo>/.../volumes/tls.
 */
export function rewritePaths(
  value: string,
  mounts: { mountPath: string; localPath: string }[],
  pathMap: Record<string, string>,
): string {
  const prefixes = [
    ...mounts.map((m) => [m.mountPath.replace(/\/$/, ''), m.localPath] as const),
    ...Object.entries(pathMap)
      .sort((a, b) => b[0].length - a[0].length)
      .map(([from, to]) => [from.replace(/\/$/, ''), to] as const),
  ];
  if (prefixes.length === 0) return value;
  const targets = new Map<string, string>();
  for (const [from, to] of prefixes) if (!targets.has(from)) targets.set(from, to);
  // A path starts the value or follows '=', ',' or ':' (flags like --kubeconfig=/etc/hub/kubeconfig).
  const alternatives = [...targets.keys()].map(escapeRegExp).join('|');
  const pattern = new RegExp(`(^|[=,:])(${alternatives})(?=/|$|,)`, 'g');
  return value.replace(pattern, (_m, lead: string, from: string) => `${lead}${targets.get(from)}`);
}

function envValue(v: EnvVar, pod: PodIdentity, objects: ResolvedObjects): string | undefined {
  if (v.value !== undefined) return v.value;
  const from = v.valueFrom;
  if (!from) return '';
  if (from.fieldRef) {
    const fields: Record<string, string> = {
      'metadata.name': pod.name,
      'metadata.namespace': pod.namespace,
      'spec.nodeName': pod.nodeName,
      'spec.serviceAccountName': pod.serviceAccountName,
      'status.podIP': '127.0.0.1',
      'status.hostIP': '127.0.0.1',
    };
    const value = fields[from.fieldRef.fieldPath];
    if (value === undefined)
      throw new Error(`env ${v.name}: fieldRef ${from.fieldRef.fieldPath} is not supported`);
    return value;
  }
  const ref = from.secretKeyRef ?? from.configMapKeyRef;
  if (ref) {
    const kind = from.secretKeyRef ? 'Secret' : 'ConfigMap';
    const data = (from.secretKeyRef ? objects.secrets : objects.configMaps).get(ref.name);
    const value = data?.[ref.key];
    if (value === undefined) {
      if (ref.optional) return undefined;
      throw new MissingReference(`env ${v.name}: ${kind} ${ref.name} key ${ref.key} does not exist yet`);
    }
    return value;
  }
  return '';
}

function volumeFiles(volume: Volume, objects: ResolvedObjects): Map<string, string> {
  const source = volume.secret
    ? {
        kind: 'Secret',
        name: volume.secret.secretName,
        spec: volume.secret,
        data: objects.secrets.get(volume.secret.secretName),
      }
    : volume.configMap
      ? {
          kind: 'ConfigMap',
          name: volume.configMap.name,
          spec: volume.configMap,
          data: objects.configMaps.get(volume.configMap.name),
        }
      : undefined;
  const files = new Map<string, string>();
  if (!source) return files; // emptyDir and friends: an empty directory
  if (!source.data) {
    if (source.spec.optional) return files;
    throw new MissingReference(`volume ${volume.name}: ${source.kind} ${source.name} does not exist yet`);
  }
  const items = source.spec.items ?? Object.keys(source.data).map((key) => ({ key, path: key }));
  for (const item of items) {
    const content = source.data[item.key];
    if (content === undefined)
      throw new MissingReference(
        `volume ${volume.name}: ${source.kind} ${source.name} has no key ${item.key}`,
      );
    files.set(item.path, content);
  }
  return files;
}

/**
 * Changes when the pod template changes: like a Deployment rollout, that
 * restarts the process. Secret and ConfigMap content changes do not: the
 * runner rewrites the files in place, as the kubelet does.
 */
export function templateHash(template: PodTemplate): string {
  return createHash('sha256').update(JSON.stringify(template)).digest('hex').slice(0, 16);
}

export function probePort(container: Container, port: number | string): number {
  if (typeof port === 'number') return port;
  const named = container.ports?.find((p) => p.name === port);
  if (!named)
    throw new Error(`probe names port "${port}" that container "${container.name}" does not declare`);
  return named.containerPort;
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

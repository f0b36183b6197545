/**
 * Plays the kubelet for this project's own Deployments (test harness only:
 * there is no container runtime here). It runs one local process per
 * Deployment whose container image starts with one of `images`, with the pod
 * template's command, args, env and Secret/ConfigMap volumes, authenticated
 * as the pod's ServiceAccount through a TokenRequest token (so real RBAC
 * applies), and reports readiness in the Deployment's status, which nobody
 * else writes: kube-controller-manager runs without its deployment
 * controller here.
 *
 * Processes share the machine's network: two Deployments must not listen
 * on the same port, unless the runner remaps ports (`remapPorts`: each
 * declared container port gets a free host port, rewritten in args, env and
 * probes), which is how one Deployment runs on several managed clusters here.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import type { KubeClient, KubeObject } from '../../shared/kube/client.ts';
import { requestServiceAccountToken } from '../../shared/kube/service-account-token.ts';
import { StatusError } from '../../shared/kube/status.ts';
import { writeKubeconfig } from '../localenv/kubeconfig.ts';
import { freePort } from '../localenv/ports.ts';
import type { ManagedProcess, Supervisor } from '../localenv/supervisor.ts';
import {
  type Container,
  type LocalProcessSpec,
  MissingReference,
  type PodTemplate,
  probePort,
  type ResolvedObjects,
  templateHash,
  translatePod,
} from './pod-spec.ts';

export interface RunnerOptions {
  /** Cluster whose Deployments to run, e.g. "hub" or "cluster1". */
  clusterName: string;
  client: KubeClient;
  /** The cluster's API server and CA, for the processes' kubeconfig. */
  server: string;
  caCert: string;
  supervisor: Supervisor;
  stateDir: string;
  /** Image prefixes this runner runs; other Deployments are left alone. */
  images: string[];
  pathMap: Record<string, string>;
  nodeExecutable?: string;
  /** Give each declared container port a free host port (see above). */
  remapPorts?: boolean;
  intervalMs?: number;
  log?: (line: string) => void;
}

interface Deployment extends KubeObject {
  metadata: { name: string; namespace: string; generation?: number; uid?: string };
  spec: { replicas?: number; template: PodTemplate };
  status?: Record<string, unknown>;
}

interface Running {
  hash: string;
  /** The Deployment's uid: a Deployment deleted and created again between two passes is a new one. */
  uid: string | undefined;
  process?: ManagedProcess;
  spec?: LocalProcessSpec;
  ready: boolean;
  restarts: number;
  nextStart: number;
  waitingFor?: string;
  reported?: string;
  /** Container port -> host port, kept across restarts of this pod. */
  portMap?: Map<number, number>;
}

export class DeploymentRunner {
  readonly #o: RunnerOptions;
  readonly #running = new Map<string, Running>();
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  /** The pass in progress: stop() waits for it, so no pass starts a process after stop() returns. */
  #pass: Promise<void> | undefined;

  constructor(options: RunnerOptions) {
    this.#o = options;
  }

  /** Starts the passes; after stop(), starts again (a node coming back: its pods start anew). */
  start(): void {
    this.#stopped = false;
    const tick = async () => {
      if (this.#stopped) return;
      // The next pass is scheduled only after this one ends: passes never overlap.
      this.#pass = this.sync().catch((err: unknown) => {
        this.#o.log?.(`[runner ${this.#o.clusterName}] sync failed: ${(err as Error).message}`);
      });
      await this.#pass;
      this.#pass = undefined;
      if (this.#stopped) return;
      this.#timer = setTimeout(tick, this.#o.intervalMs ?? 1000);
    };
    void tick();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#pass;
    await Promise.all([...this.#running.values()].map((r) => r.process?.stop()));
    this.#running.clear();
  }

  /** One reconciliation pass: start, restart, stop processes and report status. */
  async sync(): Promise<void> {
    const list = await this.#o.client.list<Deployment>('/apis/apps/v1/deployments');
    const wanted = list.items.filter((d) => this.#ours(d) && (d.spec.replicas ?? 1) > 0);
    const keys = new Set(wanted.map(key));
    for (const [k, r] of this.#running) {
      if (!keys.has(k)) {
        this.#o.log?.(`[runner ${this.#o.clusterName}] stopping ${k}`);
        await r.process?.stop();
        this.#running.delete(k);
      }
    }
    for (const d of wanted) await this.#reconcile(d);
  }

  #ours(d: Deployment): boolean {
    const image = d.spec.template.spec.containers[0]?.image ?? '';
    return this.#o.images.some((prefix) => image.startsWith(prefix));
  }

  async #reconcile(d: Deployment): Promise<void> {
    const k = key(d);
    const hash = templateHash(d.spec.template);
    let r = this.#running.get(k);
    if (r && r.hash !== hash) {
      this.#o.log?.(`[runner ${this.#o.clusterName}] pod template of ${k} changed: restarting`);
      await r.process?.stop();
      r = undefined;
    }
    // Its pod went with the old Deployment, and so did what it ran as (a ServiceAccount deleted with
    // it leaves the old pod's token rejected): a kubelet would never carry a pod over.
    if (r && r.uid !== d.metadata.uid) {
      this.#o.log?.(`[runner ${this.#o.clusterName}] ${k} was deleted and created again: new pod`);
      await r.process?.stop();
      r = undefined;
    }
    if (!r) {
      r = { hash, uid: d.metadata.uid, ready: false, restarts: 0, nextStart: 0 };
      if (this.#o.remapPorts) {
        r.portMap = new Map();
        for (const p of d.spec.template.spec.containers[0]?.ports ?? []) {
          // A hostPort is the port on the node, as the kubelet binds it: kept, not remapped.
          r.portMap.set(p.containerPort, p.hostPort ?? (await freePort()));
        }
      }
      this.#running.set(k, r);
    }
    const podDir = path.join(
      this.#o.stateDir,
      'pods',
      this.#o.clusterName,
      d.metadata.namespace,
      d.metadata.name,
    );
    try {
      const spec = await this.#translate(d, podDir, r.portMap);
      r.waitingFor = undefined;
      writeVolumes(podDir, spec); // keeps mounted Secrets current, as the kubelet does
      if (r.process?.exit) {
        r.ready = false;
        r.restarts++;
        r.nextStart = Date.now() + Math.min(30_000, 1000 * 2 ** Math.min(r.restarts, 5));
        this.#o.log?.(
          `[runner ${this.#o.clusterName}] ${k} exited (${r.process.exit.signal ?? r.process.exit.code}); restart #${r.restarts}; log: ${r.process.logPath}`,
        );
        r.process = undefined;
      }
      if (!r.process && Date.now() >= r.nextStart) {
        const env = { ...spec.env, KUBECONFIG: await this.#serviceAccountKubeconfig(d, podDir) };
        r.process = this.#o.supervisor.start(
          `${this.#o.clusterName}-${d.metadata.namespace}-${d.metadata.name}`,
          spec.command,
          {
            args: spec.args,
            env,
            cwd: podDir,
          },
        );
        r.spec = spec;
        this.#o.log?.(`[runner ${this.#o.clusterName}] started ${k} (pid ${r.process.pid})`);
      }
      if (r.process && !r.process.exit) {
        r.ready = await probeReady(d.spec.template.spec.containers[0]!, spec.ports);
      }
    } catch (err) {
      if (!(err instanceof MissingReference)) throw err;
      r.waitingFor = err.message; // like ContainerCreating: wait for the Secret to appear
    }
    await this.#reportStatus(d, r);
  }

  async #translate(d: Deployment, podDir: string, portMap?: Map<number, number>): Promise<LocalProcessSpec> {
    const template = d.spec.template;
    const objects: ResolvedObjects = { secrets: new Map(), configMaps: new Map() };
    const ns = d.metadata.namespace;
    const container = template.spec.containers[0];
    const secretNames = new Set<string>();
    const configMapNames = new Set<string>();
    for (const v of template.spec.volumes ?? []) {
      if (v.secret) secretNames.add(v.secret.secretName);
      if (v.configMap) configMapNames.add(v.configMap.name);
    }
    for (const e of container?.env ?? []) {
      if (e.valueFrom?.secretKeyRef) secretNames.add(e.valueFrom.secretKeyRef.name);
      if (e.valueFrom?.configMapKeyRef) configMapNames.add(e.valueFrom.configMapKeyRef.name);
    }
    for (const name of secretNames) {
      const s = await this.#o.client.getOptional<KubeObject & { data?: Record<string, string> }>(
        `/api/v1/namespaces/${ns}/secrets/${name}`,
      );
      objects.secrets.set(name, s ? decode(s.data ?? {}) : undefined);
    }
    for (const name of configMapNames) {
      const c = await this.#o.client.getOptional<KubeObject & { data?: Record<string, string> }>(
        `/api/v1/namespaces/${ns}/configmaps/${name}`,
      );
      objects.configMaps.set(name, c ? (c.data ?? {}) : undefined);
    }
    return translatePod({
      template,
      pod: {
        name: `${d.metadata.name}-local`,
        namespace: ns,
        nodeName: `${this.#o.clusterName}-local`,
        serviceAccountName: template.spec.serviceAccountName ?? 'default',
      },
      objects,
      podDir,
      pathMap: this.#o.pathMap,
      nodeExecutable: this.#o.nodeExecutable ?? process.execPath,
      ...(portMap ? { portMap } : {}),
    });
  }

  /** The pod's in-cluster identity: a TokenRequest token for its ServiceAccount. */
  async #serviceAccountKubeconfig(d: Deployment, podDir: string): Promise<string> {
    const ns = d.metadata.namespace;
    const sa = d.spec.template.spec.serviceAccountName ?? 'default';
    let token: string;
    try {
      token = await requestServiceAccountToken(this.#o.client, ns, sa);
    } catch (err) {
      if (err instanceof StatusError && err.code === 404) {
        throw new MissingReference(`ServiceAccount ${ns}/${sa} does not exist yet`);
      }
      throw err;
    }
    mkdirSync(podDir, { recursive: true });
    return writeKubeconfig(path.join(podDir, 'serviceaccount.kubeconfig'), {
      name: this.#o.clusterName,
      server: this.#o.server,
      caCert: this.#o.caCert,
      token,
      namespace: ns,
    });
  }

  async #reportStatus(d: Deployment, r: Running): Promise<void> {
    const ready = r.ready ? 1 : 0;
    const message = r.waitingFor
      ? `waiting: ${r.waitingFor}`
      : r.ready
        ? 'local process is ready'
        : r.process
          ? 'local process started, not ready yet'
          : `local process restarting (restart #${r.restarts})`;
    const fingerprint = `${d.metadata.generation}/${ready}/${message}`;
    if (r.reported === fingerprint && d.status?.observedGeneration === d.metadata.generation) return;
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const status = {
      observedGeneration: d.metadata.generation,
      replicas: 1,
      updatedReplicas: 1,
      readyReplicas: ready,
      availableReplicas: ready,
      unavailableReplicas: 1 - ready,
      conditions: [
        {
          type: 'Available',
          status: r.ready ? 'True' : 'False',
          reason: r.ready ? 'MinimumReplicasAvailable' : 'MinimumReplicasUnavailable',
          message,
          lastUpdateTime: now,
          lastTransitionTime: now,
        },
        {
          type: 'Progressing',
          status: 'True',
          reason: r.ready ? 'NewReplicaSetAvailable' : 'ReplicaSetUpdated',
          message,
          lastUpdateTime: now,
          lastTransitionTime: now,
        },
      ],
    };
    try {
      await this.#o.client.mergePatch(
        `/apis/apps/v1/namespaces/${d.metadata.namespace}/deployments/${d.metadata.name}/status`,
        { status },
      );
      r.reported = fingerprint;
    } catch (err) {
      if (!(err instanceof StatusError && err.code === 404)) throw err;
    }
  }
}

function key(d: Deployment): string {
  return `${d.metadata.namespace}/${d.metadata.name}`;
}

function decode(data: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
  );
}

function writeVolumes(podDir: string, spec: LocalProcessSpec): void {
  for (const [name, files] of spec.volumes) {
    const dir = path.join(podDir, 'volumes', name);
    mkdirSync(dir, { recursive: true });
    for (const [file, content] of files) {
      const full = path.join(dir, file);
      let current: string | undefined;
      try {
        current = readFileSync(full, 'utf8');
      } catch {
        current = undefined;
      }
      if (current === content) continue;
      mkdirSync(path.dirname(full), { recursive: true });
      // Write then rename, so a reader never sees half a certificate.
      const tmp = `${full}.tmp`;
      writeFileSync(tmp, content, { mode: 0o600 });
      renameSync(tmp, full);
    }
  }
}

/** Readiness like the kubelet's: HTTP(S) GET 200-399 or a TCP connect; no probe means ready once started. */
async function probeReady(container: Container, ports: Map<number, number>): Promise<boolean> {
  const probe = container.readinessProbe;
  if (!probe) return true;
  const hostPort = (port: number) => ports.get(port) ?? port;
  if (probe.tcpSocket) {
    const port = hostPort(probePort(container, probe.tcpSocket.port));
    return new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
  }
  if (probe.httpGet) {
    const port = hostPort(probePort(container, probe.httpGet.port));
    const secure = probe.httpGet.scheme === 'HTTPS';
    const url = `${secure ? 'https' : 'http'}://127.0.0.1:${port}${probe.httpGet.path ?? '/'}`;
    return new Promise((resolve) => {
      const req = (secure ? https : http).get(url, { rejectUnauthorized: false, timeout: 1000 }, (res) => {
        res.resume();
        resolve((res.statusCode ?? 500) < 400);
      });
      req.on('error', () => resolve(false));
      req.on('timeout', () => req.destroy());
    });
  }
  return true;
}

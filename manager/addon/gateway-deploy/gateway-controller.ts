/**
 * Deploys the gateway on the hub and keeps it in shape (--deploy-gateway):
 * its ServiceAccount and RBAC, the CA and serving certificate, Service,
 * PodDisruptionBudget and Deployment, and the APIService.
 *
 * - One key, one reconcile of everything, run on any event of any of the
 *   gateway's objects (informers.ts): someone editing or deleting one gets
 *   it back within the reconcile that follows, and on a timer for
 *   certificate renewal and a periodic resync.
 * - Writes only what differs from the cache (server-side apply, forced, own
 *   field manager). The desired spec's hash is an annotation, so a setting
 *   the manager drops (say, resources) is dropped on the object too.
 * - The APIService is registered only once the gateway Deployment has an
 *   available replica, with the CA as caBundle; until then an Event on the
 *   Deployment says why. An APIService of someone else's (a hand-made
 *   gateway) is taken over at that moment, not before. Once it is ours, any
 *   drift in it is repaired at once.
 * - Uninstall order comes from owner references: the APIService is owned by
 *   --owner-cluster-role, every other object by that ClusterRole and by the
 *   APIService. The garbage collector deletes an object only when all its
 *   owners are gone, so deleting the ClusterRole (helm uninstall) removes the
 *   APIService first and the gateway after it, while deleting the APIService
 *   alone leaves the gateway running (the manager registers it again). With
 *   the owner ClusterRole missing or being deleted, the controller writes
 *   nothing: it would otherwise race the uninstall.
 */
import { createHash, X509Certificate } from 'node:crypto';
import type { Logger } from 'pino';
import type { KubeClient, KubeObject } from '../../../shared/kube/client.ts';
import { objectKey } from '../../../shared/kube/informer.ts';
import { StatusError } from '../../../shared/kube/status.ts';
import { Controller, type ControllerDeps, watchAll } from '../core/controller.ts';
import type { OwnerReference } from '../core/resources.ts';
import type { ProcessResult } from '../core/work-queue.ts';
import { apiService } from './apiservice.ts';
import { type DeploymentStatusView, gatewayAvailability } from './availability.ts';
import type { EventRecorder } from './events.ts';
import { allInformers, type GatewayInformers, informerOfKind } from './informers.ts';
import { GatewayMetrics } from './metrics.ts';
import {
  apiServiceName,
  apiServicePath,
  type GatewayNames,
  gatewayFieldManager,
  gatewayNames,
  objectPath,
  verdictKeyFile,
} from './names.ts';
import { type GatewayDeployOptions, shortValiditySeconds } from './options.ts';
import { gatewayRbac } from './rbac.ts';
import { parseRotationSchedule, type RotationSchedule } from './rotation-schedule.ts';
import { decodeSecretData, encodeSecretData, servingCertificate } from './serving-certificate.ts';
import {
  apiServicePort,
  deployment,
  type GatewaySpec,
  labelsOf,
  podDisruptionBudget,
  service,
  serviceAccount,
  servingHosts,
} from './workload.ts';

export const specHashAnnotation = 'cluster-gateway.oam.dev/spec-hash';
const key = 'gateway';

export interface GatewayControllerDeps extends ControllerDeps {
  hub: Pick<KubeClient, 'apply' | 'delete'>;
  addonName: string;
  /** The manager's namespace: the gateway's too. */
  namespace: string;
  options: GatewayDeployOptions;
  informers: GatewayInformers;
  events?: Pick<EventRecorder, 'record'>;
  /** Full reconcile at least this often (default 5 min). */
  resyncMs?: number;
  /** How long to wait for the informer to see a Secret just written (default 5 s). */
  cacheWaitMs?: number;
  now?: () => number;
}

export class GatewayController {
  readonly #d: GatewayControllerDeps;
  readonly #log: Logger;
  readonly #names: GatewayNames;
  readonly #spec: GatewaySpec;
  readonly #now: () => number;
  readonly #gauges: GatewayMetrics | undefined;
  readonly #schedule: RotationSchedule | undefined;
  readonly controller: Controller;
  /** Last state logged, so a waiting controller says so once, not every reconcile. */
  #logged = '';

  constructor(deps: GatewayControllerDeps) {
    this.#d = deps;
    this.controller = new Controller(
      {
        name: 'gateway',
        // Any event of any of the gateway's objects: one reconcile of everything.
        watches: allInformers(deps.informers).map((informer) => watchAll(informer, () => key)),
        keys: () => key,
        sync: () => this.reconcile(),
      },
      deps,
    );
    this.#log = this.controller.log;
    this.#names = gatewayNames(deps.namespace, deps.options.name, deps.options.credentialNamespace);
    this.#spec = { names: this.#names, options: deps.options, addonName: deps.addonName };
    this.#now = deps.now ?? Date.now;
    this.#gauges = deps.metrics ? new GatewayMetrics(deps.metrics.registry) : undefined;
    this.#schedule = parseRotationSchedule(deps.options.rotationSchedule);
    const { caValiditySeconds, certificateValiditySeconds } = deps.options;
    if (Math.min(caValiditySeconds, certificateValiditySeconds) < shortValiditySeconds) {
      this.#log.warn(
        { caValiditySeconds, certificateValiditySeconds },
        'gateway certificates valid for less than an hour: meant for tests that force rotations, not for production',
      );
    }
  }

  get names(): GatewayNames {
    return this.#names;
  }

  async reconcile(): Promise<ProcessResult> {
    const { informers, options } = this.#d;
    const now = this.#now();
    const resyncMs = this.#d.resyncMs ?? 5 * 60_000;

    let owners: OwnerReference[] = [];
    if (options.ownerClusterRole) {
      const owner = informers.owner?.get(options.ownerClusterRole);
      if (!owner?.metadata?.uid || owner.metadata.deletionTimestamp) {
        this.#say(
          'warn',
          `owner ClusterRole ${options.ownerClusterRole} is missing or being deleted (uninstalling?): not touching the gateway`,
        );
        return { requeueAfterMs: resyncMs };
      }
      owners = [
        {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'ClusterRole',
          name: options.ownerClusterRole,
          uid: String(owner.metadata.uid),
        },
      ];
    }

    const certificate = await this.#certificate(now);
    const current = informers.apiServices.get(apiServiceName);
    const ours = current !== undefined && this.#pointsAtGateway(current);
    // The APIService as a second owner only with a first one: on its own it would take the gateway
    // with it whenever someone deleted the APIService.
    const gatewayOwners =
      owners.length > 0 && ours && current?.metadata?.uid
        ? [
            ...owners,
            {
              apiVersion: 'apiregistration.k8s.io/v1',
              kind: 'APIService',
              name: apiServiceName,
              uid: String(current.metadata.uid),
            },
          ]
        : owners;

    const wanted = withOwnersAndHash(
      apiService(this.#names, apiServicePort(this.#spec), certificate.caBundle),
      owners,
    );
    // Repaired before anything else: after a CA renewal the new CA reaches the aggregator before the
    // certificate it signed reaches the gateway (both are in the Secret written below).
    if (ours && differs(wanted, current)) {
      await this.#d.hub.apply(apiServicePath, wanted, gatewayFieldManager);
      this.#log.info({ apiService: apiServiceName, field: drift(wanted, current) }, 'APIService repaired');
      await this.#event('Normal', 'APIServiceRepaired', `APIService ${apiServiceName} was changed; restored`);
    }

    const desired = [
      serviceAccount(this.#spec),
      ...gatewayRbac(this.#names, labelsOf(this.#names)),
      certificate.secret,
      service(this.#spec),
      podDisruptionBudget(this.#spec),
      deployment(this.#spec),
    ].map((obj) => withOwnersAndHash(obj, gatewayOwners));
    for (const obj of desired) await this.#ensure(obj);
    await this.#prune(new Set(desired.map((o) => `${o.kind}/${objectKey(o)}`)));

    const availability = gatewayAvailability(
      informers.deployments.get(`${this.#names.namespace}/${this.#names.name}`) as
        | DeploymentStatusView
        | undefined,
      this.#names.name,
    );
    const recheck = { requeueAfterMs: Math.max(1000, Math.min(resyncMs, certificate.recheckAt - now)) };
    if (!ours) {
      if (!availability.available) {
        this.#gauges?.setRegistered(false);
        const why = current
          ? `the APIService ${apiServiceName} still points at another service; it is taken over once the gateway serves: ${availability.message}`
          : `the APIService ${apiServiceName} is not registered yet: ${availability.message}`;
        this.#say('info', why);
        await this.#event('Warning', 'APIServiceNotRegistered', why);
        return recheck;
      }
      await this.#d.hub.apply(apiServicePath, wanted, gatewayFieldManager);
      const message = `APIService ${apiServiceName} ${current ? 'taken over' : 'registered'}: ${availability.message}; caBundle holds ${certificate.caCount} CA certificate(s)`;
      this.#say('info', message);
      await this.#event('Normal', 'APIServiceRegistered', message);
    }
    this.#gauges?.setRegistered(true);
    return recheck;
  }

  /** The CA and serving certificate Secret to apply, and the CA bundle it implies. */
  async #certificate(now: number) {
    const { informers, options } = this.#d;
    const secret = informers.secrets.get(`${this.#names.namespace}/${this.#names.tlsSecret}`) as
      | (KubeObject & { data?: Record<string, string> })
      | undefined;
    const state = await servingCertificate(
      decodeSecretData(secret?.data),
      {
        hosts: servingHosts(this.#spec),
        subject: `${this.#names.name}.${this.#names.namespace}`,
        caValidForMs: options.caValiditySeconds * 1000,
        servingValidForMs: options.certificateValiditySeconds * 1000,
        ...(this.#schedule ? { schedule: this.#schedule } : {}),
      },
      now,
    );
    if (state.renewal !== 'none') {
      this.#log.info(
        {
          secret: `${this.#names.namespace}/${this.#names.tlsSecret}`,
          renewed: state.renewal,
          reason: state.reason,
          ...(this.#schedule ? { schedule: this.#schedule.expression } : {}),
        },
        state.renewal === 'ca'
          ? 'gateway CA and serving certificate issued'
          : 'gateway serving certificate issued',
      );
    }
    if (state.verdictKeyGenerated) {
      // Once per Secret: later renewals carry it over (serving-certificate.ts).
      this.#log.info(
        { secret: `${this.#names.namespace}/${this.#names.tlsSecret}`, entry: verdictKeyFile },
        'gateway probe verdict key generated',
      );
    }
    for (const [which, pem] of [
      ['serving', state.data['tls.crt']],
      ['ca', state.data['ca.crt']],
    ] as const) {
      if (pem) this.#gauges?.setExpiry(which, Date.parse(new X509Certificate(pem).validTo));
    }
    const tlsSecret: KubeObject = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: this.#names.tlsSecret,
        namespace: this.#names.namespace,
        labels: labelsOf(this.#names),
      },
      type: 'kubernetes.io/tls',
      data: encodeSecretData(state.data),
    };
    const caCount = (state.caBundle.match(/BEGIN CERTIFICATE/g) ?? []).length;
    return { secret: tlsSecret, caBundle: state.caBundle, caCount, recheckAt: state.recheckAt };
  }

  async #ensure(obj: KubeObject): Promise<void> {
    const informer = this.#d.informers[informerOfKind[obj.kind as keyof typeof informerOfKind]];
    const current = informer?.get(objectKey(obj));
    if (current && !differs(obj, current)) return;
    const written = await this.#d.hub.apply(objectPath(obj), obj, gatewayFieldManager);
    // The next reconcile must see the certificates just issued: one reading the Secret as it was before
    // would rotate again from the old data, and drop from the caBundle the CA the gateway is loading.
    if (obj.kind === 'Secret') {
      await this.#cached(informer, objectKey(obj), written?.metadata?.resourceVersion);
    }
    this.#log.info(
      { kind: obj.kind, name: objectKey(obj), ...(current ? { field: drift(obj, current) } : {}) },
      current ? 'gateway object repaired or updated' : 'gateway object created',
    );
  }

  /** Waits (a few seconds at most) until `informer` holds `key` at `resourceVersion`. */
  async #cached(
    informer: { get(key: string): KubeObject | undefined } | undefined,
    key: string,
    resourceVersion: string | undefined,
  ): Promise<void> {
    if (!informer || !resourceVersion) return;
    for (let waited = 0; waited < (this.#d.cacheWaitMs ?? 5000); waited += 20) {
      if (informer.get(key)?.metadata?.resourceVersion === resourceVersion) return;
      await new Promise((r) => setTimeout(r, 20));
    }
    this.#log.warn({ key, resourceVersion }, 'the Secret written is not in the cache yet; going on');
  }

  /** Objects with the gateway's labels that are no longer wanted (a renamed gateway, a moved credential namespace). */
  async #prune(wanted: Set<string>): Promise<void> {
    const { informers } = this.#d;
    for (const [kind, field] of Object.entries(informerOfKind)) {
      if (kind === 'APIService' || kind === 'Secret') continue; // watched by name: always the wanted one
      for (const obj of informers[field]?.list() ?? []) {
        if (wanted.has(`${kind}/${objectKey(obj)}`)) continue;
        try {
          await this.#d.hub.delete(objectPath({ ...obj, kind }));
        } catch (err) {
          // The manager may delete the gateway's objects by their current names only (the chart's RBAC and
          // admission policy): one under another name (a renamed gateway, or anyone's object carrying the
          // gateway's labels) is the admin's to remove, not a reason to stop reconciling.
          if (!(err instanceof StatusError && err.code === 403)) throw err;
          this.#log.warn(
            { kind, name: objectKey(obj), err: err.message },
            "an object with the gateway labels is not the gateway's to delete (forbidden): left alone",
          );
          continue;
        }
        this.#log.info({ kind, name: objectKey(obj) }, 'gateway object no longer wanted: deleted');
      }
    }
  }

  #pointsAtGateway(obj: KubeObject): boolean {
    const svc = (obj.spec as { service?: { namespace?: string; name?: string } } | undefined)?.service;
    return svc?.namespace === this.#names.namespace && svc?.name === this.#names.name;
  }

  #say(level: 'info' | 'warn', message: string): void {
    if (this.#logged === message) return;
    this.#logged = message;
    this.#log[level]({ apiService: apiServiceName }, message);
  }

  async #event(type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const current = this.#d.informers.deployments.get(`${this.#names.namespace}/${this.#names.name}`);
    await this.#d.events?.record(
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        name: this.#names.name,
        namespace: this.#names.namespace,
        ...(current?.metadata?.uid ? { uid: String(current.metadata.uid) } : {}),
      },
      { type, reason, message },
    );
  }
}

/** `obj` with its owners and the hash of what the manager wants it to be (owners excluded). */
export function withOwnersAndHash(obj: KubeObject, owners: OwnerReference[]): KubeObject {
  const hash = createHash('sha256').update(JSON.stringify(obj)).digest('hex').slice(0, 16);
  return {
    ...obj,
    metadata: {
      ...obj.metadata,
      annotations: { ...obj.metadata?.annotations, [specHashAnnotation]: hash },
      ...(owners.length > 0 ? { ownerReferences: owners } : {}),
    },
  };
}

/**
 * Does `current` lack anything of `desired`? Extra fields (server defaults, status) do not count, nor
 * apiVersion and kind, nor a `false` the server omits on output (APIService insecureSkipTLSVerify).
 */
export function differs(desired: KubeObject, current: KubeObject): boolean {
  return drift(desired, current) !== undefined;
}

/** Where `current` differs from `desired` (as `differs` counts it), or undefined. */
export function drift(desired: KubeObject, current: KubeObject): string | undefined {
  // The items of a list carry no apiVersion and kind (watch events do): an informer's cache has them or not
  // depending on how it learnt of the object, and the informer already implies both.
  const { apiVersion: _apiVersion, kind: _kind, ...compared } = desired;
  const spec = compared.spec as Record<string, unknown> | undefined;
  if (spec?.insecureSkipTLSVerify === false) {
    const currentSpec = current.spec as Record<string, unknown> | undefined;
    if (currentSpec?.insecureSkipTLSVerify === true) return 'spec.insecureSkipTLSVerify';
    const { insecureSkipTLSVerify: _omitted, ...rest } = spec;
    return firstDifference({ ...compared, spec: rest }, current);
  }
  return firstDifference(compared, current);
}

/** The path of the first field of `desired` that `current` lacks or has otherwise (for the log: what drifted). */
export function firstDifference(desired: unknown, current: unknown, at = ''): string | undefined {
  if (Array.isArray(desired)) {
    if (!Array.isArray(current) || current.length !== desired.length) return at || '.';
    for (const [i, item] of desired.entries()) {
      const found = firstDifference(item, current[i], `${at}[${i}]`);
      if (found) return found;
    }
    return undefined;
  }
  if (desired && typeof desired === 'object') {
    if (!current || typeof current !== 'object' || Array.isArray(current)) return at || '.';
    for (const [k, v] of Object.entries(desired)) {
      if (v === undefined) continue;
      const found = firstDifference(v, (current as Record<string, unknown>)[k], at ? `${at}.${k}` : k);
      if (found) return found;
    }
    return undefined;
  }
  return desired === current ? undefined : at || '.';
}

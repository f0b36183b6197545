/**
 * Where a health mark (PUT/PATCH clustergateways/{name}/health) is kept: the
 * original's annotations, `status.cluster.core.oam.dev/healthy` and
 * `.../healthy-reason`, on the cluster's credential Secret. The Secret
 * informer brings them back into the registry (secret-source.ts parses
 * them, clusters/health-precedence.ts ranks them), so every replica agrees and a
 * restart keeps the mark.
 *
 * A cluster without a credential Secret (an agent-tunnel cluster known to
 * OCM) keeps the same annotations on its ManagedCluster, the only hub
 * object that stands for it.
 *
 * The write is a JSON merge patch of those two annotations only, so it can
 * neither touch credentials nor create an object, and the gateway needs
 * `patch` on secrets in its credential namespace (a Role there, not a
 * ClusterRole) and on managedclusters. When the client sent a
 * resourceVersion the patch carries the resourceVersion of the object the
 * registry last saw, so the hub refuses it (409) if that changed since.
 *
 * record() resolves once the informer delivered the patched object, i.e.
 * once the registry shows the mark: a GET right after a PUT reads it back.
 *
 * recordProbe() keeps the gateway prober's verdict the same way, in the
 * `status.cluster.core.oam.dev/probed-healthy` and `.../probed-reason`
 * annotations of the same object, written only when the verdict changes and
 * by one replica at a time (the prober runs on the replica holding the
 * prober Lease, health/prober-leader.ts). Every replica then shows the same
 * health at the same resourceVersion, and a restarted replica starts from
 * the last verdict instead of "not probed yet".
 *
 * A ManagedCluster's annotations may be rewritten by the managed cluster's
 * own klusterlet (OCM grants it `update` on its ManagedCluster), so a
 * verdict recorded there is signed (clusters/verdict-signature.ts) with the
 * key every replica is given (`verdictKey`), and one the klusterlet changed
 * reads as not recorded and is written again. Without a key no verdict is
 * recorded on a ManagedCluster: recordProbe answers 'nowhere' and the
 * probing replica keeps it in memory, since an unsigned one would not be
 * believed by any replica.
 */
import type { KubeObject, RequestOptions } from '../../../shared/kube/client.ts';
import type { InformerHandlers } from '../../../shared/kube/informer.ts';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import { conflict, type HealthMark, type HealthMarkStore } from '../api/health-write.ts';
import { notFound } from '../api/read.ts';
import type { ClusterHealth } from '../clusters/cluster.ts';
import {
  annotationHealthy,
  annotationHealthyReason,
  annotationProbedHealthy,
  annotationProbedReason,
  annotationProbedSignature,
} from '../clusters/keys.ts';
import { managedClusterPath } from '../clusters/managedcluster-source.ts';
import { signVerdict, verdictSignatureValid } from '../clusters/verdict-signature.ts';

/** The informer cache of a source: what the registry was built from. */
export interface WatchedObjects {
  get(key: string): KubeObject | undefined;
  on(handlers: InformerHandlers<KubeObject>): () => void;
}

export interface HealthAnnotationStoreOptions {
  client: { request<T = unknown>(method: string, path: string, options?: RequestOptions): Promise<T> };
  secretNamespace: string;
  secrets: WatchedObjects;
  /** With OCM integration. */
  managedClusters?: WatchedObjects | undefined;
  /** How long to wait for the informer to deliver the write before answering anyway. */
  observeTimeoutMs?: number;
  log?: { warn(obj: object, msg: string): void };
  /**
   * The key prober verdicts on ManagedClusters are signed with, the same on every replica (the
   * ManagedClusterSource's verdictKey). Without it, no verdict is recorded on a ManagedCluster.
   */
  verdictKey?: Uint8Array | undefined;
}

export class HealthAnnotationStore implements HealthMarkStore {
  readonly #o: HealthAnnotationStoreOptions;
  /** The verdict last written per cluster, until the informer shows it (no second patch meanwhile). */
  readonly #probesInFlight = new Map<string, string>();

  constructor(options: HealthAnnotationStoreOptions) {
    this.#o = options;
  }

  async record(name: string, mark: HealthMark, options: { conditional: boolean }): Promise<void> {
    const where = this.#locate(name);
    const annotations = { [annotationHealthy]: String(mark.healthy), [annotationHealthyReason]: mark.reason };
    const cachedVersion = where.objects.get(where.key)?.metadata?.resourceVersion;
    const patch = {
      metadata: {
        annotations,
        ...(options.conditional && cachedVersion ? { resourceVersion: cachedVersion } : {}),
      },
    };
    // Versions delivered while the patch is in flight: the watch may beat the response.
    const seen = new Set<string>();
    let wake: (() => void) | undefined;
    const note = (obj: KubeObject) => {
      if (keyOf(obj) !== where.key) return;
      seen.add(obj.metadata?.resourceVersion ?? '');
      wake?.();
    };
    const stop = where.objects.on({ onAdd: note, onUpdate: (_old, obj) => note(obj) });
    try {
      let written: KubeObject;
      try {
        written = await this.#o.client.request<KubeObject>('PATCH', where.path, {
          body: patch,
          contentType: 'application/merge-patch+json',
        });
      } catch (err) {
        throw this.#translate(err, name, where.what);
      }
      const version = written?.metadata?.resourceVersion ?? '';
      const observed = () =>
        seen.has(version) || where.objects.get(where.key)?.metadata?.resourceVersion === version;
      if (observed()) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.#o.log?.warn(
            { cluster: name, object: where.what },
            'health mark written but not yet seen by the informer; answering with the current view',
          );
          resolve();
        }, this.#o.observeTimeoutMs ?? 10_000);
        wake = () => {
          if (!observed()) return;
          clearTimeout(timer);
          resolve();
        };
      });
    } finally {
      stop();
    }
  }

  /**
   * Records the prober's verdict on the cluster's Secret (else its ManagedCluster) when it differs
   * from what is recorded there. 'nowhere': the cluster has neither (only its tunnel), and the
   * caller keeps the verdict in memory. 'gone': the object was deleted since the informer saw it; its
   * deletion event is on its way and decides what the cluster is, so the verdict is dropped.
   */
  async recordProbe(
    name: string,
    health: ClusterHealth,
  ): Promise<'written' | 'unchanged' | 'nowhere' | 'gone'> {
    let where: ReturnType<HealthAnnotationStore['locate']>;
    try {
      where = this.locate(name);
    } catch {
      return 'nowhere';
    }
    const wanted = { healthy: String(health.healthy), reason: health.reason ?? '' };
    const key = `${wanted.healthy}\n${wanted.reason}`;
    const cached = where.objects.get(where.key)?.metadata;
    const annotations = cached?.annotations ?? {};
    const onManagedCluster = where.objects === this.#o.managedClusters && where.objects !== this.#o.secrets;
    const uid = typeof cached?.uid === 'string' ? cached.uid : '';
    let signature: string | undefined;
    if (onManagedCluster) {
      // Unsigned, it would be believed by no replica (and a klusterlet could write the same).
      if (!this.#o.verdictKey || !uid) return 'nowhere';
      signature = signVerdict(this.#o.verdictKey, { uid, name, ...wanted });
    }
    const recorded = `${annotations[annotationProbedHealthy] ?? ''}\n${annotations[annotationProbedReason] ?? ''}`;
    const recordedIntact =
      !onManagedCluster ||
      verdictSignatureValid(
        this.#o.verdictKey,
        {
          uid,
          name,
          healthy: annotations[annotationProbedHealthy] ?? '',
          reason: annotations[annotationProbedReason] ?? '',
        },
        annotations[annotationProbedSignature],
      );
    if ((recorded === key && recordedIntact) || this.#probesInFlight.get(name) === key) return 'unchanged';
    this.#probesInFlight.set(name, key);
    try {
      await this.#o.client.request('PATCH', where.path, {
        body: {
          metadata: {
            annotations: {
              [annotationProbedHealthy]: wanted.healthy,
              [annotationProbedReason]: wanted.reason || null,
              ...(signature ? { [annotationProbedSignature]: signature } : {}),
            },
          },
        },
        contentType: 'application/merge-patch+json',
      });
      return 'written';
    } catch (err) {
      if (err instanceof StatusError && err.code === 404) return 'gone';
      throw err;
    } finally {
      // The informer has it, or the write failed and the next probe tries again.
      if (this.#probesInFlight.get(name) === key) this.#probesInFlight.delete(name);
    }
  }

  /** Where the health annotations of cluster `name` live; a 409 StatusError when nowhere. */
  locate(name: string): { objects: WatchedObjects; key: string; path: string; what: string } {
    return this.#locate(name);
  }

  #locate(name: string): { objects: WatchedObjects; key: string; path: string; what: string } {
    const ns = this.#o.secretNamespace;
    const secretKey = `${ns}/${name}`;
    if (this.#o.secrets.get(secretKey)) {
      return {
        objects: this.#o.secrets,
        key: secretKey,
        path: `/api/v1/namespaces/${encodeURIComponent(ns)}/secrets/${encodeURIComponent(name)}`,
        what: `Secret ${secretKey}`,
      };
    }
    const managed = this.#o.managedClusters;
    if (managed?.get(name)) {
      return {
        objects: managed,
        key: name,
        path: `${managedClusterPath}/${encodeURIComponent(name)}`,
        what: `ManagedCluster ${name}`,
      };
    }
    throw new StatusError(
      failureStatus(
        409,
        `cannot record the health of cluster ${JSON.stringify(name)}: it has neither a credential Secret in namespace ${ns} nor a ManagedCluster to keep it on`,
        { name, kind: 'clustergateways' },
      ),
    );
  }

  /** The hub's answer about its Secret/ManagedCluster, as an answer about the ClusterGateway. */
  #translate(err: unknown, name: string, what: string): StatusError {
    if (err instanceof StatusError) {
      if (err.code === 409) return conflict(name);
      if (err.code === 404) return notFound(name);
      if (err.code === 422)
        return new StatusError(
          failureStatus(422, `the hub refused the health mark on ${what}: ${err.status.message}`),
        );
      if (err.code === 401 || err.code === 403) {
        this.#o.log?.warn(
          { cluster: name, object: what, code: err.code },
          'the gateway may not record health',
        );
        return new StatusError(
          failureStatus(
            500,
            `the gateway is not allowed to patch ${what} on the hub: grant its ServiceAccount patch on ${what.startsWith('Secret') ? `secrets in namespace ${this.#o.secretNamespace}` : 'managedclusters'}`,
          ),
        );
      }
      this.#o.log?.warn({ cluster: name, object: what, code: err.code }, 'recording health failed');
      return new StatusError(
        failureStatus(503, `the hub answered ${err.code} when recording the health mark on ${what}; retry`),
      );
    }
    this.#o.log?.warn(
      { cluster: name, object: what, err: (err as Error)?.message },
      'recording health failed',
    );
    return new StatusError(
      failureStatus(503, `the hub could not be reached to record the health mark on ${what}; retry`),
    );
  }
}

function keyOf(obj: KubeObject): string {
  const name = obj.metadata?.name ?? '';
  return obj.metadata?.namespace ? `${obj.metadata.namespace}/${name}` : name;
}

/**
 * Lease renewal on either side. coordination.k8s.io/v1 Lease times are
 * MicroTime: the API server refuses a JavaScript Date's three fractional
 * digits, so renewTime is written with six.
 *
 * Renewals use get + update (optimistic lock on resourceVersion), never
 * patch: on the hub the agent is granted exactly get and update on its
 * heartbeat Lease, and update keeps a concurrent writer from being
 * silently overwritten.
 */
import type { KubeClient } from '../shared/kube/client.ts';
import type { Lease, OwnerReference } from '../shared/kube/lease.ts';
import { StatusError } from '../shared/kube/status.ts';

export type { Lease, OwnerReference } from '../shared/kube/lease.ts';

/** RFC 3339 with microseconds, as metav1.MicroTime serializes: 2026-08-11T10:00:00.123456Z. */
export function microTime(epochMicros: number): string {
  const micros = Math.floor(epochMicros);
  const iso = new Date(Math.floor(micros / 1000)).toISOString(); // ...:SS.mmmZ
  return `${iso.slice(0, 19)}.${String(((micros % 1_000_000) + 1_000_000) % 1_000_000).padStart(6, '0')}Z`;
}

/** Now, to the microsecond (Date.now() has only milliseconds). */
export function nowMicros(): number {
  return Math.floor((performance.timeOrigin + performance.now()) * 1000);
}

export interface LeaseIdentity {
  namespace: string;
  name: string;
  holderIdentity: string;
  leaseDurationSeconds: number;
}

/** The renewed spec, keeping what other writers put there. */
export function renewed(lease: Lease, id: LeaseIdentity, renewTime: string): Lease {
  return {
    ...lease,
    spec: {
      ...lease.spec,
      holderIdentity: id.holderIdentity,
      leaseDurationSeconds: id.leaseDurationSeconds,
      ...(lease.spec?.holderIdentity === id.holderIdentity && lease.spec?.acquireTime
        ? {}
        : { acquireTime: renewTime }),
      renewTime,
    },
  };
}

export type RenewResult = 'renewed' | 'created';

export interface RenewOptions {
  /** Create the Lease when missing (spoke side); on the hub the manager creates it. */
  createIfMissing: boolean;
  ownerReference?: OwnerReference;
  /** The Lease as just read, to spare a GET on the first attempt. */
  current?: Lease;
  signal?: AbortSignal;
  now?: () => number;
}

/** Renews (or creates) a Lease; a write conflict is retried once on a fresh read. */
export async function renewLease(
  client: KubeClient,
  id: LeaseIdentity,
  o: RenewOptions,
): Promise<RenewResult> {
  const path = `/apis/coordination.k8s.io/v1/namespaces/${id.namespace}/leases/${id.name}`;
  const req = o.signal ? { signal: o.signal } : {};
  const now = o.now ?? nowMicros;
  for (let attempt = 0; ; attempt++) {
    let current: Lease | undefined = attempt === 0 ? o.current : undefined;
    if (!current) {
      try {
        current = await client.request<Lease>('GET', path, req);
      } catch (err) {
        if (!(err instanceof StatusError && err.code === 404) || !o.createIfMissing) throw err;
      }
    }
    try {
      if (!current) {
        const t = microTime(now());
        await client.request('POST', `/apis/coordination.k8s.io/v1/namespaces/${id.namespace}/leases`, {
          ...req,
          body: {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: {
              name: id.name,
              namespace: id.namespace,
              ...(o.ownerReference ? { ownerReferences: [o.ownerReference] } : {}),
            },
            spec: {
              holderIdentity: id.holderIdentity,
              leaseDurationSeconds: id.leaseDurationSeconds,
              acquireTime: t,
              renewTime: t,
            },
          } satisfies Lease,
        });
        return 'created';
      }
      await client.request('PUT', path, { ...req, body: renewed(current, id, microTime(now())) });
      return 'renewed';
    } catch (err) {
      // 409: someone wrote in between (or created it first); read again once.
      if (attempt === 0 && err instanceof StatusError && err.code === 409) continue;
      throw err;
    }
  }
}

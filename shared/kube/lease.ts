/**
 * A coordination.k8s.io/v1 Lease, typed by the fields the agent (its
 * heartbeats) and the addon manager (the hub heartbeat Lease it creates and
 * watches) use, and the owner reference such objects carry.
 */
import type { KubeObject } from './client.ts';

/** metav1.OwnerReference. */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface Lease extends KubeObject {
  metadata: {
    name: string;
    namespace: string;
    resourceVersion?: string;
    ownerReferences?: OwnerReference[];
    [key: string]: unknown;
  };
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    /** MicroTime (six fractional digits). */
    acquireTime?: string;
    /** MicroTime (six fractional digits). */
    renewTime?: string;
    [key: string]: unknown;
  };
}

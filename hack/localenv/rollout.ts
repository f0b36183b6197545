/**
 * A Deployment's rollout and its Service's endpoints, as the e2e files and benchmarks that install the
 * chart wait for them: one definition of "rolled out" instead of a copy per file.
 */
import type { KubeClient, KubeObject } from '../../shared/kube/client.ts';

export type Rollout = KubeObject & {
  metadata: { generation?: number };
  spec: { replicas: number };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    updatedReplicas?: number;
    readyReplicas?: number;
    availableReplicas?: number;
  };
};

/**
 * Whether the rollout is complete: the controller saw the latest spec, and every replica is of the latest
 * template, Ready and available, none of an older one left. `replicas`: the count it must have, when the
 * caller expects one (a `helm upgrade` that has not reached the Deployment yet still shows the old count).
 */
export function rolloutComplete(d: Rollout | undefined, replicas?: number): boolean {
  if (!d) return false;
  const want = replicas ?? d.spec.replicas;
  const st = d.status;
  return (
    d.spec.replicas === want &&
    (st?.observedGeneration ?? 0) >= (d.metadata.generation ?? 0) &&
    st?.replicas === want &&
    st.updatedReplicas === want &&
    st.readyReplicas === want &&
    st.availableReplicas === want
  );
}

/** The endpoints the EndpointSlices of Service `namespace/service` list: each first address, and whether it is ready. */
export async function serviceEndpoints(
  client: Pick<KubeClient, 'list'>,
  namespace: string,
  service: string,
): Promise<{ address: string; ready: boolean }[]> {
  type Slice = KubeObject & { endpoints?: { addresses: string[]; conditions?: { ready?: boolean } }[] };
  const slices = await client.list<Slice>(
    `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices?labelSelector=${encodeURIComponent(`kubernetes.io/service-name=${service}`)}`,
  );
  return slices.items
    .flatMap((s) => s.endpoints ?? [])
    .map((e) => ({ address: e.addresses[0] ?? '', ready: e.conditions?.ready !== false }));
}

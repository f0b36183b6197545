/**
 * One informer over many managed clusters: a ClusterInformer per cluster (each recovers on its own, so an
 * offline cluster or its agent's restart never holds up the others), one set of handlers, and every event
 * says which cluster it came from (the handler's second argument, and `cluster` in list()).
 *
 * Clusters can be added and removed while it runs (e.g. following the hub's ClusterGateways).
 */
import type { KubeConfig, KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import {
  type ClusterInformer,
  type ClusterInformerOptions,
  clusterInformer,
  type InformerEvent,
  type InformerHandlers,
} from './cluster-informer.ts';

/** An object of the fan-in cache with the cluster it lives on. */
export interface ClusterObject<T> {
  cluster: string;
  object: T;
}

/** The part of ClusterInformer the fan-in uses (tests pass fakes). */
export type MemberInformer<T> = Pick<
  ClusterInformer<T & KubernetesObject>,
  'cluster' | 'on' | 'off' | 'start' | 'stop' | 'list' | 'get' | 'hasSynced'
>;

export class FanInInformer<T extends KubernetesObject = KubernetesObject> {
  private readonly members = new Map<string, MemberInformer<T>>();
  private readonly handlers: { [K in InformerEvent]: InformerHandlers<T>[K][] } = {
    add: [],
    update: [],
    delete: [],
    connect: [],
    error: [],
  };
  // One forwarding handler per member and event, so that remove() can detach exactly those.
  private readonly forwarders = new Map<
    string,
    { event: InformerEvent; handler: (...args: unknown[]) => void }[]
  >();
  private started = false;

  constructor(informers: Iterable<MemberInformer<T>> = []) {
    for (const informer of informers) this.add(informer);
  }

  get clusters(): string[] {
    return [...this.members.keys()];
  }

  on<K extends InformerEvent>(event: K, handler: InformerHandlers<T>[K]): void {
    const list = this.handlers[event] as InformerHandlers<T>[K][] | undefined;
    if (!list) throw new Error(`unknown informer event: ${String(event)}`);
    list.push(handler);
  }

  off<K extends InformerEvent>(event: K, handler: InformerHandlers<T>[K]): void {
    const list = this.handlers[event] as InformerHandlers<T>[K][];
    const at = list.indexOf(handler);
    if (at >= 0) list.splice(at, 1);
  }

  /** Adds a cluster's informer; started at once if the fan-in runs. */
  add(informer: MemberInformer<T>): void {
    if (this.members.has(informer.cluster))
      throw new Error(`the fan-in already has cluster ${informer.cluster}`);
    this.members.set(informer.cluster, informer);
    const forwarders: { event: InformerEvent; handler: (...args: unknown[]) => void }[] = [];
    for (const event of Object.keys(this.handlers) as InformerEvent[]) {
      // The fan-in tags each event with the member's cluster itself, whatever the member passed.
      const cluster = informer.cluster;
      const handler = (...args: unknown[]) => {
        const tagged = event === 'connect' ? [cluster] : [args[0], cluster];
        for (const h of [...this.handlers[event]]) (h as (...a: unknown[]) => void)(...tagged);
      };
      informer.on(event, handler as never);
      forwarders.push({ event, handler });
    }
    this.forwarders.set(informer.cluster, forwarders);
    if (this.started) void informer.start();
  }

  /** Stops and removes a cluster's informer (no delete events: the objects still exist on the cluster). */
  async remove(cluster: string): Promise<void> {
    const informer = this.members.get(cluster);
    if (!informer) return;
    this.members.delete(cluster);
    for (const { event, handler } of this.forwarders.get(cluster) ?? [])
      informer.off(event, handler as never);
    this.forwarders.delete(cluster);
    await informer.stop();
  }

  /** Starts every member; resolves once each has synced (an offline cluster delays this: don't await it then). */
  async start(): Promise<void> {
    this.started = true;
    await Promise.all([...this.members.values()].map((m) => m.start()));
  }

  async stop(): Promise<void> {
    this.started = false;
    await Promise.all([...this.members.values()].map((m) => m.stop()));
  }

  /** The clusters whose informer has synced at least once. */
  get syncedClusters(): string[] {
    return [...this.members.values()].filter((m) => m.hasSynced).map((m) => m.cluster);
  }

  get(cluster: string, name: string, namespace?: string): T | undefined {
    return this.members.get(cluster)?.get(name, namespace);
  }

  list(namespace?: string): ClusterObject<T>[] {
    return [...this.members.values()].flatMap((m) =>
      m.list(namespace).map((object) => ({ cluster: m.cluster, object })),
    );
  }
}

/**
 * A fan-in informer over `clusters` through the hub's gateway: the same collection on each.
 *
 *   const pods = fanInInformer(hub, ['cluster1', 'cluster2'], '/api/v1/pods',
 *     (kc) => kc.makeApiClient(CoreV1Api).listPodForAllNamespaces());
 *   pods.on('add', (pod, cluster) => console.log(cluster, pod.metadata?.name));
 */
export function fanInInformer<T extends KubernetesObject = KubernetesObject>(
  hub: KubeConfig,
  clusters: Iterable<string>,
  path: string,
  list: (kubeConfig: KubeConfig) => Promise<KubernetesListObject<T>>,
  options: Omit<ClusterInformerOptions<T>, 'cluster' | 'kubeConfig' | 'path' | 'list'> = {},
): FanInInformer<T> {
  return new FanInInformer<T>([...clusters].map((c) => clusterInformer<T>(hub, c, path, list, options)));
}

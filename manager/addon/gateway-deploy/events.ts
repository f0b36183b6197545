/**
 * Says why, where a user looks: Kubernetes Events on the gateway Deployment
 * (`kubectl describe deployment cluster-gateway`, `kubectl get events`),
 * e.g. why the APIService is not registered yet. One Event per change of
 * state, not one per reconcile. Failing to record is logged, never fatal.
 */
import type { Logger } from 'pino';
import type { KubeClient } from '../../../shared/kube/client.ts';

export interface InvolvedObject {
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
  uid?: string;
}

export interface GatewayEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export class EventRecorder {
  readonly #hub: Pick<KubeClient, 'create'>;
  readonly #log: Pick<Logger, 'warn'>;
  readonly #component: string;
  /** Last reason and message recorded per object: the same state is not recorded twice in a row. */
  readonly #last = new Map<string, string>();

  constructor(hub: Pick<KubeClient, 'create'>, log: Pick<Logger, 'warn'>, component: string) {
    this.#hub = hub;
    this.#log = log;
    this.#component = component;
  }

  async record(involved: InvolvedObject, event: GatewayEvent, now = new Date()): Promise<void> {
    const key = `${involved.namespace}/${involved.kind}/${involved.name}`;
    const state = `${event.reason}\n${event.message}`;
    if (this.#last.get(key) === state) return;
    const timestamp = now.toISOString().replace(/\.\d+Z$/, 'Z');
    try {
      await this.#hub.create(`/api/v1/namespaces/${involved.namespace}/events`, {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { generateName: `${involved.name}.`, namespace: involved.namespace },
        involvedObject: involved,
        type: event.type,
        reason: event.reason,
        message: event.message,
        source: { component: this.#component },
        firstTimestamp: timestamp,
        lastTimestamp: timestamp,
        count: 1,
      });
      this.#last.set(key, state);
    } catch (err) {
      this.#log.warn({ err: (err as Error).message, reason: event.reason }, 'cannot record an Event');
    }
  }
}

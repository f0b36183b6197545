/**
 * Records every watch event of a collection from the moment it starts, with
 * the time it arrived: tests then assert on the order in which things
 * happened (what was deleted first, whether a condition ever went False),
 * not only on the end state. A watch the server ends is resumed from the
 * last resourceVersion, so nothing between is missed.
 */
import type { KubeClient, KubeObject } from '../../shared/kube/client.ts';

export interface Recorded<T extends KubeObject> {
  at: number;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: T;
}

export interface WatchRecorder<T extends KubeObject> {
  events: Recorded<T>[];
  /** Resolves once recording has started (every event from then on is recorded). */
  ready: Promise<void>;
  stop(): Promise<void>;
}

/** `path` is a collection, optionally with a query (e.g. `?fieldSelector=metadata.name=x`). */
export function recordWatch<T extends KubeObject>(client: KubeClient, path: string): WatchRecorder<T> {
  const events: Recorded<T>[] = [];
  const stop = new AbortController();
  let resourceVersion = '';
  let markReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  const sep = path.includes('?') ? '&' : '?';
  const done = (async () => {
    while (!stop.signal.aborted) {
      try {
        if (!resourceVersion) {
          // Start from now: what exists already is the starting point, not an event.
          resourceVersion = (await client.list<T>(path)).metadata.resourceVersion ?? '';
        }
        // The watch starts from the list's resourceVersion: nothing after the list can be missed.
        markReady();
        const stream = client.watch<T>(`${path}${sep}resourceVersion=${resourceVersion}`, stop.signal);
        for await (const ev of stream) {
          const rv = ev.object?.metadata?.resourceVersion;
          if (rv) resourceVersion = rv;
          if (ev.type === 'ADDED' || ev.type === 'MODIFIED' || ev.type === 'DELETED') {
            events.push({ at: Date.now(), type: ev.type, object: ev.object });
          }
        }
      } catch {
        if (stop.signal.aborted) break;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  })();
  return {
    events,
    ready,
    stop: async () => {
      stop.abort();
      await done;
    },
  };
}

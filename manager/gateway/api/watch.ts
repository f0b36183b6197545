/**
 * Watch for clustergateways (the Go original answered "watch not
 * supported"): JSON lines of `{"type":...,"object":...}` over a chunked
 * response, with the apiserver's semantics where they matter to clients:
 *
 * - resourceVersion "" or "0": the current state as ADDED events, then
 *   changes. A specific resourceVersion (from a list, on any replica: the
 *   versions are the hub's, clusters/registry.ts) resumes from the
 *   directory's event history; one older than the history gets a 410
 *   ERROR event, so reflectors relist; one this replica has not applied
 *   yet is waited for (api/versions.ts), then a 504 if it never comes.
 * - sendInitialEvents=true (client-go's watch-list, with
 *   resourceVersionMatch=NotOlderThan): the current state, at least as new
 *   as the resourceVersion given, then a BOOKMARK annotated
 *   k8s.io/initial-events-end.
 * - label and field selectors, with objects that stop (or start) matching
 *   turned into DELETED (or ADDED) events, as the watch cache does.
 * - timeoutSeconds, else 30 to 60 minutes like the apiserver's
 *   minRequestTimeout; periodic bookmarks when allowed.
 * - Accept as=Table (kubectl get -w): each object is a one-row Table, the
 *   first with column definitions, later ones without.
 */

import type { ClusterDirectory, ClusterEvent, ClusterTarget } from '../clusters/cluster.ts';
import { renderClusterGateway } from './clustergateway.ts';
import { type ListOptions, parseListOptions } from './list-options.ts';
import { groupVersion, kind } from './names.ts';
import { negotiateRepresentation, type Representation } from './negotiate.ts';
import { notSynced } from './read.ts';
import { errorResponse, type StreamResponse, writeResponse } from './response.ts';
import { type IncludeObject, parseIncludeObject, partialObjectMetadata, renderTable } from './table.ts';
import { awaitVersion, invalidVersion, isVersioned, parseVersion, tooOld } from './versions.ts';

export interface WatchRequest {
  query: URLSearchParams;
  accept?: string;
  signal?: AbortSignal;
  bookmarkIntervalMs?: number;
  /** A client this far behind (bytes buffered) is cut off; it will re-watch. */
  maxBufferedBytes?: number;
  random?: () => number;
  now?: () => number;
}

export const initialEventsEndAnnotation = 'k8s.io/initial-events-end';

type WireEvent = { type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR'; object: unknown };

/** Streams a watch until timeout, client disconnect or `signal`; resolves when it has ended. */
export async function serveWatch(
  directory: ClusterDirectory,
  res: StreamResponse,
  request: WatchRequest,
): Promise<void> {
  let options: ListOptions;
  let representation: Representation;
  let includeObject: IncludeObject = 'Metadata';
  try {
    representation = negotiateRepresentation(request.accept, 'object');
    options = parseListOptions(request.query, true);
    if (representation.as === 'Table') includeObject = parseIncludeObject(request.query.get('includeObject'));
    if (!directory.synced) throw notSynced();
    // A version another replica handed out and this one has not applied yet: wait for it.
    const rv = options.resourceVersion;
    if (rv !== '' && rv !== '0') {
      const version = parseVersion(rv);
      if (version === undefined) throw invalidVersion(rv);
      // Only then a pause: the common case stays in one tick from the request to subscribe().
      if (version > Number(directory.version)) await awaitVersion(directory, version);
    }
  } catch (err) {
    writeResponse(res, errorResponse(err));
    return;
  }

  const matches = (c: ClusterTarget) =>
    options.labelSelector.matches(c.labels) && options.fieldSelector.matches({ 'metadata.name': c.name });
  let first = true;
  const encode = (type: WireEvent['type'], cluster: ClusterTarget): WireEvent => {
    const object =
      representation.as === 'Table'
        ? renderTable([cluster], {
            version: representation.version,
            includeObject,
            resourceVersion: cluster.resourceVersion,
            noHeaders: !first,
            now: (request.now ?? Date.now)(),
          })
        : representation.as === 'PartialObjectMetadata'
          ? partialObjectMetadata(cluster, representation.version)
          : renderClusterGateway(cluster);
    first = false;
    return { type, object };
  };
  const bookmark = (annotations?: Record<string, string>): WireEvent => ({
    type: 'BOOKMARK',
    object: {
      kind: representation.as === 'PartialObjectMetadata' ? 'PartialObjectMetadata' : kind,
      apiVersion:
        representation.as === 'PartialObjectMetadata'
          ? `meta.k8s.io/${representation.version}`
          : groupVersion,
      metadata: { resourceVersion: directory.version, ...(annotations ? { annotations } : {}) },
    },
  });

  // Everything below up to subscribe() runs in one tick: no change can slip
  // between the snapshot and the subscription.
  const initial: WireEvent[] = [];
  const visible = new Set<string>();
  const rv = options.resourceVersion;
  const snapshot = () => {
    for (const cluster of directory.list()) {
      if (!matches(cluster)) continue;
      visible.add(cluster.name);
      initial.push(encode('ADDED', cluster));
    }
  };
  if (options.sendInitialEvents) {
    snapshot();
    if (options.allowWatchBookmarks) initial.push(bookmark({ [initialEventsEndAnnotation]: 'true' }));
  } else if (rv === '' || rv === '0') {
    snapshot();
  } else {
    const answer = isVersioned(directory)
      ? directory.eventsSince(rv)
      : rv === directory.version
        ? ({ kind: 'events', events: [] } as const)
        : ({ kind: 'expired' } as const);
    if (answer.kind !== 'events') {
      initial.push({ type: 'ERROR', object: tooOld(rv, directory.version).status });
    } else {
      for (const event of answer.events) {
        if (matches(event.cluster)) initial.push(encode(event.type, event.cluster));
      }
      for (const cluster of directory.list()) if (matches(cluster)) visible.add(cluster.name);
    }
  }

  res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache, private' });
  res.flushHeaders?.();

  let finish!: () => void;
  const finished = new Promise<void>((resolve) => {
    finish = resolve;
  });
  let ended = false;
  const maxBuffered = request.maxBufferedBytes ?? 16 * 1024 * 1024;
  const send = (event: WireEvent) => {
    if (ended) return;
    res.write(`${JSON.stringify(event)}\n`);
    if ((res.writableLength ?? 0) > maxBuffered) stop();
  };

  const onEvent = (event: ClusterEvent) => {
    if (event.internal) return; // a route or credential of this replica's, same resourceVersion
    const name = event.cluster.name;
    const wasVisible = visible.has(name);
    const nowMatches = event.type !== 'DELETED' && matches(event.cluster);
    if (event.type === 'DELETED') {
      if (!wasVisible) return;
      visible.delete(name);
      send(encode('DELETED', event.cluster));
    } else if (nowMatches) {
      visible.add(name);
      send(encode(wasVisible ? 'MODIFIED' : 'ADDED', event.cluster));
    } else if (wasVisible) {
      // It stopped matching: to this watcher, it is gone.
      visible.delete(name);
      send(encode('DELETED', event.cluster));
    }
  };

  const random = request.random ?? Math.random;
  const timeoutMs = (options.timeoutSeconds ?? Math.floor(1800 * (1 + random()))) * 1000;
  const timers: NodeJS.Timeout[] = [];
  let unsubscribe = () => {};
  const stop = () => {
    if (ended) return;
    ended = true;
    unsubscribe();
    for (const timer of timers) clearInterval(timer);
    res.off('close', stop);
    request.signal?.removeEventListener('abort', stop);
    res.end();
    finish();
  };

  for (const event of initial) send(event);
  if (initial.some((e) => e.type === 'ERROR')) stop();
  if (ended) return finished; // expired, or the client could not even take the initial state
  unsubscribe = directory.subscribe(onEvent);
  res.once('close', stop);
  request.signal?.addEventListener('abort', stop, { once: true });
  if (request.signal?.aborted) stop();
  timers.push(setTimeout(stop, timeoutMs));
  // Bookmarks carry only a resourceVersion; Table watches (kubectl) have no use for them.
  if (options.allowWatchBookmarks && representation.as !== 'Table') {
    timers.push(setInterval(() => send(bookmark()), request.bookmarkIntervalMs ?? 60_000));
  }
  for (const timer of timers) timer.unref();
  return finished;
}

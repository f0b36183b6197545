import assert from 'node:assert/strict';
import { test } from 'node:test';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { KubeClient, KubeList, KubeObject, WatchEvent } from './client.ts';
import {
  backoffDelay,
  defaultBackoff,
  Informer,
  type InformerClient,
  objectKey,
  watchErrorToStatusError,
  withQuery,
} from './informer.ts';
import { failureStatus, StatusError } from './status.ts';

// The real client must satisfy the informer's interface (checked by tsc).
export const realClientFits = (client: KubeClient): InformerClient => client;

type Step = KubeList | Error;
interface WatchScript {
  events: WatchEvent[];
  error?: Error;
}

/** Scripted KubeClient: lists and watches are consumed in order; an empty watch queue hangs until aborted. */
class FakeClient implements InformerClient {
  readonly listPaths: string[] = [];
  readonly watchPaths: string[] = [];
  readonly lists: Step[] = [];
  readonly watches: WatchScript[] = [];

  async list<T extends KubeObject = KubeObject>(path: string): Promise<KubeList<T>> {
    this.listPaths.push(path);
    const next = this.lists.shift() ?? { metadata: { resourceVersion: '1' }, items: [] };
    if (next instanceof Error) throw next;
    return next as KubeList<T>;
  }

  async *watch<T extends KubeObject = KubeObject>(
    path: string,
    signal?: AbortSignal,
  ): AsyncGenerator<WatchEvent<T>> {
    this.watchPaths.push(path);
    const script = this.watches.shift();
    if (!script) {
      // Like KubeClient: an aborted watch ends quietly.
      await new Promise<void>((resolve) => {
        if (signal?.aborted) resolve();
        signal?.addEventListener('abort', () => resolve(), { once: true });
      });
      return;
    }
    for (const event of script.events) yield event as WatchEvent<T>;
    if (script.error) throw script.error;
  }
}

const obj = (name: string, rv: string, namespace?: string): KubeObject => ({
  metadata: { name, resourceVersion: rv, ...(namespace ? { namespace } : {}) },
});

const statusError = (code: number) => new StatusError(failureStatus(code, `HTTP ${code}`));

async function until(predicate: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 2000;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

function recorder() {
  const log: string[] = [];
  return {
    log,
    handlers: {
      onAdd: (o: KubeObject) => log.push(`add ${objectKey(o)}@${o.metadata?.resourceVersion}`),
      onUpdate: (a: KubeObject, b: KubeObject) =>
        log.push(`update ${objectKey(b)}@${a.metadata?.resourceVersion}->${b.metadata?.resourceVersion}`),
      onDelete: (o: KubeObject) => log.push(`delete ${objectKey(o)}`),
    },
  };
}

function fastOptions(delays: number[] = []) {
  return {
    random: () => 0,
    sleep: async (ms: number) => {
      delays.push(ms);
    },
  };
}

test('lists, syncs, then applies watch events from the list resourceVersion', async () => {
  const client = new FakeClient();
  client.lists.push({
    metadata: { resourceVersion: '10' },
    items: [obj('a', '5', 'ns'), obj('b', '6', 'ns')],
  });
  client.watches.push({
    events: [
      { type: 'MODIFIED', object: obj('a', '11', 'ns') },
      { type: 'ADDED', object: obj('c', '12', 'ns') },
      { type: 'DELETED', object: obj('b', '13', 'ns') },
      { type: 'BOOKMARK', object: { metadata: { resourceVersion: '20' } } },
    ],
  });
  const informer = new Informer(client, {
    path: '/api/v1/namespaces/ns/secrets',
    labelSelector: 'x',
    ...fastOptions(),
  });
  const { log, handlers } = recorder();
  informer.on(handlers);
  informer.start();
  await informer.synced;
  await until(() => informer.resourceVersion === '20', 'bookmark');
  informer.stop();

  assert.deepEqual(log, ['add ns/a@5', 'add ns/b@6', 'update ns/a@5->11', 'add ns/c@12', 'delete ns/b']);
  assert.deepEqual(informer.list().map(objectKey).sort(), ['ns/a', 'ns/c']);
  assert.equal(client.listPaths[0], '/api/v1/namespaces/ns/secrets?labelSelector=x&limit=500');
  const firstWatch = new URL(client.watchPaths[0] ?? '', 'https://x');
  assert.equal(firstWatch.searchParams.get('resourceVersion'), '10');
  assert.equal(firstWatch.searchParams.get('labelSelector'), 'x');
  assert.equal(firstWatch.searchParams.get('timeoutSeconds'), '300');
  // The second watch resumes from the bookmark.
  await until(() => client.watchPaths.length >= 2, 'second watch');
  assert.equal(new URL(client.watchPaths[1] ?? '', 'https://x').searchParams.get('resourceVersion'), '20');
});

test('a deleted object is not kept alive by the list it came from, while the watch runs', async () => {
  // Measured with `bench:scale`: after deleting 5,000 ManagedClusters the gateway's heap still held every one of
  // them (49 MB used after a full collection, 15 MB with 2 clusters), through the first list's result kept in the
  // suspended list/watch loop's frame for as long as its watch ran.
  v8.setFlagsFromString('--expose-gc');
  const collect = vm.runInNewContext('gc') as () => void;
  const client = new FakeClient();
  const listed = (() => {
    const item = obj('a', '1', 'ns');
    client.lists.push({ metadata: { resourceVersion: '1' }, items: [item] });
    return new WeakRef(item);
  })();
  client.watches.push({ events: [{ type: 'DELETED', object: obj('a', '2', 'ns') }] });
  const informer = new Informer(client, { path: '/api/v1/namespaces/ns/configmaps', ...fastOptions() });
  informer.start();
  await informer.synced;
  // The second watch hangs until stop(): the loop is suspended in it, as a live informer is.
  await until(
    () => client.watchPaths.length >= 2 && informer.list().length === 0,
    'the deletion and the next watch',
  );
  await new Promise((resolve) => setImmediate(resolve));
  collect();
  const kept = listed.deref() !== undefined;
  informer.stop();
  assert.equal(kept, false, 'the listed object outlived its deletion');
});

test('an ERROR 410 event relists and the relist emits only differences', async () => {
  const client = new FakeClient();
  client.lists.push({
    metadata: { resourceVersion: '10' },
    items: [obj('a', '1'), obj('b', '1'), obj('c', '1')],
  });
  client.watches.push({
    events: [
      {
        type: 'ERROR',
        object: { ...failureStatus(410, 'too old resource version', undefined, 'Expired') } as KubeObject,
      },
    ],
  });
  client.lists.push({
    metadata: { resourceVersion: '30' },
    items: [obj('a', '1'), obj('b', '2'), obj('d', '1')],
  });
  const informer = new Informer(client, { path: '/apis/x/v1/things', ...fastOptions() });
  const { log, handlers } = recorder();
  informer.on(handlers);
  informer.start();
  await until(() => client.listPaths.length === 2 && informer.resourceVersion === '30', 'relist');
  informer.stop();
  assert.deepEqual(log.slice(3).sort(), ['add d@1', 'delete c', 'update b@1->2']);
});

test('a 404 list means absent: synced and empty, retried until the resource appears', async () => {
  const client = new FakeClient();
  client.lists.push(statusError(404), statusError(404));
  client.lists.push({ metadata: { resourceVersion: '7' }, items: [obj('hub', '3')] });
  const delays: number[] = [];
  const informer = new Informer(client, {
    path: '/apis/cluster.open-cluster-management.io/v1/managedclusters',
    absentRetryMs: 30_000,
    ...fastOptions(delays),
  });
  informer.start();
  await informer.synced;
  assert.equal(informer.hasSynced, true);
  await until(() => informer.list().length === 1, 'resource appears');
  assert.equal(informer.absent, false);
  assert.deepEqual(delays.slice(0, 2), [30_000, 30_000]);
  informer.stop();
});

test('a watch error backs off and resumes from the last resourceVersion without relisting', async () => {
  const client = new FakeClient();
  client.lists.push({ metadata: { resourceVersion: '10' }, items: [] });
  client.watches.push({ events: [{ type: 'ADDED', object: obj('a', '11') }], error: statusError(500) });
  client.watches.push({ events: [], error: new Error('ECONNRESET') });
  const delays: number[] = [];
  const errors: string[] = [];
  const informer = new Informer(client, {
    path: '/p',
    ...fastOptions(delays),
    onError: (err, phase) => errors.push(`${phase}: ${(err as Error).message}`),
  });
  informer.start();
  await until(() => client.watchPaths.length === 3, 'third watch');
  informer.stop();
  assert.equal(client.listPaths.length, 1);
  for (const path of client.watchPaths.slice(1)) {
    assert.equal(new URL(path, 'https://x').searchParams.get('resourceVersion'), '11');
  }
  assert.deepEqual(delays, [500, 1000]);
  assert.equal(errors.length, 2);
  assert.match(errors[0] ?? '', /^watch: /);
});

test('list errors back off and retry the list', async () => {
  const client = new FakeClient();
  client.lists.push(statusError(403), statusError(503));
  const delays: number[] = [];
  const informer = new Informer(client, { path: '/p', ...fastOptions(delays) });
  informer.start();
  await informer.synced;
  informer.stop();
  assert.equal(client.listPaths.length, 3);
  assert.deepEqual(delays, [500, 1000]);
});

test('reads every page and restarts once when a continue token expires', async () => {
  const client = new FakeClient();
  client.lists.push(
    { metadata: { continue: 'p2' }, items: [obj('a', '1')] },
    statusError(410),
    { metadata: { continue: 'p2' }, items: [obj('a', '1')] },
    { metadata: { resourceVersion: '9' }, items: [obj('b', '1')] },
  );
  const informer = new Informer(client, { path: '/p', pageSize: 1, ...fastOptions() });
  informer.start();
  await informer.synced;
  informer.stop();
  assert.deepEqual(informer.list().map(objectKey).sort(), ['a', 'b']);
  assert.equal(informer.resourceVersion, '9');
  assert.deepEqual(client.listPaths, [
    '/p?limit=1',
    '/p?limit=1&continue=p2',
    '/p?limit=1',
    '/p?limit=1&continue=p2',
  ]);
});

test('a watch that outlives its timeout is aborted by the watchdog and reopened', async () => {
  const client = new FakeClient(); // no scripted watches: every watch hangs
  const errors: string[] = [];
  const informer = new Informer(client, {
    path: '/p',
    watchTimeoutSeconds: 0,
    watchGraceSeconds: 0.02,
    ...fastOptions(),
    onError: (err) => errors.push((err as Error).message),
  });
  informer.start();
  await until(() => client.watchPaths.length >= 2, 'reopened watch');
  informer.stop();
  assert.match(errors[0] ?? '', /stalled/);
});

test('a throwing handler is reported and does not stop the others', async () => {
  const client = new FakeClient();
  client.lists.push({ metadata: { resourceVersion: '1' }, items: [obj('a', '1')] });
  const seen: string[] = [];
  const errors: string[] = [];
  const informer = new Informer(client, {
    path: '/p',
    ...fastOptions(),
    onError: (_err, phase) => errors.push(phase),
  });
  informer.on({
    onAdd: () => {
      throw new Error('boom');
    },
  });
  informer.on({ onAdd: (o) => seen.push(objectKey(o)) });
  informer.start();
  await informer.synced;
  informer.stop();
  assert.deepEqual(seen, ['a']);
  assert.deepEqual(errors, ['handler']);
});

test('stopping before the first sync rejects synced and ends the loop', async () => {
  const client = new FakeClient();
  client.lists.push(statusError(500));
  const informer = new Informer(client, {
    path: '/p',
    sleep: (_ms, signal) =>
      new Promise((resolve) => {
        signal.addEventListener('abort', () => resolve(), { once: true });
      }),
  });
  const done = informer.start();
  await until(() => client.listPaths.length === 1, 'first list');
  informer.stop();
  await assert.rejects(informer.synced, /stopped before it synced/);
  await done;
  assert.equal(informer.stopped, true);
});

test('backoffDelay grows exponentially, caps, and adds bounded jitter', () => {
  const policy = defaultBackoff;
  assert.equal(
    backoffDelay(0, policy, () => 0),
    500,
  );
  assert.equal(
    backoffDelay(1, policy, () => 0),
    1000,
  );
  assert.equal(
    backoffDelay(5, policy, () => 0),
    16_000,
  );
  assert.equal(
    backoffDelay(6, policy, () => 0),
    30_000,
  );
  assert.equal(
    backoffDelay(60, policy, () => 0),
    30_000,
  );
  assert.equal(
    backoffDelay(60, policy, () => 1),
    36_000,
  );
  assert.equal(
    backoffDelay(0, policy, () => 0.5),
    550,
  );
});

test('withQuery, objectKey and watch ERROR conversion', () => {
  assert.equal(withQuery('/p', { a: 'x y', b: undefined, c: '' }), '/p?a=x+y');
  assert.equal(withQuery('/p?w=1', { a: 1 }), '/p?w=1&a=1');
  assert.equal(withQuery('/p', {}), '/p');
  assert.equal(objectKey(obj('n', '1', 'ns')), 'ns/n');
  assert.equal(objectKey(obj('n', '1')), 'n');
  const err = watchErrorToStatusError({ kind: 'Status', code: 410, reason: 'Expired', message: 'too old' });
  assert.equal(err.code, 410);
  assert.equal(err.reason, 'Expired');
  assert.equal(watchErrorToStatusError(undefined).code, 500);
});

test('onSync reports each version applied, and handlers already read the version of their change', async () => {
  const client = new FakeClient();
  client.lists.push({ metadata: { resourceVersion: '10' }, items: [obj('a', '5', 'ns')] });
  client.watches.push({
    events: [
      { type: 'MODIFIED', object: obj('a', '11', 'ns') },
      { type: 'DELETED', object: obj('a', '12', 'ns') },
      { type: 'BOOKMARK', object: { metadata: { resourceVersion: '20' } } },
    ],
  });
  const informer = new Informer(client, { path: '/api/v1/namespaces/ns/secrets', ...fastOptions() });
  const seen: string[] = [];
  informer.on({
    onAdd: () => seen.push(`add at ${informer.resourceVersion}`),
    onUpdate: () => seen.push(`update at ${informer.resourceVersion}`),
    onDelete: () => seen.push(`delete at ${informer.resourceVersion}`),
    onSync: (rv) => seen.push(`sync ${rv}`),
  });
  informer.start();
  await until(() => informer.resourceVersion === '20', 'bookmark');
  informer.stop();
  assert.deepEqual(seen, [
    'add at 10',
    'sync 10',
    'update at 11',
    'sync 11',
    'delete at 12',
    'sync 12',
    'sync 20',
  ]);
  const watch = new URL(client.watchPaths[0] ?? '', 'https://x');
  assert.equal(watch.searchParams.get('allowWatchBookmarks'), 'true');
});

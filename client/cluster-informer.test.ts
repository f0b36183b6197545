/**
 * The informer's recovery logic against a scripted watch and list: resume from the last resourceVersion,
 * relist and diff on 410, back off on failures, keep going through throwing handlers, stop promptly.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { KubeConfig, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';
import { ClusterInformer, type WatchLike } from './cluster-informer.ts';

type Obj = KubernetesObject;
const obj = (name: string, rv: string, uid = `u-${name}`): Obj => ({
  metadata: { name, namespace: 'ns', resourceVersion: rv, uid },
});

interface WatchCall {
  query: Record<string, unknown>;
  event(type: string, object: unknown): void;
  done(err?: unknown): void;
  aborted: boolean;
}

/** A watch whose every call the test answers: `respond` decides whether it connects (200) or fails. */
class ScriptedWatch implements WatchLike {
  calls: WatchCall[] = [];
  private waiters: ((c: WatchCall) => void)[] = [];
  respond: (call: WatchCall) => unknown = () => undefined;
  async watch(
    _path: string,
    query: Record<string, unknown>,
    callback: (phase: string, obj: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    const controller = new AbortController();
    let ended = false;
    const call: WatchCall = {
      query: { ...query },
      event: (type, object) => !ended && callback(type, object),
      done: (err) => {
        if (ended) return;
        ended = true;
        done(err ?? null);
      },
      get aborted() {
        return controller.signal.aborted;
      },
    };
    controller.signal.addEventListener('abort', () => {
      ended = true;
    });
    this.calls.push(call);
    const failure = this.respond(call);
    if (failure) call.done(failure);
    this.waiters.shift()?.(call);
    return controller;
  }
  /** The next call (already made, or the one to come). */
  async next(index: number): Promise<WatchCall> {
    const deadline = Date.now() + 2000;
    while (Date.now() < deadline) {
      if (this.calls[index]) return this.calls[index]!;
      await new Promise((r) => setTimeout(r, 2));
    }
    throw new Error(`no watch call #${index} (made ${this.calls.length})`);
  }
}

function setup(lists: (() => KubernetesListObject<Obj> | Error)[]) {
  const watch = new ScriptedWatch();
  let listed = 0;
  const log: string[] = [];
  const informer = new ClusterInformer<Obj>({
    cluster: 'edge.1',
    kubeConfig: new KubeConfig(),
    path: '/api/v1/namespaces/ns/configmaps',
    list: async () => {
      const next = lists[Math.min(listed++, lists.length - 1)]!();
      if (next instanceof Error) throw next;
      return next;
    },
    watch,
    backoff: { initialMs: 2, maxMs: 8 },
  });
  for (const e of ['add', 'update', 'delete'] as const)
    informer.on(e, (o, c) => log.push(`${c} ${e} ${o.metadata?.name}@${o.metadata?.resourceVersion}`));
  informer.on('connect', (c) => log.push(`${c} connect`));
  informer.on('error', (err, c) => log.push(`${c} error ${(err as Error).message}`));
  return { watch, informer, log, listCount: () => listed };
}
const list = (rv: string, ...items: Obj[]): KubernetesListObject<Obj> => ({
  metadata: { resourceVersion: rv },
  items,
});
const until = async (what: string, check: () => boolean) => {
  const deadline = Date.now() + 2000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
};

test('lists, watches from the list resourceVersion, applies events; every event names its cluster', async () => {
  const { watch, informer, log } = setup([() => list('10', obj('a', '5'))]);
  await informer.start();
  const w = await watch.next(0);
  assert.equal(w.query.resourceVersion, '10');
  assert.equal(w.query.allowWatchBookmarks, true);
  w.event('ADDED', obj('b', '11'));
  w.event('MODIFIED', obj('a', '12'));
  w.event('BOOKMARK', { metadata: { resourceVersion: '13' } });
  w.event('DELETED', obj('b', '14'));
  assert.deepEqual(log, [
    'edge.1 add a@5',
    'edge.1 connect',
    'edge.1 add b@11',
    'edge.1 update a@12',
    'edge.1 delete b@14',
  ]);
  assert.equal(informer.resourceVersion, '14');
  assert.deepEqual(
    informer.list().map((o) => o.metadata?.name),
    ['a'],
  );
  assert.equal(informer.get('a', 'ns')?.metadata?.resourceVersion, '12');
  await informer.stop();
  assert.equal(w.aborted, true, 'stop() closes the watch');
});

test('a broken watch (gateway restart) resumes from the last resourceVersion, no relist, nothing replayed twice', async () => {
  const { watch, informer, log, listCount } = setup([() => list('10')]);
  await informer.start();
  const first = await watch.next(0);
  first.event('ADDED', obj('a', '11'));
  first.done(Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }));
  // The replacement is refused twice (the APIService has no endpoint yet), then connects.
  let refusals = 2;
  watch.respond = () =>
    refusals-- > 0 ? Object.assign(new Error('Service Unavailable'), { statusCode: 503 }) : undefined;
  const resumed = await watch.next(3);
  assert.deepEqual(
    watch.calls.slice(1).map((c) => c.query.resourceVersion),
    ['11', '11', '11'],
    'every retry resumes from the last event seen',
  );
  resumed.event('MODIFIED', obj('a', '12'));
  assert.equal(listCount(), 1, 'never relisted');
  assert.deepEqual(
    log.filter((l) => !l.includes('connect')),
    [
      'edge.1 add a@11',
      'edge.1 error other side closed',
      'edge.1 error Service Unavailable',
      'edge.1 error Service Unavailable',
      'edge.1 update a@12',
    ],
  );
  await informer.stop();
});

test('410 Gone (an ERROR event, or the HTTP status) relists and emits the differences against the cache', async () => {
  const { watch, informer, log } = setup([
    () => list('10', obj('keep', '1'), obj('change', '2'), obj('vanish', '3'), obj('recreated', '4', 'old')),
    () => list('50', obj('keep', '1'), obj('change', '40'), obj('new', '41'), obj('recreated', '42', 'new')),
    () => list('60', obj('keep', '1')),
  ]);
  await informer.start();
  log.length = 0;
  (await watch.next(0)).event('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old' });
  const afterRelist = await watch.next(1);
  assert.equal(afterRelist.query.resourceVersion, '50');
  assert.deepEqual(log.sort(), [
    'edge.1 add new@41',
    'edge.1 add recreated@42',
    'edge.1 connect',
    'edge.1 delete recreated@4',
    'edge.1 delete vanish@3',
    'edge.1 update change@40',
  ]);
  log.length = 0;
  afterRelist.done(Object.assign(new Error('Gone'), { statusCode: 410 }));
  assert.equal((await watch.next(2)).query.resourceVersion, '60');
  assert.deepEqual(log.sort(), [
    'edge.1 connect',
    'edge.1 delete change@40',
    'edge.1 delete new@41',
    'edge.1 delete recreated@42',
  ]);
  assert.equal(informer.relists, 2);
  await informer.stop();
});

test('a failing list (offline cluster) is retried with backoff until it answers; start() waits for it', async () => {
  let calls = 0;
  const { informer, log } = setup([
    () =>
      ++calls < 3 ? Object.assign(new Error('cluster offline'), { code: 503 }) : list('7', obj('a', '7')),
  ]);
  await informer.start();
  assert.equal(calls, 3);
  assert.equal(informer.hasSynced, true);
  assert.deepEqual(log, [
    'edge.1 error cluster offline',
    'edge.1 error cluster offline',
    'edge.1 add a@7',
    'edge.1 connect',
  ]);
  await informer.stop();
});

test('a watch closed at once without events is retried with backoff; a long healthy one resumes at once', async () => {
  const { watch, informer } = setup([() => list('10')]);
  let now = 0;
  (informer as unknown as { now: () => number }).now = () => now;
  await informer.start();
  (await watch.next(0)).done();
  await watch.next(1);
  // (backoff slept: the attempt counter moved)
  assert.equal((informer as unknown as { attempts: number }).attempts, 1);
  now = 5000;
  (await watch.next(1)).done();
  await watch.next(2);
  assert.equal(
    (informer as unknown as { attempts: number }).attempts,
    0,
    'a healthy watch resets the backoff',
  );
  await informer.stop();
});

test('a throwing handler is reported and the informer keeps delivering', async () => {
  const { watch, informer, log } = setup([() => list('1')]);
  informer.on('add', (o) => {
    if (o.metadata?.name === 'bad') throw new Error('handler bug');
  });
  await informer.start();
  const w = await watch.next(0);
  w.event('ADDED', obj('bad', '2'));
  w.event('ADDED', obj('good', '3'));
  await until('both adds', () => log.includes('edge.1 add good@3'));
  assert.ok(log.includes('edge.1 error handler bug'));
  await informer.stop();
});

test('stop() during a backoff ends the loop promptly', async () => {
  const { informer } = setup([() => new Error('down')]);
  (informer as unknown as { policy: object }).policy = { initialMs: 60_000, maxMs: 60_000, factor: 2 };
  const started = informer.start();
  await new Promise((r) => setTimeout(r, 20));
  const t = Date.now();
  await informer.stop();
  await started;
  assert.ok(Date.now() - t < 500, `stopped in ${Date.now() - t} ms`);
});

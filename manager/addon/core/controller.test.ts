import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import type { KubeObject } from '../../../shared/kube/client.ts';
import type { InformerHandlers } from '../../../shared/kube/informer.ts';
import { Controller, watchAll } from './controller.ts';
import { AddonMetrics } from './metrics.ts';

const log = pino({ level: 'silent' });

/** An informer that fires events on demand and syncs when told. */
function fakeInformer() {
  const handlers = new Set<InformerHandlers<KubeObject>>();
  let markSynced = () => {};
  const synced = new Promise<void>((resolve) => {
    markSynced = resolve;
  });
  return {
    synced,
    markSynced: () => markSynced(),
    on(h: InformerHandlers<KubeObject>) {
      handlers.add(h);
      return () => handlers.delete(h);
    },
    handlers,
    add: (obj: KubeObject) => {
      for (const h of handlers) h.onAdd?.(obj);
    },
    update: (old: KubeObject, obj: KubeObject) => {
      for (const h of handlers) h.onUpdate?.(old, obj);
    },
    delete: (obj: KubeObject) => {
      for (const h of handlers) h.onDelete?.(obj);
    },
  };
}

const obj = (name: string, generation = 1): KubeObject => ({ metadata: { name, generation } });
const settle = () => new Promise((resolve) => setTimeout(resolve, 10));

test('events map to keys; nothing syncs before every required cache is complete, an optional one never blocks', async () => {
  const required = fakeInformer();
  const optional = fakeInformer();
  const synced: string[] = [];
  const controller = new Controller(
    {
      name: 'test',
      watches: [
        {
          informer: required,
          add: (o) => `a/${o.metadata?.name}`,
          update: (o, old) =>
            o.metadata?.generation !== old.metadata?.generation ? `u/${o.metadata?.name}` : undefined,
        },
        watchAll(optional, (o) => [`x/${o.metadata?.name}`, 'both'], { optional: true }),
      ],
      keys: () => ['initial'],
      sync: async (key) => {
        synced.push(key);
      },
    },
    { log },
  );
  const stop = new AbortController();
  controller.start(stop.signal);
  required.add(obj('one'));
  required.update(obj('one'), obj('one')); // same generation: no key
  required.delete(obj('one')); // no delete handler: ignored
  optional.delete(obj('two'));
  await settle();
  assert.deepEqual(synced, [], 'waits for the required cache');
  required.markSynced();
  await settle();
  assert.deepEqual(synced.sort(), ['a/one', 'both', 'initial', 'x/two']);
  required.update(obj('one', 1), obj('one', 2));
  await controller.queue.idle();
  assert.equal(synced.at(-1), 'u/one');
  stop.abort();
  assert.equal(required.handlers.size, 0, 'handlers off on abort');
  assert.equal(optional.handlers.size, 0);
});

test('resync enqueues every key again; failures count in the metrics under the controller name', async () => {
  const metrics = new AddonMetrics({ processMetrics: false });
  let runs = 0;
  let after = 0;
  const controller = new Controller(
    {
      name: 'resyncing',
      keys: () => 'only',
      resyncMs: 20,
      sync: async () => {
        runs++;
        if (runs === 1) throw new Error('first run fails');
      },
      afterSync: () => after++,
    },
    { log, metrics },
  );
  const stop = new AbortController();
  controller.start(stop.signal);
  await new Promise((resolve) => setTimeout(resolve, 90));
  stop.abort();
  assert.ok(runs >= 3, `ran ${runs} times`);
  assert.equal(after, runs);
  const { body } = await metrics.text();
  assert.match(body, /cluster_gateway_addon_reconciles_total\{controller="resyncing",result="error"\} 1/);
  assert.match(body, /cluster_gateway_addon_reconciles_total\{controller="resyncing",result="success"\} \d+/);
});

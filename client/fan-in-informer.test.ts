import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { InformerEvent } from './cluster-informer.ts';
import { FanInInformer, type MemberInformer } from './fan-in-informer.ts';

type Obj = KubernetesObject;

/** A member informer the test drives; it passes a wrong cluster name on purpose: the fan-in must tag. */
function member(cluster: string, objects: Obj[] = []) {
  const handlers = new Map<InformerEvent, ((...a: unknown[]) => void)[]>();
  let started = 0;
  let stopped = 0;
  const m = {
    cluster,
    hasSynced: false,
    on: (e: InformerEvent, h: (...a: unknown[]) => void) => handlers.set(e, [...(handlers.get(e) ?? []), h]),
    off: (e: InformerEvent, h: (...a: unknown[]) => void) =>
      handlers.set(
        e,
        (handlers.get(e) ?? []).filter((x) => x !== h),
      ),
    start: async () => {
      started++;
      m.hasSynced = true;
    },
    stop: async () => {
      stopped++;
    },
    list: () => objects,
    get: (name: string) => objects.find((o) => o.metadata?.name === name),
    fire: (e: InformerEvent, ...args: unknown[]) => {
      for (const h of handlers.get(e) ?? []) h(...args);
    },
    counts: () => ({ started, stopped, handlers: [...handlers.values()].flat().length }),
  };
  return m;
}
const cm = (name: string): Obj => ({ metadata: { name, namespace: 'ns' } });

test('events from every cluster reach one set of handlers, each tagged with its cluster', async () => {
  const one = member('cluster1');
  const two = member('edge.two');
  const fan = new FanInInformer<Obj>([
    one as unknown as MemberInformer<Obj>,
    two as unknown as MemberInformer<Obj>,
  ]);
  const seen: string[] = [];
  for (const e of ['add', 'update', 'delete'] as const)
    fan.on(e, (o, c) => seen.push(`${e} ${c} ${o.metadata?.name}`));
  fan.on('connect', (c) => seen.push(`connect ${c}`));
  fan.on('error', (err, c) => seen.push(`error ${c} ${(err as Error).message}`));
  await fan.start();
  one.fire('connect', 'wrong');
  one.fire('add', cm('a'), 'wrong');
  two.fire('update', cm('b'), 'wrong');
  two.fire('delete', cm('c'));
  two.fire('error', new Error('offline'), 'wrong');
  assert.deepEqual(seen, [
    'connect cluster1',
    'add cluster1 a',
    'update edge.two b',
    'delete edge.two c',
    'error edge.two offline',
  ]);
  assert.deepEqual(fan.syncedClusters, ['cluster1', 'edge.two']);
});

test('list() tags objects with their cluster; get() reads one cluster', () => {
  const fan = new FanInInformer<Obj>([
    member('c1', [cm('a')]) as unknown as MemberInformer<Obj>,
    member('c2', [cm('a'), cm('b')]) as unknown as MemberInformer<Obj>,
  ]);
  assert.deepEqual(
    fan.list().map((x) => `${x.cluster}/${x.object.metadata?.name}`),
    ['c1/a', 'c2/a', 'c2/b'],
  );
  assert.equal(fan.get('c2', 'b')?.metadata?.name, 'b');
  assert.equal(fan.get('c1', 'b'), undefined);
});

test('clusters added while running start at once; removed ones stop and detach; duplicates refused', async () => {
  const fan = new FanInInformer<Obj>();
  const seen: string[] = [];
  fan.on('add', (o, c) => seen.push(`${c} ${o.metadata?.name}`));
  await fan.start();
  const late = member('late');
  fan.add(late as unknown as MemberInformer<Obj>);
  assert.equal(late.counts().started, 1);
  assert.throws(() => fan.add(member('late') as unknown as MemberInformer<Obj>), /already has cluster late/);
  late.fire('add', cm('x'));
  await fan.remove('late');
  assert.deepEqual(late.counts(), { started: 1, stopped: 1, handlers: 0 });
  late.fire('add', cm('y'));
  assert.deepEqual(seen, ['late x']);
  assert.deepEqual(fan.clusters, []);
});

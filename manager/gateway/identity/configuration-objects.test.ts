import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeList, KubeObject, WatchEvent } from '../../../shared/kube/client.ts';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import { type ConfigurationObject, ConfigurationObjects } from './configuration-objects.ts';
import { ProxyConfigurationStore } from './configuration-store.ts';
import type { ConfigurationStatus } from './object-status.ts';

/** A hub with a list, a watch fed by push(), and a record of status patches. */
class FakeHub {
  items: ConfigurationObject[] = [];
  readonly patches: Array<{ path: string; body: { status: Record<string, unknown> } }> = [];
  failPatches = 0;
  readonly #queue: WatchEvent[] = [];
  #wake: (() => void) | undefined;

  async list<T extends KubeObject>(): Promise<KubeList<T>> {
    return { metadata: { resourceVersion: '1' }, items: this.items as unknown as T[] };
  }

  async *watch<T extends KubeObject>(_path: string, signal?: AbortSignal): AsyncGenerator<WatchEvent<T>> {
    while (!signal?.aborted) {
      const event = this.#queue.shift();
      if (event) {
        yield event as WatchEvent<T>;
        continue;
      }
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        signal?.addEventListener('abort', () => resolve(), { once: true });
      });
    }
  }

  push(event: WatchEvent): void {
    this.#queue.push(event);
    this.#wake?.();
  }

  async mergePatch<T extends KubeObject>(path: string, body: unknown): Promise<T> {
    if (this.failPatches > 0) {
      this.failPatches--;
      throw new StatusError(failureStatus(403, 'cannot patch'));
    }
    this.patches.push({ path, body: body as { status: Record<string, unknown> } });
    return {} as T;
  }
}

function object(
  name: string,
  generation: number,
  rules: unknown[],
  uid = 'uid-1',
  status?: ConfigurationStatus,
): ConfigurationObject {
  return {
    apiVersion: 'gateway.cluster.core.oam.dev/v1alpha1',
    kind: 'ClusterGatewayProxyConfiguration',
    metadata: { name, uid, generation, resourceVersion: String(generation * 10) },
    spec: { clientIdentityExchanger: { rules } },
    ...(status ? { status } : {}),
  };
}

const good = (user: string) => ({
  name: 'map',
  type: 'StaticMappingIdentityExchanger',
  source: { user },
  target: { user: 'mapped' },
});
const bad = {
  name: 'map',
  type: 'StaticMappingIdentityExchanger',
  source: { userPattern: 'ext-(' },
  target: { user: 'm' },
};

async function until(predicate: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 3000;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function setup() {
  const hub = new FakeHub();
  const store = new ProxyConfigurationStore({ globalObjectName: 'cluster-gateway', watchesObjects: true });
  const logs: string[] = [];
  const log = {
    info: (_f: object, m: string) => logs.push(`info ${m}`),
    warn: (_f: object, m: string) => logs.push(`warn ${m}`),
    error: (_f: object, m: string) => logs.push(`error ${m}`),
  };
  const objects = new ConfigurationObjects({
    client: hub,
    store,
    log,
    now: () => new Date('2026-01-01T00:00:00Z'),
    retryMs: 10,
  });
  return { hub, store, objects, logs };
}

const globalUser = (store: ProxyConfigurationStore) =>
  store.resolve({ name: 'c1', annotations: {} }).global?.rules[0]?.source.user;

test('objects listed at start are in force once synced, and their status says so', async () => {
  const { hub, store, objects } = setup();
  hub.items = [object('cluster-gateway', 1, [good('alice')])];
  void objects.start();
  try {
    await until(() => store.synced, 'sync');
    assert.equal(globalUser(store), 'alice');
    await until(() => hub.patches.length === 1, 'status write');
    const patch = hub.patches[0]!;
    assert.equal(
      patch.path,
      '/apis/gateway.cluster.core.oam.dev/v1alpha1/clustergatewayproxyconfigurations/cluster-gateway/status',
    );
    assert.equal(patch.body.status.appliedGeneration, 1);
    assert.match(JSON.stringify(patch.body.status.conditions), /"status":"True"/);
  } finally {
    objects.stop();
  }
});

test('an invalid generation is reported and not applied; the previous stays; a fix takes over', async () => {
  const { hub, store, objects, logs } = setup();
  hub.items = [object('cluster-gateway', 1, [good('alice')])];
  void objects.start();
  try {
    await until(() => hub.patches.length === 1, 'first status');
    hub.push({ type: 'MODIFIED', object: object('cluster-gateway', 2, [bad]) });
    await until(() => hub.patches.length === 2, 'invalid status');
    assert.equal(globalUser(store), 'alice');
    const status = hub.patches[1]!.body.status as {
      appliedGeneration: number;
      conditions: Array<{ message: string; status: string }>;
    };
    assert.equal(status.appliedGeneration, 1);
    assert.equal(status.conditions[0]!.status, 'False');
    assert.match(
      status.conditions[0]!.message,
      /spec\.clientIdentityExchanger\.rules\[0\]\.source\.userPattern/,
    );
    assert.match(status.conditions[0]!.message, /generation 1 stays in force/);
    assert.ok(
      logs.some((l) => /error invalid proxy configuration; its previous generation stays in force/.test(l)),
    );

    // Our own status write comes back as MODIFIED with the same generation: nothing is re-evaluated or re-written.
    hub.push({
      type: 'MODIFIED',
      object: object(
        'cluster-gateway',
        2,
        [bad],
        'uid-1',
        hub.patches[1]!.body.status as ConfigurationStatus,
      ),
    });
    hub.push({ type: 'MODIFIED', object: object('cluster-gateway', 3, [good('bob')]) });
    await until(() => hub.patches.length === 3, 'fixed status');
    assert.equal(globalUser(store), 'bob');
    assert.equal(hub.patches[2]!.body.status.appliedGeneration, 3);
  } finally {
    objects.stop();
  }
});

test("a re-created object starts over: the old uid's valid generation does not carry over", async () => {
  const { hub, store, objects } = setup();
  hub.items = [object('cluster-gateway', 1, [good('alice')])];
  void objects.start();
  try {
    await until(() => store.synced, 'sync');
    hub.push({ type: 'DELETED', object: object('cluster-gateway', 1, [good('alice')]) });
    hub.push({ type: 'ADDED', object: object('cluster-gateway', 1, [bad], 'uid-2') });
    await until(() => hub.patches.length === 2, 'status of the new object');
    assert.throws(() => store.resolve({ name: 'c1', annotations: {} }), /never|no valid version/);
    hub.push({ type: 'DELETED', object: object('cluster-gateway', 1, [bad], 'uid-2') });
    await until(() => {
      try {
        return store.resolve({ name: 'c1', annotations: {} }).global === undefined;
      } catch {
        return false;
      }
    }, 'deletion');
  } finally {
    objects.stop();
  }
});

test('a failed status write is retried until it lands', async () => {
  const { hub, objects, logs } = setup();
  hub.failPatches = 2;
  hub.items = [object('cluster-gateway', 1, [good('alice')])];
  void objects.start();
  try {
    await until(() => hub.patches.length === 1, 'status after retries');
    assert.equal(logs.filter((l) => l.startsWith('warn cannot write')).length, 2);
  } finally {
    objects.stop();
  }
});

test('a status that already says the same is not rewritten (another replica wrote it)', async () => {
  const { hub, store, objects } = setup();
  const status: ConfigurationStatus = {
    observedGeneration: 4,
    appliedGeneration: 4,
    conditions: [
      {
        type: 'Valid',
        status: 'True' as const,
        reason: 'Valid',
        message: 'generation 4 is valid (1 rules) and in force',
        observedGeneration: 4,
        lastTransitionTime: '2025-01-01T00:00:00Z',
      },
    ],
  };
  hub.items = [object('cluster-gateway', 4, [good('alice')], 'uid-1', status)];
  void objects.start();
  try {
    await until(() => store.synced, 'sync');
    await new Promise((resolve) => setTimeout(resolve, 30));
    assert.equal(hub.patches.length, 0);
  } finally {
    objects.stop();
  }
});

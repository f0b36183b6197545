import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeObject, RequestOptions } from '../../../shared/kube/client.ts';
import type { InformerHandlers } from '../../../shared/kube/informer.ts';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import { signVerdict } from '../clusters/verdict-signature.ts';
import { HealthAnnotationStore } from './annotation-store.ts';

/** An informer cache whose events the test delivers. */
class FakeObjects {
  readonly store = new Map<string, KubeObject>();
  readonly handlers = new Set<InformerHandlers<KubeObject>>();
  get(key: string) {
    return this.store.get(key);
  }
  on(h: InformerHandlers<KubeObject>) {
    this.handlers.add(h);
    return () => this.handlers.delete(h);
  }
  deliver(key: string, obj: KubeObject) {
    const old = this.store.get(key);
    this.store.set(key, obj);
    for (const h of this.handlers) old ? h.onUpdate?.(old, obj) : h.onAdd?.(obj);
  }
}

const secretObj = (rv: string, annotations: Record<string, string> = {}): KubeObject => ({
  metadata: { name: 'c1', namespace: 'creds', resourceVersion: rv, annotations },
});

function setup(
  respond: (path: string, body: unknown) => KubeObject | Promise<KubeObject>,
  verdictKey?: Uint8Array,
) {
  const secrets = new FakeObjects();
  const managed = new FakeObjects();
  const requests: { method: string; path: string; options?: RequestOptions }[] = [];
  const store = new HealthAnnotationStore({
    client: {
      request: async <T>(method: string, path: string, options?: RequestOptions) => {
        requests.push({ method, path, ...(options ? { options } : {}) });
        return (await respond(path, options?.body)) as T;
      },
    },
    secretNamespace: 'creds',
    secrets,
    managedClusters: managed,
    observeTimeoutMs: 2000,
    ...(verdictKey ? { verdictKey } : {}),
  });
  return { secrets, managed, requests, store };
}

const healthy = 'status.cluster.core.oam.dev/healthy';
const reason = 'status.cluster.core.oam.dev/healthy-reason';

test('merge-patches only the two annotations on the Secret and waits for the informer to see it', async () => {
  const { secrets, requests, store } = setup(() => secretObj('6'));
  secrets.deliver('creds/c1', secretObj('5'));
  let done = false;
  const recording = store
    .record('c1', { healthy: false, reason: 'maintenance' }, { conditional: false })
    .then(() => {
      done = true;
    });
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(done, false, 'answers only once the registry can show the mark');
  secrets.deliver('creds/c1', secretObj('6', { [healthy]: 'false', [reason]: 'maintenance' }));
  await recording;
  assert.deepEqual(requests, [
    {
      method: 'PATCH',
      path: '/api/v1/namespaces/creds/secrets/c1',
      options: {
        body: { metadata: { annotations: { [healthy]: 'false', [reason]: 'maintenance' } } },
        contentType: 'application/merge-patch+json',
      },
    },
  ]);
  assert.equal(secrets.handlers.size, 0, 'stops listening');
});

test('conditional writes carry the resourceVersion the registry was built from; a hub 409 is a ClusterGateway 409', async () => {
  const { secrets, requests, store } = setup(() => {
    throw new StatusError(failureStatus(409, 'Operation cannot be fulfilled on secrets "c1"'));
  });
  secrets.deliver('creds/c1', secretObj('5'));
  await assert.rejects(
    store.record('c1', { healthy: true, reason: '' }, { conditional: true }),
    (err: unknown) => {
      assert.ok(err instanceof StatusError);
      assert.equal(err.code, 409);
      assert.match(err.message, /clustergateways.cluster.core.oam.dev "c1": the object has been modified/);
      return true;
    },
  );
  assert.deepEqual((requests[0]?.options?.body as { metadata: object } | undefined)?.metadata, {
    annotations: { [healthy]: 'true', [reason]: '' },
    resourceVersion: '5',
  });
});

test('the watch may deliver the write before the PATCH response', async () => {
  const { secrets, store } = setup(() => {
    secrets.deliver('creds/c1', secretObj('6'));
    secrets.deliver('creds/c1', secretObj('7'));
    return secretObj('6');
  });
  secrets.deliver('creds/c1', secretObj('5'));
  const started = Date.now();
  await store.record('c1', { healthy: true, reason: '' }, { conditional: false });
  assert.ok(Date.now() - started < 1000, 'did not wait for the timeout');
});

test('a cluster without a Secret keeps its mark on the ManagedCluster', async () => {
  const { managed, requests, store } = setup(() => ({ metadata: { name: 'c1', resourceVersion: '9' } }));
  managed.deliver('c1', { metadata: { name: 'c1', resourceVersion: '8' } });
  const recording = store.record('c1', { healthy: false, reason: 'x' }, { conditional: false });
  setTimeout(() => managed.deliver('c1', { metadata: { name: 'c1', resourceVersion: '9' } }), 10);
  await recording;
  assert.equal(requests[0]?.path, '/apis/cluster.open-cluster-management.io/v1/managedclusters/c1');
});

test('nowhere to record, or no permission: a Status that says what is wrong', async () => {
  const { secrets, store } = setup(() => {
    throw new StatusError(failureStatus(403, 'secrets "c1" is forbidden'));
  });
  await assert.rejects(
    store.record('c1', { healthy: true, reason: '' }, { conditional: false }),
    /neither a credential Secret in namespace creds nor a ManagedCluster/,
  );
  secrets.deliver('creds/c1', secretObj('5'));
  await assert.rejects(
    store.record('c1', { healthy: true, reason: '' }, { conditional: false }),
    (err: unknown) =>
      err instanceof StatusError &&
      err.code === 500 &&
      /grant its ServiceAccount patch on secrets in namespace creds/.test(err.message),
  );
});

test("the prober's verdict: two annotations of its own, written only when it changes; nowhere to write is said", async () => {
  const { secrets, managed, requests, store } = setup(() => secretObj('6'));
  secrets.deliver('creds/c1', secretObj('5'));
  assert.equal(await store.recordProbe('c1', { healthy: false, reason: 'connect ECONNREFUSED' }), 'written');
  assert.equal(requests.length, 1);
  assert.equal(requests[0]?.method, 'PATCH');
  assert.equal(requests[0]?.path, '/api/v1/namespaces/creds/secrets/c1');
  assert.equal(requests[0]?.options?.contentType, 'application/merge-patch+json');
  assert.deepEqual(requests[0]?.options?.body, {
    metadata: {
      annotations: {
        'status.cluster.core.oam.dev/probed-healthy': 'false',
        'status.cluster.core.oam.dev/probed-reason': 'connect ECONNREFUSED',
      },
    },
  });
  secrets.deliver(
    'creds/c1',
    secretObj('6', {
      'status.cluster.core.oam.dev/probed-healthy': 'false',
      'status.cluster.core.oam.dev/probed-reason': 'connect ECONNREFUSED',
    }),
  );
  assert.equal(
    await store.recordProbe('c1', { healthy: false, reason: 'connect ECONNREFUSED' }),
    'unchanged',
  );
  assert.equal(await store.recordProbe('c1', { healthy: true }), 'written');
  const second = requests[1]?.options?.body as { metadata: { annotations: Record<string, unknown> } };
  assert.equal(
    second.metadata.annotations['status.cluster.core.oam.dev/probed-reason'],
    null,
    'no reason removes the old one',
  );
  // No Secret and no key to sign with: a ManagedCluster is no place for it (its klusterlet may write
  // there); neither object: the caller keeps it in memory.
  managed.deliver('m1', { metadata: { name: 'm1', uid: 'u1', resourceVersion: '3' } });
  assert.equal(await store.recordProbe('m1', { healthy: true }), 'nowhere');
  assert.equal(await store.recordProbe('tunnel-only', { healthy: true }), 'nowhere');
  assert.equal(requests.length, 2);
});

test('on a ManagedCluster the verdict is signed; one the klusterlet changed is written again', async () => {
  const key = Buffer.from('0123456789abcdef0123456789abcdef');
  const { managed, requests, store } = setup(() => ({ metadata: { name: 'm1' } }), key);
  const probed = 'status.cluster.core.oam.dev/probed-healthy';
  const probedReason = 'status.cluster.core.oam.dev/probed-reason';
  const signature = 'status.cluster.core.oam.dev/probed-signature';
  const mc = (annotations: Record<string, string>) => ({
    metadata: { name: 'm1', uid: 'u1', resourceVersion: '3', annotations },
  });
  managed.deliver('m1', mc({}));
  const verdict = { healthy: false, reason: 'connect ECONNREFUSED' };
  assert.equal(await store.recordProbe('m1', verdict), 'written');
  assert.equal(requests[0]?.path, '/apis/cluster.open-cluster-management.io/v1/managedclusters/m1');
  const body = requests[0]?.options?.body as { metadata: { annotations: Record<string, string> } };
  const written = body.metadata.annotations;
  assert.equal(written[probed], 'false');
  assert.equal(
    written[signature],
    signVerdict(key, { uid: 'u1', name: 'm1', healthy: 'false', reason: 'connect ECONNREFUSED' }),
  );
  managed.deliver('m1', mc(written));
  assert.equal(await store.recordProbe('m1', verdict), 'unchanged');
  // The klusterlet rewrites the reason (or copies the signature under another verdict): rewritten.
  managed.deliver('m1', mc({ ...written, [probedReason]: 'all good, trust me' }));
  assert.equal(await store.recordProbe('m1', verdict), 'written');
  managed.deliver('m1', mc({ ...written, [probed]: 'true' }));
  assert.equal(await store.recordProbe('m1', verdict), 'written');
  assert.equal(requests.length, 3);
});

test("a verdict for a Secret deleted since the informer saw it is 'gone', not kept; other failures still throw", async () => {
  let answer: 'notfound' | 'forbidden' = 'notfound';
  const { secrets, store } = setup(() => {
    throw new StatusError(failureStatus(answer === 'notfound' ? 404 : 403, `secrets "c1" ${answer}`));
  });
  secrets.deliver('creds/c1', secretObj('5'));
  assert.equal(await store.recordProbe('c1', { healthy: false, reason: 'connect ECONNREFUSED' }), 'gone');
  answer = 'forbidden';
  await assert.rejects(store.recordProbe('c1', { healthy: true }), (err: Error) =>
    /forbidden/.test(err.message),
  );
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RequestOptions } from '../../../shared/kube/client.ts';
import { clusterOfflineStatus } from '../../../shared/kube/cluster-offline.ts';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import { healthzPath, mapBounded, probeAll, probeHealthz } from './healthz.ts';

type Request = (method: string, path: string, options?: RequestOptions) => Promise<unknown>;
const client = (request: Request) => ({
  request: request as <T>(m: string, p: string, o?: RequestOptions) => Promise<T>,
});

test('the proxied /healthz of the cluster, timed', async () => {
  const paths: string[] = [];
  let t = 100;
  const result = await probeHealthz(
    client(async (_m, p) => {
      paths.push(p);
      t += 17;
      return 'ok';
    }),
    'c1.example',
    2000,
    () => t,
  );
  assert.deepEqual(paths, ['/apis/cluster.core.oam.dev/v1alpha1/clustergateways/c1.example/proxy/healthz']);
  assert.deepEqual(result, { ok: true, milliseconds: 17, code: 200 });
});

test("failures in a word: offline (the gateway's ClusterOffline cause), forbidden, http-<code>, refused", async () => {
  const offline = new StatusError(
    clusterOfflineStatus({
      cluster: 'c1',
      message: 'cluster c1 is offline',
      causes: ['no agent tunnel is connected'],
    }),
  );
  const fail = (err: unknown) =>
    probeHealthz(
      client(async () => Promise.reject(err)),
      'c1',
    );
  assert.equal((await fail(offline)).error, 'offline');
  assert.equal((await fail(new StatusError(failureStatus(403, 'no')))).error, 'forbidden');
  assert.equal((await fail(new StatusError(failureStatus(503, 'no')))).error, 'unavailable');
  assert.equal((await fail(new StatusError(failureStatus(502, 'no')))).error, 'http-502');
  const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
  assert.deepEqual(await fail(refused), { ok: false, error: 'refused', message: 'connect ECONNREFUSED' });
  const notOk = await probeHealthz(
    client(async () => 'healthz check failed'),
    'c1',
  );
  assert.equal(notOk.ok, false);
  assert.equal(notOk.error, 'not-ok');
});

test('a cluster that does not answer shows "timeout" after the timeout, not later', async () => {
  const hanging: Request = (_m, _p, options) =>
    new Promise((_resolve, reject) =>
      options?.signal?.addEventListener('abort', () => reject(new Error('aborted'))),
    );
  const started = Date.now();
  const result = await probeHealthz(client(hanging), 'c1', 50);
  assert.deepEqual(result, { ok: false, error: 'timeout', message: 'no answer within 0.05 s' });
  assert.ok(Date.now() - started < 1000);
});

test('mapBounded: never more than the limit at once, results in order', async () => {
  let running = 0;
  let most = 0;
  const results = await mapBounded([...Array(100).keys()], 7, async (i) => {
    running++;
    most = Math.max(most, running);
    await new Promise((r) => setTimeout(r, i % 3));
    running--;
    return i * 2;
  });
  assert.equal(most, 7);
  assert.deepEqual(
    results,
    [...Array(100).keys()].map((i) => i * 2),
  );
  assert.deepEqual(await mapBounded([], 7, async () => 1), []);
});

test('probeAll: one result per cluster, keyed by name', async () => {
  const results = await probeAll(
    client(async (_m, p) =>
      p === healthzPath('bad') ? Promise.reject(new StatusError(failureStatus(403, 'no'))) : 'ok',
    ),
    ['good', 'bad'],
    { concurrency: 2, timeoutMs: 1000 },
  );
  assert.equal(results.get('good')?.ok, true);
  assert.equal(results.get('bad')?.error, 'forbidden');
});

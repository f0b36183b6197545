import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  type APIService,
  apiServiceAvailable,
  apiServiceExists,
  caBundleVerifies,
  type Deployment,
  gatewayPodsReady,
  type Pod,
} from './apiservice.ts';
import { defaultLayout as l } from './model.ts';
import type { Read } from './reads.ts';

const found = <T>(value: T, hubTime = 0): Read<T> => ({ state: 'found', value, hubTime });
const apiService = (over: Partial<APIService> = {}): APIService => ({
  metadata: { name: l.apiServiceName },
  spec: { service: { name: 'cluster-gateway', namespace: 'ns' }, caBundle: 'Q0E=' },
  status: { conditions: [{ type: 'Available', status: 'True', reason: 'Passed' }] },
  ...over,
});
const pod = (name: string, ready: boolean, waiting?: string): Pod => ({
  metadata: { name },
  status: {
    phase: 'Running',
    conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }],
    containerStatuses: [{ name: 'gateway', ...(waiting ? { state: { waiting: { reason: waiting } } } : {}) }],
  },
});
const deployment = (replicas: number): Deployment => ({
  metadata: { name: 'cluster-gateway' },
  spec: { replicas },
});

test('a missing APIService fails with the manager as the fix', () => {
  const v = apiServiceExists({ state: 'missing', hubTime: 0 }, l);
  assert.equal(v.result, 'fail');
  assert.equal(v.object, `apiservice/${l.apiServiceName}`);
  assert.match(v.fix ?? '', /logs -l app.kubernetes.io\/component=addon-manager/);
  assert.equal(apiServiceExists(found(apiService()), l).result, 'pass');
});

test('a read the caller may not do is not checked, not failed', () => {
  const v = apiServiceExists({ state: 'forbidden', permission: 'get apiservices', message: 'no' }, l);
  assert.equal(v.result, 'skipped');
  assert.match(v.message, /you may not get apiservices/);
});

test('gateway pods: scaled to 0, some not ready (named with why), all ready', () => {
  const none = gatewayPodsReady(found(deployment(0)), found({ items: [] }), l);
  assert.equal(none.result, 'fail');
  assert.match(none.message, /scaled to 0/);
  assert.match(none.fix ?? '', /scale deployment\/cluster-gateway --replicas=2/);

  const half = gatewayPodsReady(
    found(deployment(2)),
    found({ items: [pod('a', true), pod('b', false, 'CrashLoopBackOff')] }),
    l,
  );
  assert.equal(half.result, 'fail');
  assert.match(half.message, /1\/2 gateway pods ready; not ready: b \(CrashLoopBackOff\)/);
  assert.equal(half.object, `pod ${l.gatewayNamespace}/b`);

  const ok = gatewayPodsReady(found(deployment(2)), found({ items: [pod('a', true), pod('b', true)] }), l);
  assert.deepEqual([ok.result, ok.message], ['pass', '2/2 gateway pods ready']);
  assert.equal(gatewayPodsReady({ state: 'missing', hubTime: 0 }, found({ items: [] }), l).result, 'fail');
});

test('Available False says the aggregator reason; an x509 one points at the caBundle', () => {
  const missing = apiServiceAvailable(
    found(
      apiService({
        status: {
          conditions: [
            { type: 'Available', status: 'False', reason: 'MissingEndpoints', message: 'no addresses' },
          ],
        },
      }),
    ),
    l,
  );
  assert.equal(missing.result, 'fail');
  assert.match(missing.message, /MissingEndpoints: no addresses/);
  const tls = apiServiceAvailable(
    found(
      apiService({
        status: {
          conditions: [
            {
              type: 'Available',
              status: 'False',
              reason: 'FailedDiscoveryCheck',
              message: 'x509: certificate signed by unknown authority',
            },
          ],
        },
      }),
    ),
    l,
  );
  assert.match(tls.message, /does not trust the certificate/);
  assert.match(tls.fix ?? '', /rollout restart/);
  assert.equal(apiServiceAvailable(found(apiService()), l).result, 'pass');
});

test('caBundle: verified by the aggregator answering, refused on x509, insecure or empty fails', () => {
  assert.equal(caBundleVerifies(found(apiService()), found({ kind: 'APIResourceList' }), l).result, 'pass');
  const x509 = caBundleVerifies(
    found(apiService()),
    {
      state: 'error',
      code: 503,
      connection: false,
      message: 'x509: certificate signed by unknown authority',
    },
    l,
  );
  assert.equal(x509.result, 'fail');
  assert.match(x509.message, /does not trust the gateway's serving certificate/);
  const insecure = caBundleVerifies(
    found(apiService({ spec: { insecureSkipTLSVerify: true } })),
    found({}),
    l,
  );
  assert.match(insecure.message, /insecureSkipTLSVerify/);
  assert.equal(caBundleVerifies(found(apiService({ spec: {} })), found({}), l).result, 'fail');
});

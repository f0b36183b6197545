import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bindingName, grantCommands, healthzAnswers, proxyAllowed, subjectFlag } from './access.ts';
import type { Read } from './reads.ts';

const found = <T>(value: T): Read<T> => ({ state: 'found', value, hubTime: 0 });
const me = found({ status: { userInfo: { username: 'jane@example.com' } } });

test('allowed passes; denied names the permission and the commands that grant it to this user', () => {
  assert.equal(proxyAllowed('c1', found({ status: { allowed: true } }), me).result, 'pass');
  const v = proxyAllowed('c1', found({ status: { allowed: false } }), me);
  assert.equal(v.result, 'fail');
  assert.match(v.message, /jane@example.com may not get clustergateways.cluster.core.oam.dev\/proxy/);
  assert.match(v.message, /subresource clustergateways\/proxy/);
  assert.match(
    v.fix ?? '',
    /--verb=get --resource=clustergateways.cluster.core.oam.dev\/proxy --resource-name=c1/,
  );
  assert.match(
    v.fix ?? '',
    /create clusterrolebinding cluster-gateway-proxy-jane-example.com --clusterrole=cluster-gateway-proxy-jane-example.com --user=jane@example.com/,
  );
});

test('ServiceAccounts are bound with --serviceaccount; odd names are quoted', () => {
  assert.equal(subjectFlag('system:serviceaccount:ns:robot'), '--serviceaccount=ns:robot');
  assert.equal(subjectFlag("o'brien x"), `--user='o'\\''brien x'`);
  assert.equal(bindingName('Jane Doe'), 'cluster-gateway-proxy-jane-doe');
  assert.match(grantCommands(undefined, 'c1'), /--user=<your user>|--user='<your user>'/);
});

test('healthz: ok with its latency; a failure keeps the gateway message', () => {
  assert.deepEqual(
    [healthzAnswers('c1', found('ok'), 12).result, healthzAnswers('c1', found('ok'), 12).message],
    ['pass', 'ok in 12 ms'],
  );
  const offline = healthzAnswers(
    'c1',
    { state: 'error', code: 503, connection: false, message: 'cluster c1 is offline (ClusterOffline)' },
    3,
  );
  assert.equal(offline.result, 'fail');
  assert.match(offline.fix ?? '', /marks it offline/);
});

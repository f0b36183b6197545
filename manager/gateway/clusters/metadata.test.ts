import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isSecretishAnnotation, publicAnnotations } from './metadata.ts';
import { parseEndpointAddress, parseGoBool, parseProxyUrl, redactUrlPassword } from './parse-util.ts';

test('secret-ish annotations are dropped by key or by value', () => {
  assert.deepEqual(
    publicAnnotations({
      'kubectl.kubernetes.io/last-applied-configuration': '{}',
      'example.com/token': 'x',
      'example.com/tls.key': 'x',
      'example.com/db-password': 'x',
      'example.com/note': '-----BEGIN RSA PRIVATE KEY-----\nabc',
      'example.com/jwt': 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln',
      'cluster.core.oam.dev/cluster-alias': 'prod',
      'status.cluster.core.oam.dev/healthy-reason': 'ConnectionTimeout',
      'example.com/monkey': 'banana',
    }),
    {
      'cluster.core.oam.dev/cluster-alias': 'prod',
      'status.cluster.core.oam.dev/healthy-reason': 'ConnectionTimeout',
      'example.com/monkey': 'banana',
    },
  );
  assert.equal(
    isSecretishAnnotation('cluster.core.oam.dev/cluster-gateway-proxy-configuration', 'rules: []'),
    false,
  );
  assert.deepEqual(publicAnnotations(undefined), {});
});

test('endpoint, proxy and bool parsing', () => {
  assert.deepEqual(parseEndpointAddress(' 10.0.0.1:6443 ', 'x'), {
    ok: true,
    value: 'https://10.0.0.1:6443',
  });
  assert.deepEqual(parseEndpointAddress('http://h', 'x'), { ok: true, value: 'http://h' });
  assert.equal(parseEndpointAddress('', 'x').ok, false);
  assert.equal(parseProxyUrl('socks5h://p:1', 'x').ok, true);
  assert.equal(parseProxyUrl('p:1', 'x').ok, false);
  assert.equal(redactUrlPassword('http://user:secret@proxy:3128'), 'http://user:xxxxx@proxy:3128');
  assert.equal(redactUrlPassword('http://proxy:3128'), 'http://proxy:3128');
  assert.equal(parseGoBool('T'), true);
  assert.equal(parseGoBool('0'), false);
  assert.equal(parseGoBool('yes'), undefined);
});

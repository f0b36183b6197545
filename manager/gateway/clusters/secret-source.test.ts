import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeList, KubeObject, WatchEvent } from '../../../shared/kube/client.ts';
import type { InformerClient } from '../../../shared/kube/informer.ts';
import { parseClusterSecret, type SecretClusterInfo, SecretSource } from './secret-source.ts';
import { caPem, certPem, keyPem, secret } from './test-fixtures.ts';

const x509Labels = { 'cluster.core.oam.dev/cluster-credential-type': 'X509Certificate' };

test('a token Secret with endpoint and CA', () => {
  const info = parseClusterSecret(
    secret('prod', { endpoint: 'https://10.0.0.1:6443\n', 'ca.crt': caPem, token: 'abc.def\n' }),
  );
  assert.equal(info.name, 'prod');
  assert.equal(info.endpointType, 'Const');
  assert.equal(info.address, 'https://10.0.0.1:6443');
  assert.equal(info.caBundle, caPem);
  assert.deepEqual(info.credential, { type: 'ServiceAccountToken', token: 'abc.def' });
  assert.equal(info.credentialType, 'ServiceAccountToken');
  assert.equal(info.creationTimestamp, '2026-01-02T03:04:05Z');
  for (const key of [
    'addressProblem',
    'caProblem',
    'proxyProblem',
    'credentialProblem',
    'endpointTypeProblem',
  ]) {
    assert.equal(info[key as keyof SecretClusterInfo], undefined, key);
  }
});

test('an X509 Secret, CA under the key "ca", proxy-url, and an address without scheme', () => {
  const info = parseClusterSecret(
    secret(
      'edge',
      {
        endpoint: 'edge.example.com:6443/prefix',
        ca: caPem,
        'tls.crt': certPem,
        'tls.key': keyPem,
        'proxy-url': 'socks5://proxy:1080',
      },
      x509Labels,
    ),
  );
  assert.equal(info.address, 'https://edge.example.com:6443/prefix');
  assert.equal(info.caBundle, caPem);
  assert.equal(info.proxyUrl, 'socks5://proxy:1080');
  assert.deepEqual(info.credential, { type: 'X509Certificate', certificate: certPem, privateKey: keyPem });
});

test('X509 without a key, or with garbage, is a credential problem, never a throw', () => {
  const noKey = parseClusterSecret(secret('a', { endpoint: 'https://h', 'tls.crt': certPem }, x509Labels));
  assert.equal(noKey.credential, undefined);
  assert.equal(noKey.credentialProblem, 'credential type X509Certificate needs data key tls.key');
  const neither = parseClusterSecret(secret('a', { endpoint: 'https://h' }, x509Labels));
  assert.equal(
    neither.credentialProblem,
    'credential type X509Certificate needs data key tls.crt and tls.key',
  );
  const garbage = parseClusterSecret(secret('a', { 'tls.crt': 'nope', 'tls.key': keyPem }, x509Labels));
  assert.equal(garbage.credentialProblem, 'data key tls.crt is not a PEM certificate');
  const alias = parseClusterSecret(
    secret(
      'a',
      { 'tls.crt': certPem, 'tls.key': keyPem },
      { 'cluster.core.oam.dev/cluster-credential-type': 'X509' },
    ),
  );
  assert.equal(alias.credential?.type, 'X509Certificate');
});

test('endpoint problems: missing, unparsable, wrong scheme; bad CA and proxy-url', () => {
  assert.equal(
    parseClusterSecret(secret('a', { token: 't' })).addressProblem,
    'data key endpoint is missing',
  );
  assert.match(
    parseClusterSecret(secret('a', { endpoint: 'https://[::1', token: 't' })).addressProblem ?? '',
    /not a valid URL/,
  );
  assert.match(
    parseClusterSecret(secret('a', { endpoint: 'ftp://host', token: 't' })).addressProblem ?? '',
    /must use https:\/\/ or http:\/\//,
  );
  assert.equal(
    parseClusterSecret(secret('a', { endpoint: 'https://h', 'ca.crt': 'not pem', token: 't' })).caProblem,
    'data key ca.crt is not a PEM certificate',
  );
  const proxy = parseClusterSecret(
    secret('a', { endpoint: 'https://h', 'proxy-url': 'ftp://u:pw@p', token: 't' }),
  );
  assert.match(proxy.proxyProblem ?? '', /scheme ftp is not supported/);
  const badProxy = parseClusterSecret(
    secret('a', { endpoint: 'https://h', 'proxy-url': 'http://u:pw@[x', token: 't' }),
  );
  assert.match(badProxy.proxyProblem ?? '', /not a valid URL/);
  assert.doesNotMatch(badProxy.proxyProblem ?? '', /pw/, 'the proxy password is never echoed');
});

test('credential type problems: missing label, unknown type, missing token', () => {
  assert.equal(
    parseClusterSecret(secret('a', {}, {})).credentialProblem,
    'label cluster.core.oam.dev/cluster-credential-type is missing',
  );
  const unknown = parseClusterSecret(
    secret('a', {}, { 'cluster.core.oam.dev/cluster-credential-type': 'Basic' }),
  );
  assert.equal(unknown.credentialType, 'Basic');
  assert.match(unknown.credentialProblem ?? '', /"Basic" is not supported/);
  assert.equal(
    parseClusterSecret(secret('a', { token: '  ' })).credentialProblem,
    'credential type ServiceAccountToken needs data key token',
  );
});

test('Dynamic credentials carry their exec config and are disabled until the flag is given', () => {
  const labels = { 'cluster.core.oam.dev/cluster-credential-type': 'Dynamic' };
  const ok = parseClusterSecret(
    secret(
      'eks',
      {
        endpoint: 'https://eks',
        exec: JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', command: 'aws' }),
      },
      labels,
    ),
  );
  assert.deepEqual(ok.credential, { type: 'Dynamic' });
  assert.deepEqual(ok.exec, { apiVersion: 'client.authentication.k8s.io/v1', command: 'aws' });
  assert.equal(
    ok.credentialProblem,
    'exec credentials are disabled: start the gateway with --enable-exec-credentials',
  );
  assert.equal(
    parseClusterSecret(secret('eks', { exec: '{"command":"aws","args":"x"}' }, labels)).credentialProblem,
    'data key exec: args is not a list of strings',
  );
  assert.match(parseClusterSecret(secret('eks', {}, labels)).credentialProblem ?? '', /needs data key exec/);
  assert.equal(
    parseClusterSecret(secret('eks', { exec: '{' }, labels)).credentialProblem,
    'data key exec is not valid JSON',
  );
  assert.equal(
    parseClusterSecret(secret('eks', { exec: '{}' }, labels)).credentialProblem,
    'data key exec has no command',
  );
});

test('endpoint type label: ClusterProxy accepted, anything else is a problem', () => {
  const base = { 'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken' };
  const proxy = parseClusterSecret(
    secret('a', { token: 't' }, { ...base, 'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy' }),
  );
  assert.equal(proxy.endpointType, 'ClusterProxy');
  const bad = parseClusterSecret(
    secret('a', { token: 't' }, { ...base, 'cluster.core.oam.dev/cluster-endpoint-type': 'Tunnel' }),
  );
  assert.match(bad.endpointTypeProblem ?? '', /"Tunnel" is not supported/);
});

test('health annotations parse like Go strconv.ParseBool', () => {
  const health = (annotations: Record<string, string>) =>
    parseClusterSecret(secret('a', { token: 't' }, undefined, annotations)).health;
  assert.equal(health({}), undefined);
  assert.deepEqual(health({ 'status.cluster.core.oam.dev/healthy': 'True' }), { healthy: true });
  assert.deepEqual(
    health({
      'status.cluster.core.oam.dev/healthy': 'false',
      'status.cluster.core.oam.dev/healthy-reason': 'ConnectionTimeout',
    }),
    { healthy: false, reason: 'ConnectionTimeout' },
  );
  assert.deepEqual(health({ 'status.cluster.core.oam.dev/healthy': 'yes' }), {
    healthy: false,
    reason: 'invalid status.cluster.core.oam.dev/healthy annotation "yes"',
  });
});

test('secret-ish annotations are not copied', () => {
  const info = parseClusterSecret(
    secret('a', { token: 't' }, undefined, {
      'kubectl.kubernetes.io/last-applied-configuration': '{"data":{"token":"..."}}',
      'example.com/alias': 'prod',
    }),
  );
  assert.deepEqual(info.annotations, { 'example.com/alias': 'prod' });
});

test('SecretSource lists by label and feeds adds, updates and deletes to its sink', async () => {
  const listed: string[] = [];
  const watchEvents: WatchEvent[] = [
    { type: 'MODIFIED', object: secret('a', { endpoint: 'https://new', token: 't' }) },
    { type: 'DELETED', object: secret('b', {}) },
  ];
  const client: InformerClient = {
    list: async <T extends KubeObject>(path: string) => {
      listed.push(path);
      // The no-credential informer's selector matches none of these.
      const markers = path.includes('cluster-endpoint-type');
      return {
        metadata: { resourceVersion: '5' },
        items: markers ? [] : [secret('a', { token: 't' }), secret('b', { token: 't' })],
      } as KubeList<T>;
    },
    watch: async function* <T extends KubeObject>(path: string, signal?: AbortSignal) {
      if (!path.includes('cluster-endpoint-type')) {
        for (const event of watchEvents.splice(0)) yield event as WatchEvent<T>;
      }
      await new Promise((resolve) => signal?.addEventListener('abort', resolve, { once: true }));
    },
  };
  const calls: string[] = [];
  const source = new SecretSource(
    client,
    { namespace: 'vela-system' },
    { setSecret: (name, info) => calls.push(`${name}:${info ? (info.address ?? 'no-address') : 'deleted'}`) },
  );
  source.start();
  const deadline = Date.now() + 2000;
  while (calls.length < 4 && Date.now() < deadline) await new Promise((resolve) => setImmediate(resolve));
  source.stop();
  assert.equal(source.hasSynced, true);
  assert.deepEqual(calls, ['a:no-address', 'b:no-address', 'a:https://new', 'b:deleted']);
  assert.ok(
    listed.includes(
      '/api/v1/namespaces/vela-system/secrets?labelSelector=cluster.core.oam.dev%2Fcluster-credential-type&limit=500',
    ),
    listed.join(' '),
  );
});

test('SecretSource also watches no-credential Secrets; one moving between the two sets is never dropped', async () => {
  const proxyLabel = { 'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy' };
  const marker = secret('m', {}, proxyLabel);
  const withCredential = secret(
    'm',
    { token: 't' },
    {
      ...proxyLabel,
      'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken',
    },
  );
  const events: Record<string, WatchEvent[]> = {
    credential: [{ type: 'ADDED', object: withCredential }],
    marker: [{ type: 'DELETED', object: marker }],
  };
  const client: InformerClient = {
    list: async <T extends KubeObject>(path: string) =>
      ({
        metadata: { resourceVersion: '5' },
        items: path.includes('cluster-endpoint-type') ? [marker] : [],
      }) as KubeList<T>,
    watch: async function* <T extends KubeObject>(path: string, signal?: AbortSignal) {
      const which = path.includes('cluster-endpoint-type') ? 'marker' : 'credential';
      // The credential informer sees the label first; the marker informer's delete comes after.
      if (which === 'marker') await new Promise((r) => setTimeout(r, 30));
      for (const event of events[which]!.splice(0)) yield event as WatchEvent<T>;
      await new Promise((resolve) => signal?.addEventListener('abort', resolve, { once: true }));
    },
  };
  const calls: string[] = [];
  const source = new SecretSource(
    client,
    { namespace: 'vela-system' },
    {
      setSecret: (name, info) =>
        calls.push(
          `${name}:${info ? (info.noCredential ? 'no-credential' : info.credential?.type) : 'deleted'}`,
        ),
    },
  );
  void source.start();
  const deadline = Date.now() + 2000;
  while (calls.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  source.stop();
  assert.deepEqual(calls, ['m:no-credential', 'm:ServiceAccountToken', 'm:ServiceAccountToken']);
});

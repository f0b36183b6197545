import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { KubeconfigError, loadDefault, loadKubeconfig } from './kubeconfig.ts';

const b64 = (s: string) => Buffer.from(s).toString('base64');

function dir(files: Record<string, string>): string {
  const d = mkdtempSync(path.join(tmpdir(), 'shared-kubeconfig-'));
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(d, name)), { recursive: true });
    writeFileSync(path.join(d, name), content);
  }
  return d;
}

/** A one-context kubeconfig as JSON (valid YAML), with the user and cluster given. */
function kubeconfig(user: Record<string, unknown>, cluster: Record<string, unknown> = {}): string {
  return JSON.stringify({
    'current-context': 'c',
    contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
    clusters: [{ name: 'c', cluster: { server: 'https://s:6443', ...cluster } }],
    users: [{ name: 'u', user }],
  });
}

test('a kubeconfig with an exec plugin: the plugin, its command resolved next to the file, and the cluster info', () => {
  const d = dir({
    kc: kubeconfig(
      {
        exec: {
          apiVersion: 'client.authentication.k8s.io/v1',
          command: './bin/get-token',
          args: ['--audience', 'hub'],
          provideClusterInfo: true,
        },
      },
      { 'certificate-authority-data': b64('CA') },
    ),
  });
  const c = loadKubeconfig(path.join(d, 'kc'));
  assert.equal(c.exec?.config.command, path.join(d, 'bin/get-token'));
  assert.deepEqual(c.exec?.config.args, ['--audience', 'hub']);
  assert.deepEqual(c.exec?.cluster, { server: 'https://s:6443', caBundle: 'CA' });
  assert.equal(c.options.headers, undefined, 'no static authorization for an exec user');

  // A bare command name is looked up on PATH, as client-go does.
  const onPath = loadKubeconfig(
    path.join(dir({ kc: kubeconfig({ exec: { command: 'aws', args: ['eks', 'get-token'] } }) }), 'kc'),
  );
  assert.equal(onPath.exec?.config.command, 'aws');
  assert.throws(
    () => loadKubeconfig(path.join(dir({ kc: kubeconfig({ exec: { args: [] } }) }), 'kc')),
    /exec has no command/,
  );
});

test('basic auth, impersonation, and token file over inline token (client-go precedence)', () => {
  const d = dir({ token: 'from-file\n' });
  const write = (user: Record<string, unknown>) => {
    writeFileSync(path.join(d, 'kc'), kubeconfig(user));
    return loadKubeconfig(path.join(d, 'kc'));
  };
  assert.deepEqual(write({ username: 'admin', password: 'pw' }).options.headers, {
    authorization: `Basic ${b64('admin:pw')}`,
  });
  const imp = write({
    token: 'T',
    as: 'alice',
    'as-groups': ['a', 'b'],
    'as-user-extra': { 'scopes.x/y': ['1'] },
  });
  assert.deepEqual(imp.options.headers, {
    authorization: 'Bearer T',
    'impersonate-user': 'alice',
    'impersonate-group': ['a', 'b'],
    'impersonate-extra-scopes.x%2Fy': ['1'],
  });
  const both = write({ token: 'inline', tokenFile: 'token' });
  assert.equal(both.token, 'from-file');
  assert.equal(both.tokenFile, path.join(d, 'token'));
  assert.equal(write({ 'token-file': 'token' }).token, 'from-file', "client-node's spelling");
  assert.throws(() => write({ username: 'a', password: 'b', token: 'T' }), /both set; keep one/);
  assert.throws(
    () => write({ 'auth-provider': { name: 'oidc' } }),
    (err) => err instanceof KubeconfigError && /auth-provider "oidc" is not supported/.test(err.message),
  );
});

test('a KUBECONFIG list is merged as client-go does: first definition and first current-context win', () => {
  const first = dir({
    kc: JSON.stringify({
      clusters: [{ name: 'hub', cluster: { server: 'https://first', 'certificate-authority': 'ca.crt' } }],
      users: [{ name: 'admin', user: { token: 'first-token' } }],
    }),
    'ca.crt': 'FIRST CA',
  });
  const second = dir({
    kc: JSON.stringify({
      'current-context': 'hub',
      contexts: [{ name: 'hub', context: { cluster: 'hub', user: 'admin' } }],
      clusters: [{ name: 'hub', cluster: { server: 'https://second' } }],
      users: [{ name: 'admin', user: { token: 'second-token' } }],
    }),
  });
  const c = loadKubeconfig([path.join(first, 'kc'), '/nonexistent/kc', path.join(second, 'kc')]);
  assert.equal(c.server, 'https://first');
  assert.equal(c.options.ca, 'FIRST CA', 'a relative path is resolved against the file that names it');
  assert.equal(c.token, 'first-token');
  assert.throws(() => loadKubeconfig(['/nonexistent/a', '/nonexistent/b']), /none of the kubeconfig files/);
});

test('default chain: explicit file, then KUBECONFIG, then in-cluster, then ~/.kube/config', () => {
  const home = dir({ '.kube/config': kubeconfig({ token: 'home' }) });
  const listed = dir({ kc: kubeconfig({ token: 'listed' }) });
  const sa = dir({ 'ca.crt': 'SA CA', token: 'sa-token\n' });
  const inPod = { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443', HOME: home };
  assert.equal(loadDefault(path.join(listed, 'kc'), inPod, undefined, sa).token, 'listed');
  assert.equal(
    loadDefault(undefined, { ...inPod, KUBECONFIG: path.join(listed, 'kc') }, undefined, sa).token,
    'listed',
  );
  const pod = loadDefault(undefined, inPod, undefined, sa);
  assert.equal(pod.server, 'https://10.0.0.1:443');
  assert.equal(pod.token, 'sa-token');
  assert.equal(
    pod.tokenFile,
    path.join(sa, 'token'),
    'in-cluster tokens are read again (the kubelet rotates them)',
  );
  assert.equal(loadDefault(undefined, { HOME: home }, undefined, sa).token, 'home');
  assert.throws(
    () => loadDefault(undefined, { HOME: dir({}) }, undefined, sa),
    /no kubeconfig: pass --kubeconfig/,
  );
});

test("a cluster's proxy-url is read, is part of the fingerprint, and must be an http, https or socks5 URL", () => {
  const d = dir({
    plain: kubeconfig({ token: 'T' }),
    proxied: kubeconfig({ token: 'T' }, { 'proxy-url': 'http://user:pw@proxy.corp:3128' }),
    socks: kubeconfig({ token: 'T' }, { 'proxy-url': 'socks5://proxy.corp:1080' }),
    ftp: kubeconfig({ token: 'T' }, { 'proxy-url': 'ftp://user:pw@proxy.corp' }),
    bad: kubeconfig({ token: 'T' }, { 'proxy-url': 'not a url' }),
  });
  const plain = loadKubeconfig(path.join(d, 'plain'));
  const proxied = loadKubeconfig(path.join(d, 'proxied'));
  assert.equal(plain.proxyUrl, undefined);
  assert.equal(proxied.proxyUrl, 'http://user:pw@proxy.corp:3128');
  assert.notEqual(proxied.fingerprint, plain.fingerprint, 'a new proxy-url is a new connection');
  assert.equal(loadKubeconfig(path.join(d, 'socks')).proxyUrl, 'socks5://proxy.corp:1080');
  assert.throws(
    () => loadKubeconfig(path.join(d, 'ftp')),
    (err) => {
      assert.ok(err instanceof KubeconfigError);
      assert.match(
        err.message,
        /proxy-url ftp:\/\/redacted@proxy\.corp must be an http:\/\/, https:\/\/ or socks5:\/\//,
      );
      assert.doesNotMatch(err.message, /pw/, 'no credential in the message');
      return true;
    },
  );
  assert.throws(() => loadKubeconfig(path.join(d, 'bad')), /proxy-url is not a URL/);
});

test("a context other than the current one (kubectl's --context), and a clear error for one that does not exist", () => {
  const d = dir({
    kc: JSON.stringify({
      'current-context': 'a',
      contexts: [
        { name: 'a', context: { cluster: 'ca', user: 'u' } },
        { name: 'b', context: { cluster: 'cb', user: 'u' } },
      ],
      clusters: [
        { name: 'ca', cluster: { server: 'https://a:6443' } },
        { name: 'cb', cluster: { server: 'https://b:6443' } },
      ],
      users: [{ name: 'u', user: { token: 't' } }],
    }),
  });
  const file = path.join(d, 'kc');
  assert.equal(loadKubeconfig(file).server, 'https://a:6443');
  assert.equal(loadKubeconfig(file, undefined, 'b').server, 'https://b:6443');
  assert.throws(
    () => loadKubeconfig(file, undefined, 'nosuch'),
    (err: unknown) =>
      err instanceof KubeconfigError && /no context "nosuch" \(it has: a, b\)/.test(err.message),
  );
});

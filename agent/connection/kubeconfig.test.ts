import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { KubeconfigError, loadInCluster, loadKubeconfig } from './kubeconfig.ts';

const b64 = (s: string) => Buffer.from(s).toString('base64');

// The shape OCM's registration agent writes into <addon>-hub-kubeconfig: files named relative to the kubeconfig.
const ocmKubeconfig = `apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: ${b64('HUB CA')}
    server: https://hub.example:6443
  name: default-cluster
contexts:
- context:
    cluster: default-cluster
    namespace: configuration
    user: default-auth
  name: default-context
current-context: default-context
kind: Config
preferences: {}
users:
- name: default-auth
  user:
    client-certificate: tls.crt
    client-key: tls.key
`;

function dir(files: Record<string, string>): string {
  const d = mkdtempSync(path.join(tmpdir(), 'agent-kubeconfig-'));
  for (const [name, content] of Object.entries(files)) writeFileSync(path.join(d, name), content);
  return d;
}

test("OCM's hub kubeconfig: certificate files resolved next to the kubeconfig", () => {
  const d = dir({ kubeconfig: ocmKubeconfig, 'tls.crt': 'CERT 1', 'tls.key': 'KEY 1' });
  const c = loadKubeconfig(path.join(d, 'kubeconfig'));
  assert.equal(c.server, 'https://hub.example:6443');
  assert.equal(c.options.ca, 'HUB CA');
  assert.equal(c.options.cert, 'CERT 1');
  assert.equal(c.options.key, 'KEY 1');
  assert.equal(c.options.rejectUnauthorized, true);
  assert.equal(c.token, undefined);

  // A rotated certificate changes the fingerprint; the same content does not.
  assert.equal(loadKubeconfig(path.join(d, 'kubeconfig')).fingerprint, c.fingerprint);
  writeFileSync(path.join(d, 'tls.crt'), 'CERT 2');
  const rotated = loadKubeconfig(path.join(d, 'kubeconfig'));
  assert.notEqual(rotated.fingerprint, c.fingerprint);
  assert.equal(rotated.options.cert, 'CERT 2');
  assert.doesNotMatch(rotated.fingerprint, /CERT|KEY/, 'the fingerprint is a hash, not the credential');
});

test('embedded data, token, tokenFile, insecure and tls-server-name', () => {
  const d = dir({ token: 'file-token\n' });
  const write = (user: string, cluster = '') => {
    const file = path.join(d, 'kc');
    writeFileSync(
      file,
      JSON.stringify({
        'current-context': 'c',
        contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
        clusters: [{ name: 'c', cluster: { server: 'https://s', ...(cluster ? JSON.parse(cluster) : {}) } }],
        users: [{ name: 'u', user: JSON.parse(user) }],
      }),
    );
    return loadKubeconfig(file);
  };
  const data = write(JSON.stringify({ 'client-certificate-data': b64('C'), 'client-key-data': b64('K') }));
  assert.equal(data.options.cert, 'C');
  assert.equal(data.options.key, 'K');
  const token = write(JSON.stringify({ token: 'T' }));
  assert.deepEqual(token.options.headers, { authorization: 'Bearer T' });
  assert.equal(token.token, 'T');
  assert.equal(write(JSON.stringify({ tokenFile: 'token' })).token, 'file-token');
  const insecure = write(
    '{}',
    JSON.stringify({ 'insecure-skip-tls-verify': true, 'tls-server-name': 'api' }),
  );
  assert.equal(insecure.options.rejectUnauthorized, false);
  assert.equal(insecure.options.servername, 'api');

  assert.throws(() => write(JSON.stringify({ exec: { command: 'x' } })), /exec plugins .* not supported/);
  assert.throws(() => write(JSON.stringify({ 'client-certificate-data': b64('C') })), /needs its key/);
  assert.throws(
    () => write(JSON.stringify({ 'client-certificate': 'missing.crt', 'client-key': 'k' })),
    (err) => {
      assert.ok(err instanceof KubeconfigError);
      assert.match(err.message, /cannot read client-certificate .*missing\.crt: ENOENT/);
      return true;
    },
  );
});

test('missing or broken kubeconfig: a KubeconfigError that names the file', () => {
  assert.throws(
    () => loadKubeconfig('/nonexistent/kubeconfig'),
    /cannot read kubeconfig \/nonexistent\/kubeconfig: ENOENT/,
  );
  const d = dir({ kc: 'clusters: [' });
  assert.throws(() => loadKubeconfig(path.join(d, 'kc')), /not valid YAML/);
  const e = dir({ kc: 'current-context: nowhere\n' });
  assert.throws(() => loadKubeconfig(path.join(e, 'kc')), /no current context/);
});

test('in-cluster: service host and port, ServiceAccount CA and token (IPv6 bracketed)', () => {
  const d = dir({ 'ca.crt': 'CLUSTER CA', token: 'sa-token\n' });
  const c = loadInCluster(
    { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' },
    undefined,
    d,
  );
  assert.equal(c.server, 'https://[fd00::1]:443');
  assert.equal(c.options.ca, 'CLUSTER CA');
  assert.equal(c.token, 'sa-token');
  assert.throws(() => loadInCluster({}, undefined, d), /pass --kubeconfig or set KUBECONFIG/);
});

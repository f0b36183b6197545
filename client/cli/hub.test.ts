import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { dump } from 'js-yaml';
import { CliError } from './exit-codes.ts';
import { kubeconfigFiles, openHub } from './hub.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'cg-hub-test-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const kubeconfig = path.join(dir, 'hub.kubeconfig');
writeFileSync(
  kubeconfig,
  dump({
    'current-context': 'hub',
    clusters: [
      { name: 'hub', cluster: { server: 'https://127.0.0.1:6443' } },
      { name: 'second', cluster: { server: 'https://127.0.0.2:6443' } },
    ],
    users: [{ name: 'admin', user: { token: 'abc' } }],
    contexts: [
      { name: 'hub', context: { cluster: 'hub', user: 'admin' } },
      { name: 'second', context: { cluster: 'second', user: 'admin' } },
    ],
  }),
);

test('which kubeconfig: --kubeconfig, else the KUBECONFIG list, else ~/.kube/config', () => {
  assert.deepEqual(kubeconfigFiles({ kubeconfig: '/a' }, { KUBECONFIG: '/b' }), ['/a']);
  assert.deepEqual(kubeconfigFiles({}, { KUBECONFIG: `/b${path.delimiter}${path.delimiter}/c` }), [
    '/b',
    '/c',
  ]);
  const home = mkdtempSync(path.join(dir, 'home-'));
  assert.throws(
    () => kubeconfigFiles({}, { HOME: home }),
    (err: unknown) =>
      err instanceof CliError && err.exitCode === 2 && /no kubeconfig for the hub/.test(err.message),
  );
  // Once ~/.kube/config exists, it is used.
  const config = path.join(home, '.kube', 'config');
  mkdirSync(path.dirname(config));
  writeFileSync(config, '');
  assert.deepEqual(kubeconfigFiles({}, { HOME: home }), [config]);
  assert.deepEqual(kubeconfigFiles({}, { HOME: home, KUBECONFIG: '/b' }), ['/b'], 'KUBECONFIG first');
});

test('openHub: the current context, or the one --context names; its files kept for `kubeconfig`', () => {
  const hub = openHub({ kubeconfig });
  try {
    assert.equal(hub.connection.server, 'https://127.0.0.1:6443');
    assert.deepEqual(hub.files, [kubeconfig]);
    assert.equal(hub.context, undefined);
  } finally {
    hub.client.close();
  }
  const second = openHub({ kubeconfig, context: 'second' });
  try {
    assert.equal(second.connection.server, 'https://127.0.0.2:6443');
    assert.equal(second.context, 'second');
  } finally {
    second.client.close();
  }
});

test('openHub: a kubeconfig that cannot be used is a usage error (exit 2), with no stack to read', () => {
  assert.throws(
    () => openHub({ kubeconfig: path.join(dir, 'missing') }),
    (err: unknown) => err instanceof CliError && err.exitCode === 2 && /missing/.test(err.message),
  );
  assert.throws(
    () => openHub({ kubeconfig, context: 'nope' }),
    (err: unknown) =>
      err instanceof CliError && /no context "nope" \(it has: hub, second\)/.test(err.message),
  );
});

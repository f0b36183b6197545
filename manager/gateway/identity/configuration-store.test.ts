import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StatusError } from '../../../shared/kube/status.ts';
import {
  CONFIGURATION_REFERENCE_ANNOTATION,
  INLINE_CONFIGURATION_ANNOTATION,
  type ProxyConfiguration,
} from './configuration.ts';
import { ProxyConfigurationStore } from './configuration-store.ts';
import { validateSpec } from './validate.ts';

function configuration(origin: string, user: string): ProxyConfiguration {
  return validateSpec(
    {
      clientIdentityExchanger: {
        rules: [
          {
            name: `map-${user}`,
            type: 'StaticMappingIdentityExchanger',
            source: { user },
            target: { user: 'x' },
          },
        ],
      },
    },
    origin,
  );
}

const inline = (user: string) =>
  `spec:\n  clientIdentityExchanger:\n    rules:\n    - name: r\n      type: PrivilegedIdentityExchanger\n      source: {user: ${user}}\n`;

function cluster(name: string, annotations: Record<string, string> = {}) {
  return { name, annotations };
}

function refusal(fn: () => unknown): StatusError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof StatusError, String(err));
    return err;
  }
  assert.fail('expected a refusal');
}

function recorder() {
  const lines: Array<{ level: string; fields: object; message: string }> = [];
  return {
    lines,
    log: {
      info: (fields: object, message: string) => lines.push({ level: 'info', fields, message }),
      error: (fields: object, message: string) => lines.push({ level: 'error', fields, message }),
    },
  };
}

test('nothing configured: no configuration, and requests never wait for objects that are not watched', () => {
  const store = new ProxyConfigurationStore({ globalObjectName: '', watchesObjects: false });
  assert.ok(store.synced);
  assert.deepEqual(store.resolve(cluster('c1')), {});
});

test('until the objects are listed, requests get a 503 rather than a guess', () => {
  const store = new ProxyConfigurationStore({ globalObjectName: 'cluster-gateway', watchesObjects: true });
  assert.equal(refusal(() => store.resolve(cluster('c1'))).code, 503);
  store.markObjectsSynced();
  assert.deepEqual(store.resolve(cluster('c1')), {});
});

test('the global object, when it exists, replaces the file; deleting it brings the file back', () => {
  const file = configuration('file', 'from-file');
  const store = new ProxyConfigurationStore({
    file,
    globalObjectName: 'cluster-gateway',
    watchesObjects: true,
  });
  store.markObjectsSynced();
  assert.equal(store.resolve(cluster('c1')).global, file);
  const object = configuration('object', 'from-object');
  store.setObject('cluster-gateway', { lastValid: object });
  assert.equal(store.resolve(cluster('c1')).global, object);
  // Another object is not global.
  store.setObject('other', { lastValid: configuration('other', 'x') });
  assert.equal(store.resolve(cluster('c1')).global, object);
  store.setObject('cluster-gateway', undefined);
  assert.equal(store.resolve(cluster('c1')).global, file);
});

test('an invalid object keeps its last valid generation in force; never valid means a 500 naming it', () => {
  const store = new ProxyConfigurationStore({ globalObjectName: 'g', watchesObjects: true });
  store.markObjectsSynced();
  const valid = configuration('g@1', 'a');
  store.setObject('g', { lastValid: valid, error: 'spec.x: bad' });
  assert.equal(store.resolve(cluster('c1')).global, valid);
  store.setObject('g', { error: 'spec.clientIdentityExchanger.rules[0].url: must be https' });
  const err = refusal(() => store.resolve(cluster('c1')));
  assert.equal(err.code, 500);
  assert.match(
    err.message,
    /global ClusterGatewayProxyConfiguration "g" is invalid .*rules\[0\]\.url: must be https/,
  );
});

test("a cluster's reference annotation names an object; a missing or never-valid one refuses that cluster only", () => {
  const store = new ProxyConfigurationStore({ globalObjectName: 'g', watchesObjects: true });
  store.markObjectsSynced();
  const own = configuration('own', 'a');
  store.setObject('per-cluster', { lastValid: own });
  const c1 = cluster('c1', { [CONFIGURATION_REFERENCE_ANNOTATION]: 'per-cluster' });
  assert.equal(store.resolve(c1).cluster, own);
  const missing = refusal(() =>
    store.resolve(cluster('c2', { [CONFIGURATION_REFERENCE_ANNOTATION]: 'nope' })),
  );
  assert.equal(missing.code, 500);
  assert.match(missing.message, /"nope" .*cluster "c2".* does not exist/);
  assert.deepEqual(store.resolve(cluster('c3')), {});
  const both = refusal(() =>
    store.resolve(
      cluster('c4', {
        [CONFIGURATION_REFERENCE_ANNOTATION]: 'per-cluster',
        [INLINE_CONFIGURATION_ANNOTATION]: inline('a'),
      }),
    ),
  );
  assert.match(both.message, /both .* keep one/);
});

test("the original's inline annotation: parsed once per change, the last valid text stays in force", () => {
  const { lines, log } = recorder();
  const store = new ProxyConfigurationStore({ globalObjectName: '', watchesObjects: false, log });
  const first = store.resolve(cluster('c1', { [INLINE_CONFIGURATION_ANNOTATION]: inline('alice') })).cluster;
  assert.equal(first?.rules[0]?.source.user, 'alice');
  assert.match(
    first?.origin ?? '',
    /annotation cluster\.core\.oam\.dev\/cluster-gateway-proxy-configuration of cluster "c1"/,
  );
  // Same text again: the same object, nothing logged.
  assert.equal(
    store.resolve(cluster('c1', { [INLINE_CONFIGURATION_ANNOTATION]: inline('alice') })).cluster,
    first,
  );
  assert.equal(lines.length, 1);
  // Broken edit: the previous one stays, and the log says so once.
  const broken = {
    [INLINE_CONFIGURATION_ANNOTATION]: 'spec:\n  clientIdentityExchanger:\n    rules: [{name: r}]\n',
  };
  assert.equal(store.resolve(cluster('c1', broken)).cluster, first);
  assert.equal(store.resolve(cluster('c1', broken)).cluster, first);
  assert.equal(lines.length, 2);
  assert.equal(lines[1]?.level, 'error');
  assert.match(lines[1]!.message, /previous one stays in force/);
  // A fixed edit takes over, with a new revision for the exchange cache.
  const second = store.resolve(cluster('c1', { [INLINE_CONFIGURATION_ANNOTATION]: inline('bob') })).cluster;
  assert.equal(second?.rules[0]?.source.user, 'bob');
  assert.notEqual(second?.revision, first?.revision);
  // Removed: no cluster configuration.
  assert.equal(store.resolve(cluster('c1')).cluster, undefined);
  // A new cluster whose annotation was never valid is refused.
  const never = refusal(() => store.resolve(cluster('c2', broken)));
  assert.equal(never.code, 500);
  assert.match(never.message, /cluster "c2" is invalid .*rules\[0\]\.type: required/);
  store.forgetCluster('c2');
});

test('what the gateway ignored on a ManagedCluster is logged once per change', () => {
  const lines: { message: string; fields: object }[] = [];
  const log = {
    info: () => {},
    error: () => {},
    warn: (fields: object, message: string) => lines.push({ fields, message }),
  };
  const store = new ProxyConfigurationStore({ globalObjectName: '', watchesObjects: false, log });
  const notice = 'gateway.cluster.core.oam.dev/ignored-managedcluster-settings';
  const cluster = (text?: string) => ({
    name: 'c1',
    annotations: text ? { [notice]: text } : ({} as Record<string, string>),
  });
  store.observeCluster(cluster('annotation X is ignored'));
  store.observeCluster(cluster('annotation X is ignored'));
  assert.deepEqual(lines, [
    {
      fields: { cluster: 'c1', ignored: 'annotation X is ignored' },
      message: 'settings on a ManagedCluster ignored',
    },
  ]);
  store.observeCluster(cluster());
  store.observeCluster(cluster('annotation X is ignored'));
  assert.equal(lines.length, 2, 'logged again once it comes back');
});

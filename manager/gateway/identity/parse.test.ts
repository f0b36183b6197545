import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { InvalidConfigurationError } from './configuration.ts';
import { loadConfigurationFile, parseConfiguration } from './parse.ts';

// The Go original's examples/client-identity-exchanger/config.yaml, byte for byte.
const originalExample = `apiVersion: cluster.core.oam.dev/v1alpha1
kind: ClusterGatewayProxyConfiguration
spec:
  clientIdentityExchanger:
    rules:
      - name: super-user
        source:
          group: sudoer
        type: PrivilegedIdentityExchanger
      - name: mapping
        source:
          user: user-12345
          cluster: cluster-34567
        target:
          user: user-34567
        type: StaticMappingIdentityExchanger`;

function refused(text: string): InvalidConfigurationError {
  try {
    parseConfiguration(text, 'annotation');
  } catch (err) {
    assert.ok(err instanceof InvalidConfigurationError, String(err));
    return err;
  }
  assert.fail('expected a refusal');
}

test("the original's example file is accepted unchanged", () => {
  const config = parseConfiguration(originalExample, 'file');
  assert.deepEqual(
    config.rules.map((r) => [r.name, r.type]),
    [
      ['super-user', 'PrivilegedIdentityExchanger'],
      ['mapping', 'StaticMappingIdentityExchanger'],
    ],
  );
  assert.equal(config.origin, 'file');
});

test('the CRD apiVersion, JSON, and a document without apiVersion or kind are accepted too', () => {
  const crd = originalExample
    .replace('cluster.core.oam.dev/v1alpha1', 'gateway.cluster.core.oam.dev/v1alpha1')
    .replace(
      'kind: ClusterGatewayProxyConfiguration',
      'kind: ClusterGatewayProxyConfiguration\nmetadata:\n  name: x',
    );
  assert.equal(parseConfiguration(crd, 'crd').rules.length, 2);
  const json = JSON.stringify({
    spec: {
      clientIdentityExchanger: {
        rules: [{ name: 'a', type: 'PrivilegedIdentityExchanger', source: { user: 'u' } }],
      },
    },
  });
  assert.equal(parseConfiguration(json, 'json').rules[0]!.name, 'a');
});

test('YAML 1.1 scalars as Go reads them: yes is true', () => {
  assert.equal(parseConfiguration('spec:\n  authorizeProxySubpath: yes\n', 'x').authorizeProxySubpath, true);
});

test('wrong apiVersion, kind or top-level fields, and broken YAML, are refused with the field', () => {
  const wrong = refused('apiVersion: v1\nkind: ConfigMap\ndata: {}\n');
  assert.deepEqual(
    wrong.problems.map((p) => p.field),
    ['data', 'apiVersion', 'kind'],
  );
  assert.match(refused('spec: [').problems[0]!.message, /not valid YAML or JSON/);
  assert.match(refused('just a string').problems[0]!.message, /must be a ClusterGatewayProxyConfiguration/);
  assert.match(refused('x'.repeat(300 * 1024)).problems[0]!.message, /larger than/);
  // Problems in the spec come with their path, and the message lists them all.
  const err = refused(originalExample.replace('group: sudoer', 'groupPattern: "("'));
  assert.equal(err.problems[0]!.field, 'spec.clientIdentityExchanger.rules[0].source.groupPattern');
  assert.match(err.message, /^annotation is invalid: spec\.clientIdentityExchanger\.rules\[0\]/);
});

test('the --cluster-gateway-proxy-config file is read from disk, and a missing one names the flag', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxy-config-'));
  const file = path.join(dir, 'config.yaml');
  writeFileSync(file, originalExample);
  const config = await loadConfigurationFile(file);
  assert.equal(config.rules.length, 2);
  assert.match(config.origin, /--cluster-gateway-proxy-config/);
  await assert.rejects(
    loadConfigurationFile(path.join(dir, 'missing.yaml')),
    /cannot read --cluster-gateway-proxy-config/,
  );
});

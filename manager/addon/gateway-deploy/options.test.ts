import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { OptionsError } from '../../../shared/cli-flags.ts';
import { parseOptions } from '../options.ts';
import { parseGatewayOptions } from './options.ts';

const parse = (values: Record<string, string>) => parseGatewayOptions(values, 'img:1');

describe('gateway deploy options', () => {
  test('defaults: off, two replicas, the agent image, a ClusterIP Service, no owner', () => {
    const o = parse({});
    assert.equal(o.enabled, false);
    assert.equal(o.name, 'cluster-gateway');
    assert.equal(o.image, 'img:1');
    assert.equal(o.replicas, 2);
    assert.equal(o.port, 9443);
    assert.equal(o.hostPort, 0);
    assert.equal(o.serviceExternalName, '');
    assert.equal(o.credentialNamespace, 'open-cluster-management-credentials');
    assert.deepEqual(o.args, []);
    assert.equal(o.ownerClusterRole, '');
  });

  test('the manager parses them with its own flags', () => {
    const o = parseOptions(
      ['--deploy-gateway', '--gateway-replicas=3', '--gateway-args=["--log-level=debug"]'],
      {},
      () => undefined,
    );
    assert.ok(o !== 'help');
    assert.equal(o.gateway.enabled, true);
    assert.equal(o.gateway.replicas, 3);
    assert.deepEqual(o.gateway.args, ['--log-level=debug']);
    assert.equal(o.gateway.image, o.agentImage);
  });

  test('structured settings are JSON of the right shape', () => {
    const o = parse({
      'gateway-resources': '{"limits":{"memory":"256Mi"}}',
      'gateway-node-selector': '{"node-role.kubernetes.io/control-plane":""}',
      'gateway-tolerations': '[{"key":"k","operator":"Exists"}]',
      'gateway-image-pull-secrets': 'a, b',
    });
    assert.deepEqual(o.resources, { limits: { memory: '256Mi' } });
    assert.deepEqual(o.tolerations, [{ key: 'k', operator: 'Exists' }]);
    assert.deepEqual(o.imagePullSecrets, ['a', 'b']);
  });

  const refused: [string, Record<string, string>, RegExp][] = [
    [
      'a flag the manager sets',
      { 'gateway-args': '["--secure-port=1"]' },
      /--secure-port is set by the manager/,
    ],
    ['a non-flag argument', { 'gateway-args': '["debug"]' }, /item 0 .* is not a --flag/],
    ['args that are not JSON', { 'gateway-args': '--log-level=debug' }, /--gateway-args: not JSON/],
    ['resources as an array', { 'gateway-resources': '[]' }, /must be a JSON object/],
    ['a node selector with a number', { 'gateway-node-selector': '{"a":1}' }, /"a" must be a string/],
    ['an unknown pull policy', { 'gateway-image-pull-policy': 'Sometimes' }, /not one of Always/],
    ['zero replicas', { 'gateway-replicas': '0' }, /--gateway-replicas/],
    ['an upper-case name', { 'gateway-name': 'Gateway' }, /lowercase DNS label/],
    ['a bad credential namespace', { 'gateway-credential-namespace': 'a_b' }, /not a namespace name/],
    ['a bad external name', { 'gateway-service-external-name': 'http://x' }, /not a DNS name/],
    [
      'a certificate outliving its CA',
      { 'gateway-ca-validity': '86400', 'gateway-certificate-validity': '172800' },
      /must not be longer than --gateway-ca-validity/,
    ],
    [
      'a validity so short it would renew at once',
      { 'gateway-ca-validity': '3600', 'gateway-certificate-validity': '3600' },
      /--gateway-ca-validity: "3600" is not a whole number between 7200/,
    ],
  ];
  for (const [what, values, message] of refused) {
    test(`refused with a message that says what to fix: ${what}`, () => {
      assert.throws(
        () => parse(values),
        (err: unknown) => err instanceof OptionsError && message.test(err.message),
      );
    });
  }
});

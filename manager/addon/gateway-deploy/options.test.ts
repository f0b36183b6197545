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

  test("--gateway-args the gateway's own parser accepts pass unchanged (the chart's defaults among them)", () => {
    const chartDefaults = [
      '--log-level=info',
      '--agent-tunnels=true',
      '--ocm-integration=true',
      '--feature-gates=HealthinessCheck=true',
      '--health-check-interval=10',
      '--reject-unhealthy=true',
    ];
    assert.deepEqual(parse({ 'gateway-args': JSON.stringify(chartDefaults) }).args, chartDefaults);
    const more = ['--authorize-proxy-subpath', '--enable-exec-credentials=true', '--user-agent=a b'];
    assert.deepEqual(parse({ 'gateway-args': JSON.stringify(more) }).args, more);
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

  test('certificates: test validities down to a minute, a maintenance window in cron', () => {
    const o = parse({
      'gateway-ca-validity': '120',
      'gateway-certificate-validity': '60',
      'gateway-rotation-schedule': ' 0 2 * * 6 ',
    });
    assert.equal(o.caValiditySeconds, 120);
    assert.equal(o.certificateValiditySeconds, 60);
    assert.equal(o.rotationSchedule, '0 2 * * 6');
    assert.equal(parse({}).rotationSchedule, '', 'default: rotate as soon as due');
  });

  const refused: [string, Record<string, string>, RegExp][] = [
    [
      'a flag the manager sets',
      { 'gateway-args': '["--secure-port=1"]' },
      /--secure-port is set by the manager/,
    ],
    [
      "the replicas' shared verdict key, which one of the user's would split",
      { 'gateway-args': '["--probe-verdict-key-file=/tmp/mine"]' },
      /--probe-verdict-key-file is set by the manager/,
    ],
    ['a non-flag argument', { 'gateway-args': '["debug"]' }, /item 0 .* is not a --flag/],
    [
      'a misspelt gateway flag',
      { 'gateway-args': '["--log-level=debug","--log-levle=debug"]' },
      /^--gateway-args: --log-levle is not a flag of the gateway \(node manager\/gateway\/main\.ts --help lists them; did you mean --log-level\?\)$/,
    ],
    [
      'a flag the gateway does not have',
      { 'gateway-args': '["--kube-api-qps=50"]' },
      /^--gateway-args: --kube-api-qps is not a flag of the gateway/,
    ],
    [
      'a gateway flag with a bad value',
      { 'gateway-args': '["--log-level=loud"]' },
      /^--gateway-args: --log-level: "loud" is not one of trace/,
    ],
    [
      'a gateway number out of range',
      { 'gateway-args': '["--health-check-interval=0"]' },
      /^--gateway-args: --health-check-interval: "0" is not a whole number between 1/,
    ],
    [
      'an unknown feature gate',
      { 'gateway-args': '["--feature-gates=HealthinessChek=true"]' },
      /^--gateway-args: --feature-gates: unknown gate "HealthinessChek"/,
    ],
    [
      'a gateway string flag without its value',
      { 'gateway-args': '["--user-agent"]' },
      /^--gateway-args: .*--user-agent.*argument missing/,
    ],
    ['--help', { 'gateway-args': '["--help"]' }, /^--gateway-args: --help would make the gateway print/],
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
      'a validity under a minute',
      { 'gateway-ca-validity': '59', 'gateway-certificate-validity': '59' },
      /--gateway-ca-validity: "59" is not a whole number between 60/,
    ],
    [
      'a serving certificate outliving a test CA',
      { 'gateway-ca-validity': '60', 'gateway-certificate-validity': '120' },
      /--gateway-certificate-validity \(120 s\) must not be longer than --gateway-ca-validity \(60 s\)/,
    ],
    [
      'a rotation schedule that is not cron',
      { 'gateway-rotation-schedule': 'saturdays' },
      /--gateway-rotation-schedule: "saturdays" is not a cron expression: expected 5 or 6 fields/,
    ],
    [
      'a rotation schedule with a field out of range',
      { 'gateway-rotation-schedule': '0 25 * * *' },
      /--gateway-rotation-schedule: .*25 is a invalid expression for hour/,
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

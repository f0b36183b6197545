import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type AddonManagerOptions,
  helpText,
  OptionsError,
  parseOptions,
  parsePlacements,
} from './options.ts';

const parse = (args: string[], env: Record<string, string> = {}) =>
  parseOptions(args, env, () => undefined) as AddonManagerOptions;

describe('addon manager options', () => {
  test('defaults', () => {
    const o = parse([]);
    assert.equal(o.addonName, 'cluster-gateway');
    assert.equal(o.agentInstallNamespace, 'open-cluster-management-agent-addon');
    assert.deepEqual(o.installPlacements, []);
    assert.equal(o.namespace, 'cluster-gateway-system');
    assert.equal(o.healthMode, 'Customized');
    assert.equal(o.leaderElect, true);
    assert.match(o.agentImage, /^ghcr\.io\/oam-dev\/cluster-gateway-ts:/);
    // A standby takes over within 15 s of a crash: lease duration plus one (jittered) retry.
    assert.ok(o.leaseDurationSeconds + o.retryPeriodSeconds * 1.2 <= 15);
  });

  test('namespace: flag, then POD_NAMESPACE, then the service account file', () => {
    assert.equal(parse(['--namespace=a'], { POD_NAMESPACE: 'b' }).namespace, 'a');
    assert.equal(parse([], { POD_NAMESPACE: 'b' }).namespace, 'b');
    assert.equal((parseOptions([], {}, () => 'c') as AddonManagerOptions).namespace, 'c');
  });

  test('webhook target: the Service by default, or a URL for a manager outside the cluster', () => {
    assert.deepEqual(parse([]).webhookTarget, { service: 'cluster-gateway-addon-manager' });
    assert.deepEqual(parse(['--webhook-url=https://127.0.0.1:9443/']).webhookTarget, {
      url: 'https://127.0.0.1:9443',
    });
  });

  test('placements switch the install strategy', () => {
    assert.deepEqual(parse(['--install-placements=ns1/all, ns2/edge']).installPlacements, [
      { namespace: 'ns1', name: 'all' },
      { namespace: 'ns2', name: 'edge' },
    ]);
    assert.throws(() => parsePlacements('just-a-name'), /namespace\/name/);
    assert.throws(() => parsePlacements('a/b/c'), /namespace\/name/);
  });

  test('bad values say what to fix', () => {
    const cases: [string[], RegExp][] = [
      [['--addon-name=Cluster_Gateway'], /--addon-name: .* lowercase DNS label/],
      [['--health-mode=Both'], /--health-mode: "Both" is not Customized or Lease/],
      [['--log-level=loud'], /--log-level/],
      [['--agent-install-namespace=Not OK'], /not a namespace name/],
      [['--tls-cert-file=/x'], /must be given together/],
      [
        ['--leader-election-lease-duration=5', '--leader-election-renew-deadline=5'],
        /renew-deadline must be shorter/,
      ],
      [['--leader-election-retry-period=8'], /retry-period must be shorter/],
      [['--http-port=70000'], /--http-port/],
      [['--workers=0'], /--workers/],
      [['--unknown'], /Unknown option/],
      [['--leader-elect=maybe'], /not true or false/],
      [['--webhook-url=http://127.0.0.1:9443'], /--webhook-url: .* must be https/],
      [['--webhook-url=https://127.0.0.1:9443/mutate'], /must not have a path/],
      [['--webhook-url=127.0.0.1:9443'], /must be https|is not a URL/],
      [['--webhook-service=Not_A_Service'], /--webhook-service/],
    ];
    for (const [args, message] of cases)
      assert.throws(
        () => parse(args),
        (err: Error) => err instanceof OptionsError && message.test(err.message),
        args.join(' '),
      );
  });

  test('--leader-elect alone means true; --help', () => {
    assert.equal(parse(['--leader-elect']).leaderElect, true);
    assert.equal(parse(['--leader-elect=false']).leaderElect, false);
    assert.equal(
      parseOptions(['--help'], {}, () => undefined),
      'help',
    );
    assert.match(helpText(), /--install-placements/);
  });
});

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import ts from 'typescript';
import {
  type AddonManagerOptions,
  helpText,
  OptionsError,
  parseOptions,
  parsePlacements,
  renderManagerArgs,
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
      [['--gateway-args=["--log-levle=debug"]'], /^--gateway-args: --log-levle is not a flag of the gateway/],
      [['--gateway-args=["--log-level=loud"]'], /^--gateway-args: --log-level: "loud"/],
      // Checked only with tunnel sharing on (the manager's --tunnel-peer-* flags): the whole command line is.
      [
        ['--gateway-args=["--tunnel-lease-duration=1"]'],
        /^--gateway-args: --tunnel-lease-duration: "1" is not a whole number between 3 and 300/,
      ],
    ];
    for (const [args, message] of cases)
      assert.throws(
        () => parse(args),
        (err: Error) => err instanceof OptionsError && message.test(err.message),
        args.join(' '),
      );
  });

  test("--gateway-args: the gateway's whole command line, as its pods would get it, passes the gateway's checks", () => {
    assert.deepEqual(parse(['--gateway-args=["--tunnel-lease-duration=30"]']).gateway.args, [
      '--tunnel-lease-duration=30',
    ]);
    // Without tunnels there is no tunnel sharing, and the gateway does not read the duration.
    assert.deepEqual(
      parse(['--gateway-args=["--agent-tunnels=false","--tunnel-lease-duration=1"]']).gateway.args,
      ['--agent-tunnels=false', '--tunnel-lease-duration=1'],
    );
  });

  test("renderManagerArgs writes the manager's own flags, which it parses back", () => {
    const args = renderManagerArgs({
      'deploy-gateway': true,
      'gateway-replicas': 3,
      'gateway-args': JSON.stringify(['--log-level=debug']),
    });
    assert.deepEqual(args, [
      '--deploy-gateway=true',
      '--gateway-replicas=3',
      '--gateway-args=["--log-level=debug"]',
    ]);
    const o = parse(args);
    assert.deepEqual(
      [o.gateway.enabled, o.gateway.replicas, o.gateway.args],
      [true, 3, ['--log-level=debug']],
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

/** Every module `entry` (repository-relative) loads, transitively: repository files and other specifiers. */
function moduleClosure(entry: string): { files: string[]; others: string[] } {
  const root = path.resolve(import.meta.dirname, '..', '..');
  const files = new Set<string>();
  const others = new Set<string>();
  const visit = (file: string): void => {
    if (files.has(file)) return;
    files.add(file);
    const { importedFiles } = ts.preProcessFile(readFileSync(path.join(root, file), 'utf8'), true, true);
    for (const { fileName } of importedFiles) {
      if (fileName.startsWith('.')) visit(path.posix.join(path.posix.dirname(file), fileName));
      else others.add(fileName);
    }
  };
  visit(entry);
  return { files: [...files], others: [...others] };
}

test('of the gateway and the agent, the manager loads their flag tables only: no server, no npm package', () => {
  const network = ['node:http', 'node:https', 'node:http2', 'node:net', 'node:tls', 'node:child_process'];
  for (const entry of ['manager/gateway/options.ts', 'agent/options.ts']) {
    const { files, others } = moduleClosure(entry);
    assert.deepEqual(
      others.filter((m) => !m.startsWith('node:') || network.includes(m)),
      [],
      `${entry} loads only Node built-ins without network`,
    );
    assert.ok(files.length <= 3, `${entry} loads ${files.join(', ')}`);
  }
});

describe('agent pod settings', () => {
  test('--agent-* reach agentPod; defaults: none', () => {
    assert.deepEqual(parse([]).agentPod, {
      affinity: {},
      priorityClassName: '',
      podAnnotations: {},
      podLabels: {},
    });
    const o = parse([
      '--agent-affinity={"nodeAffinity":{}}',
      '--agent-priority-class-name=agent-critical',
      '--agent-pod-annotations={"a":"b"}',
      '--agent-pod-labels={"example.com/team":"platform"}',
    ]);
    assert.deepEqual(o.agentPod, {
      affinity: { nodeAffinity: {} },
      priorityClassName: 'agent-critical',
      podAnnotations: { a: 'b' },
      podLabels: { 'example.com/team': 'platform' },
    });
    assert.throws(() => parse(['--agent-pod-labels=[]']), /--agent-pod-labels: must be a JSON object/);
    assert.match(helpText(), /--agent-priority-class-name/);
  });
});

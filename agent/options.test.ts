import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  defaultHubKubeconfig,
  defaultInstallNamespace,
  type Environment,
  OptionsError,
  parseOptions,
  renderAgentArgs,
} from './options.ts';

const none: Environment = { env: {}, readFile: () => undefined };

test('defaults: OCM mount path, default install namespace, 5 s renewals with 20 % jitter, tunnel on', () => {
  assert.deepEqual(parseOptions(['--cluster-name=cluster1'], none), {
    clusterName: 'cluster1',
    addonName: 'cluster-gateway',
    installNamespace: defaultInstallNamespace,
    hubKubeconfig: defaultHubKubeconfig,
    renewIntervalSeconds: 5,
    renewJitter: 0.2,
    bindAddress: '0.0.0.0',
    metricsBindAddress: '127.0.0.1',
    metricsPort: 8081,
    port: 8080,
    logLevel: 'info',
    tunnel: true,
    tunnelServer: '',
    tunnelCaFile: '',
    trustModel: 'hub-credential',
    hubCredentialNamespace: '',
    hubCredentialServiceAccount: '',
    hubCredentialTokenSeconds: 86400,
    hubCredentialRotateSeconds: 43200,
    hubCredentialCheckSeconds: 60,
  });
  const off = parseOptions(['--cluster-name=cluster1', '--tunnel=false'], none) as { tunnel: boolean };
  assert.equal(off.tunnel, false);
});

test('trust models: the hub credential Secret needs its ServiceAccount in the hub-credential model only', () => {
  const opts = (argv: string[]) => parseOptions(['--cluster-name=c1', ...argv], none);
  assert.throws(
    () => opts(['--trust-model=none']),
    /--trust-model: "none" is not hub-credential or no-credential/,
  );
  assert.throws(() => opts(['--hub-credential-namespace=creds']), /needs --hub-credential-service-account/);
  const hub = opts([
    '--hub-credential-namespace=creds',
    '--hub-credential-service-account=proxy',
    '--hub-credential-token-seconds=3600',
  ]) as { hubCredentialRotateSeconds: number };
  assert.equal(hub.hubCredentialRotateSeconds, 1800, 'half the lifetime by default');
  const marker = opts(['--trust-model=no-credential', '--hub-credential-namespace=creds']) as {
    trustModel: string;
  };
  assert.equal(marker.trustModel, 'no-credential');
  assert.throws(() => opts(['--hub-credential-token-seconds=60']), /between 600 and/);
  assert.throws(() => opts(['--hub-credential-namespace=Not_A_Namespace']), /not a namespace name/);
  assert.throws(
    () => opts(['--tunnel-server=http://gw:443']),
    /--tunnel-server: "http:\/\/gw:443" is not an https:\/\/ URL/,
  );
});

test('install namespace: flag, then POD_NAMESPACE, then the ServiceAccount namespace file', () => {
  const file = { env: {}, readFile: () => 'from-file\n' };
  const env = { env: { POD_NAMESPACE: 'from-env' }, readFile: () => 'from-file\n' };
  const opts = (argv: string[], e: Environment) => parseOptions(['--cluster-name=c1', ...argv], e);
  assert.equal((opts([], file) as { installNamespace: string }).installNamespace, 'from-file');
  assert.equal((opts([], env) as { installNamespace: string }).installNamespace, 'from-env');
  assert.equal(
    (opts(['--install-namespace=from-flag'], env) as { installNamespace: string }).installNamespace,
    'from-flag',
  );
});

test('bad input names the flag and what to fix', () => {
  const cases: [string[], RegExp][] = [
    [[], /--cluster-name is required/],
    [['--cluster-name=Bad_Name'], /--cluster-name: "Bad_Name"/],
    [['--cluster-name=c1', '--renew-interval=0'], /--renew-interval: "0" is not a number between 0.1/],
    [['--cluster-name=c1', '--renew-interval='], /--renew-interval/],
    [['--cluster-name=c1', '--renew-jitter=-1'], /--renew-jitter/],
    [['--cluster-name=c1', '--port=70000'], /--port/],
    [['--cluster-name=c1', '--log-level=loud'], /--log-level/],
    [['--cluster-name=c1', '--unknown=1'], /Unknown option '--unknown'[\s\S]*--help/],
  ];
  for (const [argv, message] of cases) {
    assert.throws(
      () => parseOptions(argv, none),
      (err: Error) => {
        assert.ok(err instanceof OptionsError);
        assert.match(err.message, message);
        return true;
      },
    );
  }
});

test('--help', () => {
  assert.equal(parseOptions(['--help'], none), 'help');
});

test('renderAgentArgs writes what parseOptions reads; a flag the agent lacks does not compile', () => {
  const args = renderAgentArgs({
    'cluster-name': 'c1',
    port: 8081,
    tunnel: false,
    'trust-model': 'no-credential',
    'hub-credential-namespace': 'creds',
  });
  assert.deepEqual(args, [
    '--cluster-name=c1',
    '--port=8081',
    '--tunnel=false',
    '--trust-model=no-credential',
    '--hub-credential-namespace=creds',
  ]);
  const o = parseOptions(args, none) as { port: number; tunnel: boolean; trustModel: string };
  assert.deepEqual([o.port, o.tunnel, o.trustModel], [8081, false, 'no-credential']);
  // @ts-expect-error: misspelt.
  assert.throws(() => renderAgentArgs({ 'cluster-nmae': 'c1' }), /--cluster-nmae is not a flag/);
});

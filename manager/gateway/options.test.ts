import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import {
  checkGatewayArgs,
  type GatewayOptions,
  helpText,
  OptionsError,
  parseOptions,
  renderGatewayArgs,
} from './options.ts';

function parsed(argv: string[]): GatewayOptions {
  const o = parseOptions(argv);
  if (o === 'help') throw new Error('unexpected help');
  return o;
}

test('defaults match the original where it has the setting', () => {
  const o = parsed([]);
  assert.equal(o.securePort, 9443);
  assert.equal(o.secretNamespace, 'open-cluster-management-credentials');
  assert.equal(o.ocmIntegration, true);
  assert.equal(o.enableExecCredentials, false);
  assert.deepEqual(o.featureGates, { HealthinessCheck: true, ClientIdentityPenetration: false });
});

test('the original feature gates are accepted', () => {
  const o = parsed([
    '--feature-gates=HealthinessCheck=false,SecretCache=true,ClientIdentityPenetration=true',
  ]);
  assert.deepEqual(o.featureGates, { HealthinessCheck: false, ClientIdentityPenetration: true });
});

test('bad input gets an error that says what to fix', () => {
  assert.throws(
    () => parseOptions(['--secure-port=http']),
    (e: Error) => e instanceof OptionsError && /secure-port/.test(e.message),
  );
  assert.throws(() => parseOptions(['--feature-gates=Nope=true']), /unknown gate "Nope"/);
  assert.throws(() => parseOptions(['--tls-cert-file=a']), /must be given together/);
  assert.throws(() => parseOptions(['--no-such-flag']), /--help/);
  assert.throws(() => parseOptions(['--log-level=loud']), /log-level/);
  // An empty number is a mistake, not 0 (which for --secure-port would mean any free port).
  assert.throws(() => parseOptions(['--secure-port=']), /--secure-port: "" is not a whole number/);
});

test('--help documents every flag', () => {
  assert.equal(parseOptions(['--help']), 'help');
  for (const flag of ['--secure-port', '--secret-namespace', '--feature-gates', '--reject-unhealthy']) {
    assert.ok(helpText().includes(flag), flag);
  }
});

test('--enable-exec-credentials is off by default and its help warns about Secret writers', () => {
  assert.equal(parsed(['--enable-exec-credentials']).enableExecCredentials, true);
  assert.equal(parsed(['--enable-exec-credentials=true']).enableExecCredentials, true);
  assert.throws(() => parseOptions(['--enable-exec-credentials=yes']), /enable-exec-credentials/);
  const help =
    helpText()
      .split('\n')
      .find((line) => line.includes('--enable-exec-credentials')) ?? '';
  assert.match(help, /anyone who can write Secrets/);
  assert.match(help, /default false/);
});

test('--insecure-skip-tls-verify-when-no-ca is off by default (no CA means the system trust store)', () => {
  assert.equal(parsed([]).insecureSkipTlsVerifyWhenNoCa, false);
  assert.equal(parsed(['--insecure-skip-tls-verify-when-no-ca']).insecureSkipTlsVerifyWhenNoCa, true);
  assert.throws(
    () => parseOptions(['--insecure-skip-tls-verify-when-no-ca=maybe']),
    /insecure-skip-tls-verify-when-no-ca/,
  );
  assert.match(helpText(), /--insecure-skip-tls-verify-when-no-ca.*system trust store.*default false/);
});

test('proxy configuration flags: the original file, the global object, watching, the exchange cache', () => {
  const defaults = parsed([]);
  assert.equal(defaults.clusterGatewayProxyConfig, undefined);
  assert.equal(defaults.proxyConfigurationName, 'cluster-gateway');
  assert.equal(defaults.watchProxyConfigurations, true);
  assert.equal(defaults.identityExchangeCacheSize, 4096);
  const set = parsed([
    '--cluster-gateway-proxy-config=/etc/gateway/config.yaml',
    '--proxy-configuration-name=',
    '--watch-proxy-configurations=false',
    '--identity-exchange-cache-size=10',
  ]);
  assert.equal(set.clusterGatewayProxyConfig, '/etc/gateway/config.yaml');
  assert.equal(set.proxyConfigurationName, '');
  assert.equal(set.watchProxyConfigurations, false);
  assert.equal(set.identityExchangeCacheSize, 10);
  assert.throws(() => parseOptions(['--proxy-configuration-name=Not_A_Name']), /not a valid object name/);
  assert.throws(() => parseOptions(['--identity-exchange-cache-size=0']), /identity-exchange-cache-size/);
});

test('--health-check-max-rate bounds probes per second (default 25)', () => {
  assert.equal(parsed([]).healthCheckMaxRate, 25);
  assert.equal(parsed(['--health-check-max-rate=200']).healthCheckMaxRate, 200);
  assert.throws(() => parseOptions(['--health-check-max-rate=0']), /health-check-max-rate/);
});

test('--upstream-http2 is on by default; false keeps every request on HTTP/1.1', () => {
  assert.equal(parsed([]).upstreamHttp2, true);
  assert.equal(parsed(['--upstream-http2=false']).upstreamHttp2, false);
  assert.throws(() => parseOptions(['--upstream-http2=sometimes']), /upstream-http2/);
});

test('renderGatewayArgs writes what parseOptions reads; a flag the gateway lacks does not compile', () => {
  const args = renderGatewayArgs({ 'secure-port': 8443, 'reject-unhealthy': true, 'log-level': 'debug' });
  assert.deepEqual(args, ['--secure-port=8443', '--reject-unhealthy=true', '--log-level=debug']);
  const o = parsed(args);
  assert.equal(o.securePort, 8443);
  assert.equal(o.rejectUnhealthy, true);
  assert.equal(o.logLevel, 'debug');
  // @ts-expect-error: misspelt.
  assert.throws(() => renderGatewayArgs({ 'log-levle': 'debug' }), /--log-levle is not a flag/);
});

test('checkGatewayArgs: what the gateway would run with, or the flag to fix', () => {
  assert.equal(checkGatewayArgs(['--log-level=debug', '--reject-unhealthy']).rejectUnhealthy, true);
  assert.throws(
    () => checkGatewayArgs(['--log-levle=debug']),
    (e: Error) =>
      e instanceof OptionsError &&
      e.message ===
        '--log-levle is not a flag of the gateway (node manager/gateway/main.ts --help lists them; did you mean --log-level?)',
  );
  assert.throws(
    () => checkGatewayArgs(['--no-such-thing']),
    /: --no-such-thing is not a flag of the gateway \(/,
  );
  assert.throws(() => checkGatewayArgs(['--log-level=loud']), /--log-level: "loud" is not one of/);
  assert.throws(() => checkGatewayArgs(['--health-check-interval=0']), /--health-check-interval: "0"/);
  assert.throws(
    () => checkGatewayArgs(['--log-level']),
    (e: Error) => /argument missing/.test(e.message) && !/Run with --help/.test(e.message),
  );
  assert.throws(() => checkGatewayArgs(['--help']), /--help would make the gateway print its help and exit/);
});

test('--probe-verdict-key-file: read at start, its bytes the verdict key; unreadable or short, an error naming the flag', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'verdict-key-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const good = path.join(dir, 'good');
  writeFileSync(good, 'a'.repeat(31) + '\u00e9'); // 33 bytes, not 32 characters: bytes are what count
  const o = parsed([`--probe-verdict-key-file=${good}`]);
  assert.equal(o.probeVerdictKeyFile, good);
  assert.deepEqual(o.probeVerdictKey, new Uint8Array(Buffer.from(`${'a'.repeat(31)}\u00e9`)));
  // Without the flag: no key, so no verdict is recorded on ManagedClusters (main.ts says so at start).
  assert.equal(parsed([]).probeVerdictKey, undefined);

  const short = path.join(dir, 'short');
  writeFileSync(short, 'x'.repeat(31));
  assert.throws(
    () => parseOptions([`--probe-verdict-key-file=${short}`]),
    (e: Error) =>
      e instanceof OptionsError && /--probe-verdict-key-file: .*31 bytes.*32 at least/.test(e.message),
  );
  assert.throws(
    () => parseOptions([`--probe-verdict-key-file=${path.join(dir, 'missing')}`]),
    (e: Error) =>
      e instanceof OptionsError && /--probe-verdict-key-file: cannot read .*missing/.test(e.message),
  );
  // The manager checks the gateway's command line where the file does not exist: no read there.
  assert.equal(
    checkGatewayArgs([`--probe-verdict-key-file=${path.join(dir, 'missing')}`]).probeVerdictKey,
    undefined,
  );
  const help =
    helpText()
      .split('\n')
      .find((line) => line.includes('--probe-verdict-key-file')) ?? '';
  assert.match(help, /ManagedClusters/);
  assert.match(help, /Every replica must get the same file/);
});

test('--upstream-passthrough is on by default; false sends reads the way of every other request', () => {
  assert.equal(parsed([]).upstreamPassthrough, true);
  assert.equal(parsed(['--upstream-passthrough=false']).upstreamPassthrough, false);
  assert.throws(() => parseOptions(['--upstream-passthrough=maybe']), /upstream-passthrough/);
});

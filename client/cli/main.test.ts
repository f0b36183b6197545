import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, test } from 'node:test';
import { dump } from 'js-yaml';
import { invokedName, main } from './main.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'cg-main-test-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A hub nobody listens on (port 1 on loopback refuses at once). */
const unreachable = path.join(dir, 'unreachable.kubeconfig');
writeFileSync(
  unreachable,
  dump({
    'current-context': 'hub',
    clusters: [{ name: 'hub', cluster: { server: 'https://127.0.0.1:1' } }],
    users: [{ name: 'admin', user: { token: 'abc' } }],
    contexts: [{ name: 'hub', context: { cluster: 'hub', user: 'admin' } }],
  }),
);

/** A stream that keeps what is written, as a pipe would (not a terminal). */
class Sink extends Writable {
  text = '';
  override _write(chunk: Buffer, _enc: string, done: () => void) {
    this.text += chunk.toString();
    done();
  }
}

/** Runs main() with its stdout and stderr captured. */
async function run(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = new Sink();
  const stderr = new Sink();
  const code = await main(['node', '/usr/local/bin/cluster-gateway', ...args], { stdout, stderr });
  return { code, stdout: stdout.text, stderr: stderr.text };
}

test('the program is named as it was invoked: kubectl-cluster_gateway is `kubectl cluster-gateway`', () => {
  assert.equal(invokedName('/usr/local/bin/cluster-gateway'), 'cluster-gateway');
  assert.equal(invokedName('/usr/local/bin/kubectl-cluster_gateway'), 'kubectl cluster-gateway');
  assert.equal(invokedName('/repo/dist/client/cli/main.js'), 'cluster-gateway');
  assert.equal(invokedName('/x/kubectl-cluster_gateway.ts'), 'kubectl cluster-gateway');
  assert.equal(invokedName(undefined), 'cluster-gateway');
});

test('--help and --version exit 0; help has examples and the exit codes', async () => {
  const help = await run('--help');
  assert.equal(help.code, 0);
  assert.match(help.stdout, /^Usage: cluster-gateway /);
  assert.match(help.stdout, /Examples:\n {2}cluster-gateway status/);
  assert.match(help.stdout, /Exit codes: 0 .* 1 .* 2 usage or connection error/);
  const statusHelp = await run('status', '--help');
  assert.equal(statusHelp.code, 0);
  assert.match(statusHelp.stdout, /32 at a time by default, each given 2 s/);
  const version = await run('--version');
  assert.equal(version.code, 0);
  assert.match(version.stdout, /^\d+\.\d+\.\d+/);
});

test('usage errors exit 2: unknown flag, unknown command, bad -o, bad option value, missing argument', async () => {
  for (const args of [
    ['status', '--bogus'],
    ['stauts'],
    ['status', '-o', 'xml'],
    ['status', '--healthz-concurrency', '0'],
    ['status', '--healthz-timeout', 'soon'],
    ['kubeconfig'],
  ]) {
    const r = await run(...args);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, /error/i, `${args.join(' ')} says what is wrong`);
  }
  assert.match((await run('stauts')).stderr, /Did you mean status\?/);
});

test('no hub to talk to: exit 2 with one line, no stack', async () => {
  const missing = await run('--kubeconfig', path.join(dir, 'nope'), 'status');
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /^error: .*nope/);
  const refused = await run('--kubeconfig', unreachable, 'status', '-o', 'json');
  assert.equal(refused.code, 2);
  assert.equal(refused.stdout, '');
  assert.match(refused.stderr, /^error: cannot reach the hub at https:\/\/127\.0\.0\.1:1: .*ECONNREFUSED/);
  assert.doesNotMatch(refused.stderr, /\n\s+at /);
  const kubeconfig = await run('--kubeconfig', unreachable, 'kubeconfig', 'c1');
  assert.equal(kubeconfig.code, 2);
  assert.match(
    kubeconfig.stderr,
    /^error: cannot read ClusterGateway c1 on the hub https:\/\/127\.0\.0\.1:1: /,
  );
});

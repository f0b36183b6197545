import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runExecPlugin } from './exec-credential.ts';

const dir = mkdtempSync(join(tmpdir(), 'exec-credential-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Writes an executable shell script and returns its path. */
function plugin(name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

const v1 = 'client.authentication.k8s.io/v1';
const secretToken = 'sekret-token-value';

test('a token credential with its expiry; env and KUBERNETES_EXEC_INFO reach the plugin', async () => {
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, secretToken);
  const command = plugin(
    'ok.sh',
    `printf '{"apiVersion":"${v1}","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"2030-01-02T03:04:05Z"}}' "$(cat "$1")"
printf '%s|%s' "$GREETING" "$KUBERNETES_EXEC_INFO" > "${dir}/seen"`,
  );
  const result = await runExecPlugin(
    {
      apiVersion: v1,
      command,
      args: [tokenFile],
      env: [{ name: 'GREETING', value: 'hi' }],
      provideClusterInfo: true,
    },
    { server: 'https://c1:6443', caBundle: 'CA' },
  );
  assert.deepEqual(result, { token: secretToken, expiresAt: Date.parse('2030-01-02T03:04:05Z') });
  const [greeting, info] = readFileSync(join(dir, 'seen'), 'utf8').split('|');
  assert.equal(greeting, 'hi');
  assert.deepEqual(JSON.parse(info ?? ''), {
    apiVersion: v1,
    kind: 'ExecCredential',
    spec: {
      interactive: false,
      cluster: {
        server: 'https://c1:6443',
        'certificate-authority-data': Buffer.from('CA').toString('base64'),
      },
    },
  });
});

test('a client certificate credential, without expiry', async () => {
  const command = plugin(
    'cert.sh',
    `echo '{"apiVersion":"${v1}","kind":"ExecCredential","status":{"clientCertificateData":"CERT","clientKeyData":"KEY"}}'`,
  );
  assert.deepEqual(await runExecPlugin({ apiVersion: v1, command }), {
    certificate: 'CERT',
    privateKey: 'KEY',
  });
});

test('failures say how the plugin ended and never quote its stdout or stderr', async () => {
  const leak = (body: string) => plugin(`leak-${Math.random()}.sh`, body);
  const cases: [string, Parameters<typeof runExecPlugin>[0], RegExp][] = [
    [
      'missing command',
      { apiVersion: v1, command: join(dir, 'no-such-plugin'), installHint: 'install it with brew' },
      /not found: install it with brew/,
    ],
    [
      'non-zero exit',
      {
        apiVersion: v1,
        command: leak(`echo ${secretToken}; echo "access denied for token ${secretToken}" >&2; exit 3`),
      },
      /^exec plugin ".*" exited with status 3 \(its output is not shown: it may hold credentials\)$/,
    ],
    [
      'killed by a signal',
      { apiVersion: v1, command: leak(`echo "${secretToken}" >&2; kill -KILL $$`) },
      /was terminated by signal SIGKILL/,
    ],
    ['bad JSON', { apiVersion: v1, command: leak(`echo "{${secretToken}"`) }, /stdout is not JSON/],
    [
      'wrong apiVersion',
      {
        apiVersion: v1,
        command: leak(`echo '{"apiVersion":"${secretToken}","status":{"token":"${secretToken}"}}'`),
      },
      /returned an ExecCredential whose apiVersion is not "client.authentication.k8s.io\/v1"/,
    ],
    ['missing status', { command: leak(`echo '{"apiVersion":"${v1}"}'`) }, /without status/],
    [
      'empty status',
      { command: leak(`echo '{"apiVersion":"${v1}","status":{}}'`) },
      /neither status.token nor status.clientCertificateData/,
    ],
  ];
  for (const [name, config, message] of cases) {
    await assert.rejects(runExecPlugin(config), (err: Error) => {
      assert.match(err.message, message, name);
      assert.ok(!err.message.includes(secretToken), `${name}: ${err.message}`);
      return true;
    });
  }
});

test('a plugin that hangs is killed at the timeout', async () => {
  const command = plugin('hang.sh', 'exec sleep 10');
  await assert.rejects(
    runExecPlugin({ command }, {}, { timeoutMs: 200 }),
    /did not finish within 0.2s and was killed/,
  );
});

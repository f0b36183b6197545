import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ExecRefresher } from './exec-refresher.ts';
import { ClusterRegistry } from './registry.ts';
import { parseClusterSecret } from './secret-source.ts';
import { secret } from './test-fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'exec-refresher-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const v1 = 'client.authentication.k8s.io/v1';
const tokenFile = join(dir, 'token');
/** Seconds from now the plugin says its token expires; empty for no expiry. */
const ttlFile = join(dir, 'ttl');
const plugin = join(dir, 'plugin.sh');
writeFileSync(
  plugin,
  `#!/bin/sh
set -e
token=$(cat "${tokenFile}")
ttl=$(cat "${ttlFile}")
if [ -z "$ttl" ]; then
  printf '{"apiVersion":"${v1}","kind":"ExecCredential","status":{"token":"%s"}}' "$token"
else
  printf '{"apiVersion":"${v1}","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"%s"}}' "$token" "$(date -u -d "@$(( $(date +%s) + ttl ))" +%Y-%m-%dT%H:%M:%SZ)"
fi
`,
);
chmodSync(plugin, 0o755);

const dynamicSecret = (command = plugin) =>
  parseClusterSecret(
    secret(
      'dyn',
      { endpoint: 'https://dyn:6443', exec: JSON.stringify({ apiVersion: v1, command }) },
      { 'cluster.core.oam.dev/cluster-credential-type': 'Dynamic' },
    ),
  );

async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

test('the plugin token makes the cluster usable and a refresh before expiry rotates its connectionKey', async () => {
  writeFileSync(tokenFile, 'first');
  writeFileSync(ttlFile, '3');
  const registry = new ClusterRegistry();
  // Refresh 2.5 s before expiry: about half a second after each run.
  const refresher = new ExecRefresher(registry, { refreshLeadMs: 2500, minBackoffMs: 100 });
  try {
    refresher.setSecret('dyn', dynamicSecret(), 1);
    assert.match(registry.get('dyn')?.problem ?? '', /waiting for exec plugin/);

    const first = await until('the first token', () =>
      registry.get('dyn')?.problem ? undefined : registry.get('dyn'),
    );
    assert.deepEqual(first.credential, { type: 'Dynamic', token: 'first' });

    writeFileSync(tokenFile, 'second');
    const second = await until('the rotated token', () => {
      const target = registry.get('dyn');
      return target?.credential?.type === 'Dynamic' && target.credential.token === 'second'
        ? target
        : undefined;
    });
    assert.equal(second.problem, undefined);
    assert.notEqual(second.connectionKey, first.connectionKey);
  } finally {
    refresher.stop();
  }
});

test('a failing plugin is the problem, retried until it works; deleting the Secret stops it', async () => {
  writeFileSync(tokenFile, 'tok');
  writeFileSync(ttlFile, '');
  const broken = join(dir, 'broken.sh');
  // A real plugin's error output may carry a secret: it must reach neither the problem nor the log.
  writeFileSync(broken, '#!/bin/sh\necho "not yet: leaked-refresh-token-4711" >&2\nexit 1\n');
  chmodSync(broken, 0o755);
  const registry = new ClusterRegistry();
  const errors: string[] = [];
  const refresher = new ExecRefresher(registry, {
    minBackoffMs: 50,
    onError: (_cluster, message) => errors.push(message),
  });
  try {
    refresher.setSecret('dyn', dynamicSecret(broken), 1);
    await until('the failure', () => /exited with status 1 /.test(registry.get('dyn')?.problem ?? ''));
    await until('a retry', () => errors.length >= 2);
    assert.doesNotMatch(registry.get('dyn')?.problem ?? '', /not yet|leaked-refresh-token/);
    for (const message of errors) assert.doesNotMatch(message, /not yet|leaked-refresh-token/);
    // The plugin is fixed in place: the next retry succeeds.
    writeFileSync(broken, `#!/bin/sh\nexec "${plugin}"\n`);
    await until('recovery', () => registry.get('dyn')?.problem === undefined);
    assert.deepEqual(registry.get('dyn')?.credential, { type: 'Dynamic', token: 'tok' });

    refresher.setSecret('dyn', undefined, 1);
    assert.equal(registry.get('dyn'), undefined);
  } finally {
    refresher.stop();
  }
});

test('other Secrets pass through unchanged', () => {
  const registry = new ClusterRegistry();
  const refresher = new ExecRefresher(registry);
  refresher.setSecret('sa', parseClusterSecret(secret('sa', { endpoint: 'https://sa', token: 't' })), 1);
  assert.deepEqual(registry.get('sa')?.credential, { type: 'ServiceAccountToken', token: 't' });
  refresher.stop();
});

/**
 * The last file of the suite (named so that node --test runs it after every other): every log that a
 * process of this project wrote during the run (the gateways, the addon managers, the agents, whatever
 * the kubelets ran from our image) holds no credential. Each test file checks its own
 * process's log for the credentials it knows; this sweep catches what they did not think of, with
 * patterns rather than known values: a ServiceAccount token (a JWT), a private key in PEM, a bearer
 * token in a header dump.
 *
 * The control planes' own logs (kube-apiserver, etcd, kube-controller-manager, OCM) and the apiservers'
 * audit logs are not ours to judge and are left out.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { e2eStateDir } from './support/environment.ts';

const notOurs = /(^|[-/])(audit|kube-apiserver|kube-controller-manager|etcd|ocm-[a-z-]+)\.log$/;
const credentials: [string, RegExp][] = [
  ['a JWT (ServiceAccount token)', /eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/],
  ['a private key', /-----BEGIN [A-Z ]*PRIVATE KEY-----/],
  ['a bearer token', /\bBearer [A-Za-z0-9._~+/-]{20,}/],
];

function logFiles(dir: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) files.push(...logFiles(file));
    else if (entry.isFile() && entry.name.endsWith('.log') && !notOurs.test(file)) files.push(file);
  }
  return files;
}

test("no log of the project's processes holds a token or a key, across the whole e2e run", () => {
  const files = logFiles(e2eStateDir);
  const bytes = files.reduce((sum, f) => sum + statSync(f).size, 0);
  // The sweep must have something to read: the gateway's and the managers' logs at the least.
  assert.ok(
    files.some((f) => /cluster-gateway\.log$/.test(f)),
    `no gateway log under ${e2eStateDir}`,
  );
  assert.ok(
    files.some((f) => /addon-manager/.test(f)),
    `no addon manager log under ${e2eStateDir}`,
  );
  const found: string[] = [];
  for (const file of files) {
    const lines = readFileSync(file, 'utf8').split('\n');
    lines.forEach((line, i) => {
      for (const [what, pattern] of credentials) {
        // Name where, never what: the report must not leak it again.
        if (pattern.test(line)) found.push(`${path.relative(e2eStateDir, file)}:${i + 1}: ${what}`);
      }
    });
  }
  console.log(`[written-logs] ${files.length} logs, ${(bytes / 1e6).toFixed(1)} MB swept`);
  assert.deepEqual(found, [], `credentials in logs:\n${found.join('\n')}`);
});

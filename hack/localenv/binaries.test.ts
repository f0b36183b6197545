import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { pinnedOcmVersions, repoRoot, resolveOcmVersion } from './binaries.ts';

/** A hack/tools/ocm look-alike: one folder per release, and default-version. */
function pins(versions: string[], defaultVersion: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ocm-pins-'));
  for (const version of versions) mkdirSync(path.join(dir, version, 'ocm'), { recursive: true });
  mkdirSync(path.join(dir, 'notes'));
  writeFileSync(path.join(dir, 'default-version'), `${defaultVersion}\n`);
  return dir;
}

test('pinned OCM releases are the version folders, oldest first', () => {
  assert.deepEqual(pinnedOcmVersions(pins(['v1.3.1', 'v1.10.0', 'v1.2.1'], 'v1.3.1')), [
    'v1.2.1',
    'v1.3.1',
    'v1.10.0',
  ]);
});

test('without OCM_VERSION the default release runs', () => {
  const dir = pins(['v1.2.1', 'v1.3.1'], 'v1.3.1');
  assert.equal(resolveOcmVersion(undefined, dir), 'v1.3.1');
  assert.equal(resolveOcmVersion('', dir), 'v1.3.1');
});

test('OCM_VERSION selects a pinned release, with or without the v', () => {
  const dir = pins(['v1.2.1', 'v1.3.1'], 'v1.3.1');
  assert.equal(resolveOcmVersion('1.2.1', dir), 'v1.2.1');
  assert.equal(resolveOcmVersion('v1.2.1', dir), 'v1.2.1');
});

test('a release that is not pinned is refused, naming the ones that are', () => {
  const dir = pins(['v1.2.1', 'v1.3.1'], 'v1.3.1');
  assert.throws(() => resolveOcmVersion('1.4.0', dir), {
    message:
      'OCM_VERSION=1.4.0 is not an OCM release this project pins: choose one of 1.2.1, 1.3.1 (hack/tools/ocm)',
  });
});

test("the repository's default OCM release is v1.3.1, and v1.2.1 stays pinned", () => {
  const real = path.join(repoRoot, 'hack', 'tools', 'ocm');
  assert.equal(readFileSync(path.join(real, 'default-version'), 'utf8').trim(), 'v1.3.1');
  assert.equal(resolveOcmVersion(undefined, real), 'v1.3.1');
  assert.ok(pinnedOcmVersions(real).includes('v1.2.1'));
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ExecCredentialSource, TokenFileSource } from './credential-source.ts';
import type { ExecResult } from './exec-credential.ts';

test('token file: read again once its minute is over, a failed read keeps the last token', () => {
  let now = 0;
  let content: string | Error = 'second\n';
  let reads = 0;
  const source = new TokenFileSource('/sa/token', 'first', {
    now: () => now,
    readFile: () => {
      reads++;
      if (content instanceof Error) throw content;
      return content;
    },
  });
  assert.deepEqual(source.get(), { authorization: 'Bearer first' });
  now = 59_999;
  assert.deepEqual(source.get(), { authorization: 'Bearer first' });
  assert.equal(reads, 0);
  now = 60_000;
  assert.deepEqual(source.get(), { authorization: 'Bearer second' });
  content = Object.assign(new Error('ENOENT'), { code: 'ENOENT' });
  now = 120_000;
  assert.deepEqual(source.get(), { authorization: 'Bearer second' });
  // A 401 reads the file at once.
  content = 'third';
  source.invalidate();
  assert.deepEqual(source.get(), { authorization: 'Bearer third' });
  assert.equal(reads, 3);
});

const exec = { config: { command: 'plugin' }, cluster: { server: 'https://hub' } };

test('exec: one run for concurrent requests, cached until a minute before expiry, again after a 401', async () => {
  let now = 0;
  let runs = 0;
  const results: ExecResult[] = [
    { token: 'one', expiresAt: 600_000 },
    { token: 'two', expiresAt: 1_200_000 },
    { certificate: 'CERT', privateKey: 'KEY' },
  ];
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const source = new ExecCredentialSource(exec, {
    now: () => now,
    runExec: async () => {
      await gate;
      return results[runs++] as ExecResult;
    },
  });
  const waiting = [source.get(), source.get(), source.get()];
  release();
  for (const c of await Promise.all(waiting)) assert.deepEqual(c, { authorization: 'Bearer one' });
  assert.equal(runs, 1);
  now = 539_999;
  assert.deepEqual(await source.get(), { authorization: 'Bearer one' });
  now = 540_000;
  assert.deepEqual(await source.get(), { authorization: 'Bearer two' });
  assert.equal(runs, 2);
  source.invalidate();
  assert.deepEqual(await source.get(), { cert: 'CERT', key: 'KEY' });
  // No expiry: kept until the server rejects it.
  now = 10 ** 12;
  assert.deepEqual(await source.get(), { cert: 'CERT', key: 'KEY' });
  assert.equal(runs, 3);
});

test('exec: a failing plugin keeps the still-valid credential, and fails once it has expired', async () => {
  let now = 0;
  let fail = false;
  const source = new ExecCredentialSource(exec, {
    now: () => now,
    runExec: async () => {
      if (fail) throw new Error('exec plugin "plugin" exited with status 1');
      return { token: 'one', expiresAt: 100_000 };
    },
  });
  assert.deepEqual(await source.get(), { authorization: 'Bearer one' });
  fail = true;
  now = 50_000; // within the refresh lead: a run is due, and fails
  assert.deepEqual(await source.get(), { authorization: 'Bearer one' });
  now = 100_000;
  await assert.rejects(Promise.resolve(source.get()), /exited with status 1/);
});

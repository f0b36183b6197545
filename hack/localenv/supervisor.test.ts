import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { Supervisor } from './supervisor.ts';
import { waitFor } from './wait.ts';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test('stop() ends every process and its children', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'supervisor-'));
  const supervisor = new Supervisor(dir);
  // A child that starts a grandchild: the process group goes as a whole.
  const p = supervisor.start('shell', 'sh', {
    args: ['-c', 'sleep 60 & echo $! > grandchild; wait'],
    cwd: dir,
  });
  const grandchild = await waitFor('the grandchild pid', () => {
    try {
      return Number(readFileSync(path.join(dir, 'grandchild'), 'utf8')) || undefined;
    } catch {
      return undefined;
    }
  });
  assert.ok(alive(p.pid) && alive(grandchild));
  await supervisor.stop();
  await waitFor('both to be gone', () => !alive(p.pid) && !alive(grandchild), { timeoutMs: 5000 });
});

test('Ctrl-C (SIGINT) on the owning process leaves no process behind', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'supervisor-'));
  const script = `
    import { Supervisor } from ${JSON.stringify(path.join(import.meta.dirname, 'supervisor.ts'))};
    const s = new Supervisor(${JSON.stringify(dir)});
    const p = s.start('sleeper', 'sleep', { args: ['60'] });
    console.log(p.pid);
    setInterval(() => {}, 1000);
  `;
  const owner = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const childPid = await new Promise<number>((resolve) =>
    owner.stdout.once('data', (d: Buffer) => resolve(Number(d))),
  );
  assert.ok(alive(childPid));
  owner.kill('SIGINT');
  const code = await new Promise<number | null>((resolve) => owner.once('exit', resolve));
  assert.equal(code, 130);
  assert.equal(alive(childPid), false);
});

test('a process that dies is reported with the tail of its log', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'supervisor-'));
  const supervisor = new Supervisor(dir);
  const p = supervisor.start('failing', 'sh', {
    args: ['-c', 'echo "bind: address already in use"; exit 3'],
  });
  await p.exited;
  assert.throws(
    () => supervisor.assertAllRunning(),
    /failing exited \(code 3\)[\s\S]*address already in use/,
  );
  await supervisor.stop();
});

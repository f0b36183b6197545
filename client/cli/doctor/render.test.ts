import assert from 'node:assert/strict';
import { test } from 'node:test';
import { columnsFor, mark, renderResult, summary } from './render.ts';

const plain = { colour: false, paint: (_c: string, t: string) => t };
const colour = { colour: true, paint: (c: string, t: string) => `<${c}>${t}</${c}>` };

test('PASS/FAIL/SKIP without colour, ticks with it', () => {
  assert.deepEqual(
    ['pass', 'fail', 'skipped'].map((r) => mark(r as 'pass', plain)),
    ['PASS', 'FAIL', 'SKIP'],
  );
  assert.equal(mark('fail', colour), '<red>✗</red>');
});

test('a failure shows the object and every line of its fix; the first one is marked', () => {
  const columns = columnsFor([{ title: 'heartbeat Lease fresh', cluster: 'cluster1' }]);
  const lines = renderResult(
    {
      name: 'heartbeat-fresh',
      cluster: 'cluster1',
      result: 'fail',
      message: 'stale',
      object: 'lease c1/x',
      fix: 'one\ntwo',
      durationMs: 1,
    },
    'heartbeat Lease fresh',
    columns,
    true,
    plain,
  );
  assert.deepEqual(lines, [
    'FAIL cluster1  heartbeat Lease fresh  stale  <- first failure',
    '     look at: lease c1/x',
    '     fix:     one',
    '              two',
  ]);
});

test('the summary names the first failure', () => {
  const s = summary(
    [
      { name: 'a', result: 'pass', message: '', durationMs: 0 },
      { name: 'b', cluster: 'c1', result: 'fail', message: 'down', durationMs: 0 },
      { name: 'c', result: 'skipped', message: '', durationMs: 0 },
    ],
    (r) => r.name,
  );
  assert.equal(s, '1 check failed (1 passed, 1 failed, 1 skipped); first: c1 b: down');
  assert.match(
    summary([], () => ''),
    /^healthy/,
  );
});

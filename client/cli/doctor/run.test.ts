import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fail, pass, skipped } from './model.ts';
import { type CheckDefinition, connectionProblem, layoutFrom, runChecks } from './run.ts';

const check = (
  name: string,
  after: string[],
  verdict: ReturnType<typeof pass>,
  delayMs = 0,
  cluster?: string,
): CheckDefinition => ({
  name,
  title: name,
  after,
  ...(cluster ? { cluster } : {}),
  run: () => new Promise((resolve) => setTimeout(() => resolve(verdict), delayMs)),
});

async function collect(checks: CheckDefinition[]) {
  const out = [];
  for await (const r of runChecks(checks)) out.push(r);
  return out;
}

test('results come in the order of the checks, whichever finishes first', async () => {
  const results = await collect([check('slow', [], pass('a'), 30), check('fast', [], pass('b'), 0)]);
  assert.deepEqual(
    results.map((r) => r.name),
    ['slow', 'fast'],
  );
});

test('a failure skips what depends on it, through the chain, for the same cluster only', async () => {
  const results = await collect([
    check('hub', [], pass('up')),
    check('agent', ['hub'], fail('down', 'deployment x', 'scale it'), 0, 'c1'),
    check('heartbeat', ['agent'], fail('stale', 'lease', 'logs'), 0, 'c1'),
    check('healthz', ['heartbeat'], pass('ok'), 0, 'c1'),
    check('agent', ['hub'], pass('ok'), 0, 'c2'),
    check('heartbeat', ['agent'], pass('ok'), 0, 'c2'),
  ]);
  assert.deepEqual(
    results.map((r) => `${r.cluster ?? 'hub'} ${r.name} ${r.result}`),
    [
      'hub hub pass',
      'c1 agent fail',
      'c1 heartbeat skipped',
      'c1 healthz skipped',
      'c2 agent pass',
      'c2 heartbeat pass',
    ],
  );
  assert.equal(results[2]?.message, 'skipped: agent failed');
  assert.equal(results[2]?.fix, undefined);
});

test('a skip for a missing permission does not cascade; a not-applicable skip does', async () => {
  const results = await collect([
    check('a', [], skipped('not checked: you may not get x')),
    check('b', ['a'], pass('fine')),
    check('c', [], { ...skipped('not enabled'), cascade: true }),
    check('d', ['c'], fail('x', 'y', 'z')),
  ]);
  assert.deepEqual(
    results.map((r) => r.result),
    ['skipped', 'pass', 'skipped', 'skipped'],
  );
});

test('a check that throws is a failure, not a crash', async () => {
  const results = await collect([
    { name: 'x', title: 'x', after: [], run: () => Promise.reject(new Error('boom')) },
  ]);
  assert.equal(results[0]?.result, 'fail');
  assert.match(results[0]?.message ?? '', /boom/);
});

test('the layout comes from the APIService and the release namespace, else the chart defaults', () => {
  const l = layoutFrom(
    {
      metadata: { name: 'v1alpha1.cluster.core.oam.dev' },
      spec: { service: { name: 'gw', namespace: 'gw-ns' } },
    },
    { metadata: { name: 'cluster-gateway', annotations: { 'meta.helm.sh/release-namespace': 'rel-ns' } } },
  );
  assert.deepEqual([l.gatewayName, l.gatewayNamespace, l.managerNamespace], ['gw', 'gw-ns', 'rel-ns']);
  const d = layoutFrom(undefined, undefined);
  assert.deepEqual([d.gatewayName, d.managerNamespace], ['cluster-gateway', 'open-cluster-management-addon']);
});

test('connection problems: unreachable everywhere, or a refused credential; a 403 or one answer is not one', () => {
  assert.match(
    connectionProblem([{ state: 'error', message: 'ECONNREFUSED', connection: true }]) ?? '',
    /ECONNREFUSED/,
  );
  assert.match(
    connectionProblem([
      { state: 'error', code: 401, message: 'Unauthorized', connection: false },
      { state: 'missing', hubTime: 0 },
    ]) ?? '',
    /refused your credential/,
  );
  assert.equal(
    connectionProblem([
      { state: 'forbidden', permission: 'p', message: 'm' },
      { state: 'error', message: 'x', connection: true },
    ]),
    undefined,
  );
});

import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, test } from 'node:test';
import { breaches, type ImportGraph, importsOf, readImportGraph } from './import-graph.ts';

const repoRoot = path.resolve(import.meta.dirname, '..');

describe('import rules, on small graphs', () => {
  const rulesOf = (graph: ImportGraph) => breaches(graph).map((b) => b.rule);

  test('an agent file importing manager/ is a breach, tests included', () => {
    assert.deepEqual(rulesOf(new Map([['agent/x.test.ts', ['manager/gateway/y.ts']]])), [
      'agent-imports-manager',
    ]);
  });

  test('shared code importing either side is a breach; its test kit may', () => {
    const graph: ImportGraph = new Map([
      ['shared/transport/pool.ts', ['manager/gateway/proxy/path.ts']],
      ['shared/kube/lease.ts', ['agent/lease.ts']],
      ['shared/transport/test-kit.ts', ['manager/gateway/clusters/cluster.ts']],
    ]);
    assert.deepEqual(rulesOf(graph), ['shared-imports-a-side', 'shared-imports-a-side']);
  });

  test('product code importing hack/ or e2e/ is a breach; a test doing so is not', () => {
    const graph: ImportGraph = new Map([
      ['manager/a.ts', ['hack/localenv/env.ts']],
      ['shared/b.ts', ['e2e/support/c.ts']],
      ['manager/a.test.ts', ['hack/localenv/env.ts']],
    ]);
    assert.deepEqual(rulesOf(graph), ['product-imports-tooling', 'product-imports-tooling']);
  });

  test('two folders importing each other is a breach, a parent and its subfolder too', () => {
    const sibling: ImportGraph = new Map([
      ['manager/addon/a/x.ts', ['manager/addon/b/y.ts']],
      ['manager/addon/b/y.ts', ['manager/addon/a/z.ts']],
    ]);
    assert.deepEqual(rulesOf(sibling), ['folders-import-each-other']);
    const parent: ImportGraph = new Map([
      ['agent/main.ts', ['agent/tunnel/relay.ts']],
      ['agent/tunnel/relay.ts', ['agent/kubeconfig.ts']],
    ]);
    assert.match(breaches(parent)[0]!.detail, /agent\/ and agent\/tunnel\/ import each other/);
  });

  test('one-way imports and a test kit reaching back are fine', () => {
    const graph: ImportGraph = new Map([
      ['manager/gateway/main.ts', ['manager/gateway/proxy/cluster-proxy.ts', 'shared/transport/pool.ts']],
      ['manager/gateway/proxy/cluster-proxy.ts', ['shared/transport/pool.ts']],
      ['shared/transport/test-kit.ts', ['manager/gateway/main.ts']],
    ]);
    assert.deepEqual(breaches(graph), []);
  });

  test('imports are read as TypeScript reads them: multi-line, type-only, re-exports, dynamic', () => {
    const source = [
      "import {\n  a,\n  b,\n} from '../x/a.ts';",
      "import type { T } from './t.ts';",
      "export { c } from '../../shared/c.ts';",
      "const m = await import('./lazy.ts');",
      "import http from 'node:http';",
      "// import { no } from './comment.ts';",
    ].join('\n');
    assert.deepEqual(importsOf('manager/gateway/f.ts', source).sort(), [
      'manager/gateway/lazy.ts',
      'manager/gateway/t.ts',
      'manager/x/a.ts',
      'shared/c.ts',
    ]);
  });
});

describe('import rules, on this repository', () => {
  const graph = readImportGraph(repoRoot);

  test('the graph was read (a sanity check on the reader itself)', () => {
    assert.ok(graph.size > 200, `only ${graph.size} files read`);
    assert.ok(graph.get('manager/gateway/main.ts')?.length, 'the gateway entry point imports something');
  });

  test('no breach: agent/ imports nothing from manager/, shared/ neither side, product code no hack/ or e2e/, no folder cycle', () => {
    assert.deepEqual(
      breaches(graph).map((b) => `${b.rule}: ${b.detail}`),
      [],
    );
  });
});

/**
 * The project's import rules, read from the code (hack/import-graph.test.ts runs them on every
 * `npm run test:unit`; `node hack/import-graph.ts` prints the folder graph and any breach):
 *
 * - the spoke side imports nothing from the hub side: no file under `agent/` imports `manager/`;
 * - code both sides use imports neither side: no product file of `shared/` imports `manager/` or
 *   `agent/`;
 * - product code (non-test files of `manager/`, `agent/`, `shared/`) imports neither `hack/` nor
 *   `e2e/`: the image ships without them;
 * - no two folders import each other (a parent folder and its subfolder count as two), so every
 *   folder can be read after the folders it imports, and a request, a tunnel or a health verdict
 *   is followed one way through the imports.
 *
 * Imports are read with TypeScript's own pre-processor (static, re-exports, dynamic `import()`), not
 * with a regular expression, so a multi-line import or a type-only import counts like any other.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

export const productRoots = ['manager', 'agent', 'shared'] as const;
const scannedRoots = [...productRoots, 'hack', 'e2e', 'charts'];

/** Test code and benchmarks: they may reach anywhere a test needs (test kits, the local environment). */
export function isTestFile(file: string): boolean {
  const base = path.basename(file);
  return (
    base.endsWith('.test.ts') ||
    base.endsWith('.bench.ts') ||
    ['test-kit.ts', 'testing.ts', 'test-fixtures.ts'].includes(base)
  );
}

export function isProductFile(file: string): boolean {
  return productRoots.some((root) => file.startsWith(`${root}/`)) && !isTestFile(file);
}

/** Repository-relative file -> repository-relative files it imports (relative specifiers only). */
export type ImportGraph = Map<string, string[]>;

export function importsOf(file: string, source: string): string[] {
  const { importedFiles } = ts.preProcessFile(source, true, true);
  return importedFiles
    .map((i) => i.fileName)
    .filter((spec) => spec.startsWith('./') || spec.startsWith('../'))
    .map((spec) => path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)));
}

export function readImportGraph(repoRoot: string): ImportGraph {
  const graph: ImportGraph = new Map();
  const walk = (dir: string): void => {
    for (const entry of readdirSync(path.join(repoRoot, dir), { withFileTypes: true })) {
      if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
      const rel = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(rel);
      else if (entry.name.endsWith('.ts')) {
        graph.set(rel, importsOf(rel, readFileSync(path.join(repoRoot, rel), 'utf8')));
      }
    }
  };
  for (const root of scannedRoots) {
    try {
      walk(root);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
  return graph;
}

export interface Breach {
  rule:
    | 'agent-imports-manager'
    | 'shared-imports-a-side'
    | 'product-imports-tooling'
    | 'folders-import-each-other';
  /** One line a reader can act on, naming the files. */
  detail: string;
}

export function breaches(graph: ImportGraph): Breach[] {
  const found: Breach[] = [];
  // folder -> folder it imports -> one file-level example of that edge.
  const folderEdges = new Map<string, Map<string, string>>();
  for (const [file, imports] of graph) {
    for (const imported of imports) {
      if (file.startsWith('agent/') && imported.startsWith('manager/')) {
        found.push({ rule: 'agent-imports-manager', detail: `${file} imports ${imported}` });
      }
      if (
        isProductFile(file) &&
        file.startsWith('shared/') &&
        (imported.startsWith('manager/') || imported.startsWith('agent/'))
      ) {
        found.push({ rule: 'shared-imports-a-side', detail: `${file} imports ${imported}` });
      }
      if (isProductFile(file) && (imported.startsWith('hack/') || imported.startsWith('e2e/'))) {
        found.push({ rule: 'product-imports-tooling', detail: `${file} imports ${imported}` });
      }
      if (!isProductFile(file) || !isProductFile(imported)) continue;
      const from = path.posix.dirname(file);
      const to = path.posix.dirname(imported);
      if (from === to) continue;
      const edges = folderEdges.get(from) ?? new Map<string, string>();
      folderEdges.set(from, edges);
      if (!edges.has(to)) edges.set(to, `${file} imports ${imported}`);
    }
  }
  for (const [from, edges] of folderEdges) {
    for (const [to, example] of edges) {
      const back = folderEdges.get(to)?.get(from);
      if (back && from < to) {
        found.push({
          rule: 'folders-import-each-other',
          detail: `${from}/ and ${to}/ import each other: ${example}; ${back}`,
        });
      }
    }
  }
  return found;
}

/** The folder graph of the product code, one `from -> to` line per edge, for a reader. */
export function folderGraph(graph: ImportGraph): string[] {
  const lines = new Set<string>();
  for (const [file, imports] of graph) {
    if (!isProductFile(file)) continue;
    for (const imported of imports) {
      const from = path.posix.dirname(file);
      const to = path.posix.dirname(imported);
      if (from !== to && isProductFile(imported)) lines.add(`${from} -> ${to}`);
    }
  }
  return [...lines].sort();
}

if (import.meta.main) {
  const graph = readImportGraph(path.resolve(import.meta.dirname, '..'));
  for (const line of folderGraph(graph)) console.log(line);
  const found = breaches(graph);
  for (const b of found) console.log(`BREACH ${b.rule}: ${b.detail}`);
  process.exitCode = found.length > 0 ? 1 : 0;
}

/**
 * Builds what the npm package ships (`npm run build`; `npm pack` runs it first, as `prepack`):
 * tsc -p tsconfig.build.json compiles client/ and the shared/ files it imports into dist/ as
 * JavaScript and .d.ts. The repository itself runs its TypeScript directly (Node's type stripping),
 * but Node refuses to strip types under node_modules, so an installed package must be JavaScript.
 *
 * dist/ is emptied first, so a file deleted or renamed in client/ never lingers in the tarball.
 * Each `bin` of package.json is then checked to keep its shebang and made executable: tsc writes
 * files 0644, and `kubectl cluster-gateway` (kubectl's plugin lookup) only runs executable files.
 *
 * Run: node hack/build-package.ts
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const repoRoot = path.resolve(import.meta.dirname, '..');
const distDir = path.join(repoRoot, 'dist');
const shebang = '#!/usr/bin/env node\n';

/** Every file under `dir`, relative to it. */
export function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)))
    .sort();
}

/** What must hold of dist/ after a build; the reasons it does not (empty: it is fine to pack). */
export function distProblems(
  files: string[],
  bins: Record<string, string>,
  read: (file: string) => string,
): string[] {
  const problems: string[] = [];
  for (const file of files.filter((f) => /\.test\.|(^|\/)(test-kit|testing|test-fixtures)\./.test(f))) {
    problems.push(`dist/${file} is test code: tsconfig.build.json must exclude it`);
  }
  for (const file of files.filter((f) => /^(manager|agent|hack|e2e)\//.test(f))) {
    problems.push(`dist/${file}: the client imports ${file.split('/')[0]}/, which the package does not ship`);
  }
  for (const [name, bin] of Object.entries(bins)) {
    const file = path.relative('dist', bin);
    if (!files.includes(file)) problems.push(`bin ${name}: ${bin} was not built`);
    else if (!read(file).startsWith(shebang))
      problems.push(`bin ${name}: ${bin} does not start with ${shebang}`);
  }
  return problems;
}

if (import.meta.main) {
  const started = performance.now();
  const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as {
    bin?: Record<string, string>;
  };
  rmSync(distDir, { recursive: true, force: true });
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const built = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], {
    cwd: repoRoot,
    // stderr only: `npm pack --json` prints its answer on stdout, after this runs as prepack.
    stdio: ['ignore', 2, 2],
  });
  if (built.status !== 0) {
    process.stderr.write(`build-package: tsc -p tsconfig.build.json failed (exit ${built.status})\n`);
    process.exit(1);
  }
  const files = filesUnder(distDir);
  const bins = pkg.bin ?? {};
  const problems = distProblems(files, bins, (file) => readFileSync(path.join(distDir, file), 'utf8'));
  if (problems.length > 0) {
    process.stderr.write(`build-package: dist/ is not fit to pack:\n  ${problems.join('\n  ')}\n`);
    process.exit(1);
  }
  for (const bin of new Set(Object.values(bins))) chmodSync(path.join(repoRoot, bin), 0o755);
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  process.stderr.write(`build-package: dist/ has ${files.length} files (${seconds} s)\n`);
}

/**
 * Node's compile cache, filled the way the image build fills it (Dockerfile), so the processes this
 * machine starts cost what the deployed ones cost: a process started with NODE_COMPILE_CACHE pointing
 * at a filled cache never loads the TypeScript stripper, about 18 MB of RSS for its whole life
 * (docs/benchmarks-log.md, "Agent footprint"). Node checks each file's hash: an entry of a changed
 * source is rebuilt, never served stale.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { repoRoot } from './binaries.ts';

export const compileCacheDir = path.join(repoRoot, '.cache', 'node-compile-cache');

/** The environment a process needs to use the cache. */
export const compileCacheEnv: Readonly<{ NODE_COMPILE_CACHE: string }> = {
  NODE_COMPILE_CACHE: compileCacheDir,
};

const warmed = new Set<string>();

/**
 * Runs `node <entry> --help` with the cache on, once per entry and process: ESM loads (and so
 * caches) every statically imported module before the program reads its flags, and the cache is
 * written when that short process exits, which a long-running one stopped by a signal may never do.
 */
export function warmCompileCache(entry: string): void {
  if (warmed.has(entry)) return;
  execFileSync(process.execPath, [path.join(repoRoot, entry), '--help'], {
    env: { ...process.env, ...compileCacheEnv },
    stdio: 'ignore',
  });
  warmed.add(entry);
}

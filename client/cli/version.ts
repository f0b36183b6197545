/**
 * The package's version, for `--version`: read from the package.json this file ships in, found by walking up from
 * here, so the same code answers from the repository (client/cli/) and from an installed package (dist/client/cli/).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

export function packageVersion(from: string = import.meta.dirname): string {
  let dir = from;
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'cluster-gateway' && pkg.version) return pkg.version;
    } catch {
      // no package.json here (or not ours): keep walking up
    }
    const parent = path.dirname(dir);
    if (parent === dir) return 'unknown';
    dir = parent;
  }
}

/**
 * The images the nodes run: the project's own, built from the repository's Dockerfile, and the pod
 * sandbox's (hack/image/build.sh builds both, and does nothing when the tree has not changed).
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from './binaries.ts';

export interface BuiltImages {
  /** The project's image, as the chart and the ManifestWork name it: `localhost/cluster-gateway-ts:dev-<hash>`. */
  image: string;
  /** Its `podman save` archive, which each node's containerd imports. */
  archive: string;
  pause: string;
  pauseArchive: string;
}

const run = promisify(execFile);

export async function buildImages(log?: (line: string) => void): Promise<BuiltImages> {
  try {
    const { stderr } = await run('bash', [path.join(repoRoot, 'hack', 'image', 'build.sh')], {
      cwd: repoRoot,
      maxBuffer: 16 * 1024 * 1024,
    });
    for (const line of stderr.trimEnd().split('\n')) if (line) log?.(line);
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`hack/image/build.sh failed: ${e.stderr?.trim() || e.message}`);
  }
  return JSON.parse(
    readFileSync(path.join(repoRoot, '.cache', 'image', 'current.json'), 'utf8'),
  ) as BuiltImages;
}

/** `localhost/cluster-gateway-ts:dev-x` as the chart's image values. */
export function imageValues(image: string): { registry: string; repository: string; tag: string } {
  const match = /^([^/]+)\/(.+):([^:]+)$/.exec(image);
  if (!match) throw new Error(`not an image reference with registry and tag: ${image}`);
  return { registry: match[1]!, repository: match[2]!, tag: match[3]! };
}

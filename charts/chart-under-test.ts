/**
 * What the chart tests share: the chart's folder, the helm built from its Go module (hack/), and the
 * reason to skip when it is not built yet (`npm run binaries`).
 */
import { accessSync } from 'node:fs';
import path from 'node:path';
import { binaryPath, repoRoot } from '../hack/localenv/binaries.ts';

export const chart = path.join(repoRoot, 'charts', 'cluster-gateway');
export const helm = binaryPath('helm');
export const helmMissing: string | false = (() => {
  try {
    accessSync(helm);
    return false;
  } catch {
    return `helm is not built (${helm}): run npm run binaries`;
  }
})();

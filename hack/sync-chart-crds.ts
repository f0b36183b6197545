/**
 * Copies this project's CRDs (crds/, the one source of truth) into the chart
 * (charts/cluster-gateway/crds/, which helm installs before the templates),
 * and removes chart copies whose source is gone. The chart unit test
 * (charts/cluster-gateway.test.ts) fails while the two differ.
 * Run: node hack/sync-chart-crds.ts
 */
import { copyFileSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './localenv/binaries.ts';

export const sourceCrdDir = path.join(repoRoot, 'crds');
export const chartCrdDir = path.join(repoRoot, 'charts', 'cluster-gateway', 'crds');

export function crdFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort();
}

if (import.meta.main) {
  const sources = crdFiles(sourceCrdDir);
  for (const file of sources) copyFileSync(path.join(sourceCrdDir, file), path.join(chartCrdDir, file));
  for (const file of crdFiles(chartCrdDir)) {
    if (!sources.includes(file)) rmSync(path.join(chartCrdDir, file));
  }
  console.log(`charts/cluster-gateway/crds: ${sources.join(', ')}`);
}

/**
 * Connection storm benchmark (npm run bench:storm): what idle TLS connections
 * cost the gateway, and what it keeps afterwards.
 *
 * Starts its own environment (hub + cluster1 + the gateway with its default
 * flags) in .local/bench, then, for each storm size, opens that many TLS
 * connections to the gateway, 100 at a time, that never send a request. It
 * prints the gateway's RSS before, at the peak and after the storm, how many
 * connections the gateway held (the rest closed at accept by
 * --max-connections), how long until it closed the idle ones
 * (--request-header-timeout), and a proxied GET's latency during the storm.
 *
 *   node e2e/bench/connection-storm.ts [--sizes=1000,5000,10000]
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import tls from 'node:tls';
import { repoRoot } from '../../hack/localenv/binaries.ts';
import { startEnvironment } from '../../hack/localenv/environment.ts';

const stateDir = path.join(repoRoot, '.local', 'bench');
const sizes = (process.argv.find((a) => a.startsWith('--sizes='))?.slice(8) ?? '1000,5000,10000')
  .split(',')
  .map(Number);

const rssMb = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

const env = await startEnvironment({
  stateDir,
  managedClusters: ['cluster1'],
  log: (line) => process.stderr.write(`[bench env] ${line}\n`),
});
let failed = false;
try {
  const gateway = env.gateway!;
  const pid = gateway.process.pid;
  const url = new URL(gateway.url);
  const ca = readFileSync(env.hub.files.ca);
  const frontProxy = {
    ca,
    cert: readFileSync(path.join(stateDir, 'hub', 'front-proxy-client.crt')),
    key: readFileSync(path.join(stateDir, 'hub', 'front-proxy-client.key')),
  };
  const probe = () =>
    new Promise<number>((resolve, reject) => {
      const started = performance.now();
      https
        .get(
          `${gateway.url}/apis/cluster.core.oam.dev/v1alpha1/clustergateways/cluster1/proxy/version`,
          {
            ...frontProxy,
            agent: false,
            headers: { 'X-Remote-User': 'admin', 'X-Remote-Group': 'system:masters' },
          },
          (res) => {
            res.resume();
            res.on('end', () =>
              res.statusCode === 200
                ? resolve(performance.now() - started)
                : reject(new Error(`status ${res.statusCode}`)),
            );
          },
        )
        .on('error', reject);
    });
  const open = () =>
    new Promise<tls.TLSSocket | undefined>((resolve) => {
      const socket = tls.connect({ host: url.hostname, port: Number(url.port), ca }, () => resolve(socket));
      socket.on('error', () => resolve(undefined));
    });

  const rows: string[][] = [];
  for (const size of sizes) {
    await new Promise((r) => setTimeout(r, 2000));
    const before = rssMb(pid);
    const sockets: tls.TLSSocket[] = [];
    for (let i = 0; i < size; i += 100) {
      for (const s of await Promise.all(Array.from({ length: Math.min(100, size - i) }, open)))
        if (s) sockets.push(s);
    }
    const held = sockets.filter((s) => !s.destroyed).length; // the rest: closed at accept or evicted
    const peak = rssMb(pid);
    let during: string;
    try {
      during = `${(await probe()).toFixed(1)} ms`;
    } catch (err) {
      during = `refused (${(err as Error).message})`;
    }
    const started = performance.now();
    while (sockets.some((s) => !s.destroyed) && performance.now() - started < 40_000) {
      await new Promise((r) => setTimeout(r, 250));
    }
    const left = sockets.filter((s) => !s.destroyed).length;
    const closedAfter = `${((performance.now() - started) / 1000).toFixed(1)} s${left ? ` (${left} still open)` : ''}`;
    for (const s of sockets) s.destroy();
    await new Promise((r) => setTimeout(r, 5000));
    const after = rssMb(pid);
    const afterProbe = `${(await probe()).toFixed(1)} ms`;
    rows.push([
      String(size),
      String(held),
      before.toFixed(0),
      peak.toFixed(0),
      after.toFixed(0),
      closedAfter,
      during,
      afterProbe,
    ]);
  }
  const header = [
    'storm',
    'held after the storm',
    'RSS before MB',
    'RSS peak MB',
    'RSS after MB',
    'idle closed after',
    'GET during',
    'GET after',
  ];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  console.log(
    `\n${line(header)}\n| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |\n${rows.map(line).join('\n')}`,
  );
} catch (err) {
  failed = true;
  console.error(`\nbenchmark failed: ${(err as Error).stack ?? err}`);
} finally {
  await env.stop();
  process.exit(failed ? 1 : 0);
}

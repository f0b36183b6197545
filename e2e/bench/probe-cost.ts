/**
 * What one health probe of an idle cluster costs the gateway in CPU (`npm run bench:probe`).
 *
 * At 1,000 clusters the prober makes 25 probes a second, each a new TLS connection carrying one
 * GET /healthz, so this cost times 25 is most of the gateway's idle CPU (docs/benchmarks-log.md, "Scale").
 * Starts an environment with cluster1 in .local/bench-probe and, in this process, probes cluster1's
 * real kube-apiserver with its token through a connection pool of the gateway's own
 * (shared/transport/pool.ts) in five ways, one after the other, in rounds:
 *
 *   - http.request: the request through the pool's Agent, `Connection: close` (how probes were made
 *     before healthz-once.ts);
 *   - by hand, with a TLS context built for the probe: how the prober probed a cluster whose pool
 *     held no context (each cluster at 1,000, probed every 40 s), before one-shot-tls.ts;
 *   - by hand: the prober's way, connectOnce() and getHealthz(); the shared context, the
 *     certificate checked by the gateway on the first handshake and the session resumed after;
 *   - TLS floor: tls.connect with the pool's context and a TLS session of its own, the request
 *     written and the answer read with no parsing at all: what the connection itself costs, with
 *     TLS 1.3 (what a pool's connections negotiate) and with TLS 1.2 at most (what the prober's
 *     one-shot connections offer, one-shot-tls.ts says why).
 *
 * Every connection resumes a TLS session, as the prober's do in steady state. Prints CPU per probe
 * (user + system, from process.cpuUsage) and the wall-time p50, the median of --rounds rounds of
 * --probes probes.
 *
 * Flags: --probes=300 --rounds=3
 */
import path from 'node:path';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { repoRoot } from '../../hack/localenv/binaries.ts';
import { startEnvironment } from '../../hack/localenv/environment.ts';
import { credentialNamespace } from '../../hack/localenv/gateway.ts';
import type { ClusterTarget } from '../../manager/gateway/clusters/cluster.ts';
import { getHealthz } from '../../manager/gateway/health/healthz-once.ts';
import { createClusterPools } from '../../manager/gateway/proxy/cluster-pools.ts';
import type { KubeObject } from '../../shared/kube/client.ts';
import type { Upstream } from '../../shared/transport/upstream.ts';
import { median, percentile } from './measure.ts';

const flag = (name: string, fallback: number) =>
  Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback);
const probes = flag('probes', 300);
const rounds = flag('rounds', 3);
const log = (line: string) => console.log(line);

type Probe = () => Promise<void>;

const env = await startEnvironment({
  stateDir: path.join(repoRoot, '.local', 'bench-probe'),
  managedClusters: ['cluster1'],
  gateway: false,
  clusterCredentials: true,
  log: (line) => log(`[bench env] ${line}`),
});
try {
  const cluster1 = env.managed[0];
  if (!cluster1) throw new Error('the environment has no cluster1');
  const secret = await env.hub.client.get<KubeObject & { data: { token: string } }>(
    `/api/v1/namespaces/${credentialNamespace}/secrets/cluster1`,
  );
  const token = Buffer.from(secret.data.token, 'base64').toString();
  const caBundle = cluster1.pki.ca.cert;
  const target: ClusterTarget = {
    name: 'cluster1',
    labels: {},
    annotations: {},
    creationTimestamp: '',
    resourceVersion: '1',
    endpoint: { type: 'Const', address: cluster1.server, caBundle, insecure: false },
    credential: { type: 'ServiceAccountToken', token },
    health: { healthy: true },
    connectionKey: 'bench',
  };
  const pools = createClusterPools();
  const upstream = pools.get(target);
  if (typeof upstream === 'string') throw new Error(upstream);
  const url = new URL(cluster1.server);

  const ways: [string, Probe][] = [
    ['http.request', () => viaHttpRequest(upstream)],
    [
      'by hand, a TLS context built per probe (the prober at 1,000 clusters before)',
      builtContext(url, caBundle, upstream),
    ],
    ['by hand (the prober now: the shared context, TLS 1.2, its own check)', () => byHand(upstream)],
    ['TLS floor (TLS 1.3)', tlsFloor(url, caBundle, `Bearer ${token}`)],
    ['TLS floor, TLS 1.2', tlsFloor(url, caBundle, `Bearer ${token}`, 'TLSv1.2')],
  ];
  const results = new Map<string, { cpu: number[]; p50: number[] }>(
    ways.map(([n]) => [n, { cpu: [], p50: [] }]),
  );
  for (const [, probe] of ways) for (let i = 0; i < 30; i++) await probe(); // warm up, sessions cached
  for (let round = 0; round < rounds; round++) {
    for (const [name, probe] of ways) {
      const walls: number[] = [];
      const before = process.cpuUsage();
      for (let i = 0; i < probes; i++) {
        const start = performance.now();
        await probe();
        walls.push(performance.now() - start);
      }
      const cpu = process.cpuUsage(before);
      results.get(name)?.cpu.push((cpu.user + cpu.system) / probes);
      results.get(name)?.p50.push(
        percentile(
          walls.sort((a, b) => a - b),
          50,
        ),
      );
    }
  }
  pools.close();
  log(`\none probe of cluster1 (resumed TLS, Connection: close), median of ${rounds} rounds of ${probes}:\n`);
  log('| way | CPU per probe (µs) | wall p50 (ms) |');
  log('|---|---:|---:|');
  for (const [name, r] of results)
    log(`| ${name} | ${median(r.cpu).toFixed(0)} | ${median(r.p50).toFixed(2)} |`);
} finally {
  await env.stop();
}

function expectOk(status: number): void {
  if (status !== 200) throw new Error(`/healthz returned ${status}`);
}

function viaHttpRequest(up: Upstream): Promise<void> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { host: up.hostHeader, connection: 'close' };
    if (up.authorization) headers.authorization = up.authorization;
    up.request(
      { agent: up.agent, hostname: up.hostname, port: up.port, path: '/healthz', headers },
      (res) => {
        res.resume();
        res.on('end', () => {
          expectOk(res.statusCode ?? 0);
          resolve();
        });
      },
    )
      .on('error', reject)
      .end();
  });
}

/** The prober's one request on `socket`, expecting 200. */
async function healthzOn(socket: Duplex, up: Upstream): Promise<void> {
  const answer = await getHealthz(socket, {
    path: '/healthz',
    host: up.hostHeader,
    userAgent: 'bench',
    timeoutMs: 5000,
    ...(up.authorization ? { authorization: up.authorization } : {}),
  });
  expectOk(answer.status);
}

async function byHand(up: Upstream): Promise<void> {
  await healthzOn(await up.connectOnce(), up);
}

/** getHealthz() over a connection with a context built for it from the CA, resuming the last session. */
function builtContext(url: URL, ca: string, up: Upstream): Probe {
  let session: Buffer | undefined;
  return async () => {
    const socket = tls.connect({
      host: url.hostname,
      port: Number(url.port),
      secureContext: tls.createSecureContext({ ca }),
      ...(session ? { session } : {}),
    });
    socket.on('session', (s: Buffer) => {
      session = s;
    });
    await healthzOn(socket, up);
  };
}

function tlsFloor(url: URL, ca: string, authorization: string, maxVersion?: tls.SecureVersion): Probe {
  const secureContext = tls.createSecureContext({ ca, ...(maxVersion ? { maxVersion } : {}) });
  let session: Buffer | undefined;
  const request = `GET /healthz HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: ${authorization}\r\nConnection: close\r\n\r\n`;
  return () =>
    new Promise((resolve, reject) => {
      const socket = tls.connect({
        host: url.hostname,
        port: Number(url.port),
        secureContext,
        ...(session ? { session } : {}),
      });
      socket.on('session', (s: Buffer) => {
        session = s;
      });
      socket.write(request);
      let first: Buffer | undefined;
      socket.on('data', (chunk: Buffer) => {
        first ??= chunk;
      });
      socket.on('end', () => {
        expectOk(Number(first?.subarray(9, 12).toString()));
        resolve();
      });
      socket.on('error', reject);
    });
}

/**
 * What each layer of a tunnelled byte costs the gateway's side, in-process and without Kubernetes
 * (`npm run bench:tls-layers`): a server process streams 200 MiB, and this process (the gateway's role)
 * reads it through
 * - `tls over tcp`: the direct path's upstream connection;
 * - `h2 stream over tls`: a tunnel session's stream, without the end-to-end TLS (the bytes the hub relays);
 * - `tls over h2 stream over tls`: the hub-credential tunnel, end-to-end TLS inside a stream of the session;
 * - `h2 over tls over tcp`: what the direct path really reads, a response of an HTTP/2 session to the
 *   cluster (shared/transport/http2-sessions.ts) over TLS;
 * - `h2 over tls over h2 stream over tls`: what the tunnelled path really reads, the same HTTP/2 session
 *   run over TLS inside a tunnel stream (the agent's role pipes the stream to the cluster's role).
 * It prints this process's CPU per MiB (user and system, every thread) and its throughput, the median of
 * 5 interleaved rounds, and the last two rows' ratio (issue 33's target for the gateway: at most 1.3x).
 * The HTTP/2 settings are the tunnel's (shared/tunnel/protocol.ts) and the cluster sessions'.
 *
 * Flags: --only=<comma-separated layer names> (default: all) --rounds=N (5) --mib=M (200).
 */
import { fork } from 'node:child_process';
import http2 from 'node:http2';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';
import { createCertificateAuthority, type KeyPair } from '../../../shared/pki.ts';
import { connectionWindowBytes, streamWindowBytes } from '../../../shared/tunnel/protocol.ts';

const MiB = 1 << 20;
const args = new Map(
  process.argv
    .slice(2)
    .filter((a) => a.startsWith('--') && a.includes('='))
    .map((a) => a.slice(2).split('=', 2) as [string, string]),
);
const totalBytes = Number(args.get('mib') ?? process.env.TLS_LAYERS_MIB ?? 200) * MiB;
const rounds = Number(args.get('rounds') ?? 5);
/** The cluster sessions' windows (shared/transport/http2-sessions.ts). */
const clusterStreamWindow = 1 << 20;
const clusterConnectionWindow = 16 << 20;

type Ports = { tls: number; h2: number; h2Blob: number };

/**
 * The server side: a TLS and a plain TCP blob server, an HTTP/2 blob server over TLS (a cluster's
 * kube-apiserver, or the aggregator in front of it), and an HTTP/2-over-TLS relay to any of them (the
 * agent's role, as agent/tunnel/relay.ts: its CONNECT streams piped to a TCP connection).
 */
async function serve(pair: KeyPair): Promise<Ports> {
  const chunk = Buffer.alloc(64 * 1024, 7);
  const send = (socket: {
    write(b: Buffer): boolean;
    once(e: 'drain', f: () => void): void;
    end(): void;
  }) => {
    let sent = 0;
    const write = () => {
      while (sent < totalBytes) {
        sent += chunk.length;
        if (!socket.write(chunk)) return void socket.once('drain', write);
      }
      socket.end();
    };
    write();
  };
  const listen = async (server: net.Server) => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as net.AddressInfo).port;
  };
  const tlsPort = await listen(tls.createServer(pair, send));
  const plainPort = await listen(net.createServer(send));
  const blob = http2.createSecureServer({ ...pair, settings: { initialWindowSize: streamWindowBytes } });
  blob.on('stream', (stream) => {
    stream.respond({ ':status': 200 });
    send(stream);
  });
  const h2BlobPort = await listen(blob);
  const relay = http2.createSecureServer({
    ...pair,
    settings: { enablePush: false, initialWindowSize: streamWindowBytes },
    maxSessionMemory: 32,
  });
  relay.on('session', (session) => session.setLocalWindowSize(connectionWindowBytes));
  relay.on('stream', (stream, headers) => {
    const path = headers[':path'] ?? headers[':authority'];
    const port = path === '/tls' ? tlsPort : path === '/h2' ? h2BlobPort : plainPort;
    const upstream = net.connect(port, '127.0.0.1');
    upstream.setNoDelay(true);
    upstream.once('connect', () => {
      stream.respond({ ':status': 200 });
      stream.pipe(upstream);
      upstream.pipe(stream);
    });
  });
  return { tls: tlsPort, h2: await listen(relay), h2Blob: h2BlobPort };
}

function drain(stream: NodeJS.ReadableStream): Promise<number> {
  return new Promise((resolve, reject) => {
    let bytes = 0;
    stream.on('data', (d: Buffer) => {
      bytes += d.length;
    });
    stream.on('end', () => resolve(bytes));
    stream.on('error', reject);
  });
}

/** A tunnel session (as manager/gateway/tunnel/session.ts sets it up) and one stream of it. */
async function tunnelStream(ports: Ports, ca: string, path: string) {
  const session = http2.connect(`https://127.0.0.1:${ports.h2}`, {
    ca,
    servername: 'localhost',
    settings: { enablePush: false, initialWindowSize: streamWindowBytes },
    maxSessionMemory: 64,
  });
  session.on('connect', () => session.setLocalWindowSize(connectionWindowBytes));
  const stream = session.request({ ':method': 'POST', ':path': path }, { endStream: false });
  await new Promise((resolve) => stream.once('response', resolve));
  return { session, stream };
}

/** One response of an HTTP/2 session to the cluster (http2-sessions.ts's settings) over `socket`. */
async function clusterResponse(socket: tls.TLSSocket): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    if (!socket.connecting && socket.alpnProtocol) return resolve();
    socket.once('secureConnect', resolve);
    socket.once('error', reject);
  });
  const session = http2.connect('https://localhost', {
    createConnection: () => socket,
    settings: { enablePush: false, initialWindowSize: clusterStreamWindow },
    maxSessionMemory: 32,
  });
  const widen = () => session.setLocalWindowSize(clusterConnectionWindow);
  if (session.connecting) session.once('connect', widen);
  else widen();
  const bytes = await drain(session.request({ ':path': '/blob' }));
  session.close();
  return bytes;
}

const clusterTls = (ca: string, socket?: Duplex, port?: number) =>
  tls.connect({
    ...(socket ? { socket } : { host: '127.0.0.1', port }),
    ca,
    servername: 'localhost',
    ALPNProtocols: ['h2', 'http/1.1'],
  });

const layers: Record<string, (ports: Ports, ca: string) => Promise<number>> = {
  'tls over tcp': (ports, ca) =>
    drain(tls.connect({ host: '127.0.0.1', port: ports.tls, ca, servername: 'localhost' })),
  'h2 stream over tls': async (ports, ca) => {
    const { session, stream } = await tunnelStream(ports, ca, '/plain');
    const bytes = await drain(stream);
    session.close();
    return bytes;
  },
  'tls over h2 stream over tls': async (ports, ca) => {
    const { session, stream } = await tunnelStream(ports, ca, '/tls');
    const bytes = await drain(tls.connect({ socket: stream, ca, servername: 'localhost' }));
    session.close();
    return bytes;
  },
  'h2 over tls over tcp': (ports, ca) => clusterResponse(clusterTls(ca, undefined, ports.h2Blob)),
  'h2 over tls over h2 stream over tls': async (ports, ca) => {
    const { session, stream } = await tunnelStream(ports, ca, '/h2');
    const bytes = await clusterResponse(clusterTls(ca, stream));
    session.close();
    return bytes;
  },
};

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

if (process.argv[2] === '--serve') {
  const pair = JSON.parse(process.env.TLS_LAYERS_PAIR ?? '{}') as KeyPair;
  process.send?.(await serve(pair));
} else {
  const only = args.get('only')?.split(',');
  const chosen = Object.entries(layers).filter(([name]) => !only || only.includes(name));
  if (chosen.length === 0) throw new Error(`--only: none of ${Object.keys(layers).join(', ')}`);
  const authority = await createCertificateAuthority('tls-layers bench');
  const pair = await authority.issue({ commonName: 'localhost', dnsNames: ['localhost'], usage: 'server' });
  const server = fork(fileURLToPath(import.meta.url), ['--serve'], {
    env: { ...process.env, TLS_LAYERS_PAIR: JSON.stringify(pair), TLS_LAYERS_MIB: String(totalBytes / MiB) },
  });
  const ports = await new Promise<Ports>((resolve) => server.once('message', (m) => resolve(m as Ports)));
  const results = new Map<string, { cpu: number[]; rate: number[] }>();
  for (let round = 0; round < rounds; round++) {
    for (const [name, read] of chosen) {
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      const bytes = await read(ports, authority.cert);
      const cpu = process.cpuUsage(cpu0);
      const seconds = (performance.now() - t0) / 1000;
      if (bytes !== totalBytes) throw new Error(`${name}: read ${bytes} bytes of ${totalBytes}`);
      const r = results.get(name) ?? { cpu: [], rate: [] };
      r.cpu.push((cpu.user + cpu.system) / 1000 / (bytes / MiB));
      r.rate.push(bytes / MiB / seconds);
      results.set(name, r);
    }
  }
  server.kill();
  console.log(`| layers the reader runs | CPU ms/MiB | MiB/s |\n|:--|--:|--:|`);
  for (const [name, r] of results) {
    console.log(`| ${name} | ${median(r.cpu).toFixed(2)} | ${median(r.rate).toFixed(0)} |`);
  }
  const direct = results.get('h2 over tls over tcp');
  const tunnelled = results.get('h2 over tls over h2 stream over tls');
  if (direct && tunnelled) {
    const ratio = median(tunnelled.cpu) / median(direct.cpu);
    console.log(
      `\ntunnelled against direct, CPU per MiB: ${ratio.toFixed(2)}x (issue 33's target: at most 1.3x)`,
    );
  }
  process.exit(0);
}

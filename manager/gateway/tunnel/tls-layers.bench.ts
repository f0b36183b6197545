/**
 * What each layer of a tunnelled byte costs the gateway's side, in-process and without Kubernetes
 * (`npm run bench:tls-layers`): a server process streams 200 MiB, and this process (the gateway's role)
 * reads it through
 * - `tls over tcp`: the direct path's upstream connection;
 * - `h2 stream over tls`: a tunnel session's stream, without the end-to-end TLS (the bytes the hub relays);
 * - `tls over h2 stream over tls`: the hub-credential tunnel, end-to-end TLS inside a stream of the session.
 * It prints this process's CPU per MiB (user and system, every thread) and its throughput, the median of
 * 5 interleaved rounds. The question it answers: does running TLS over an HTTP/2 stream (a JS stream under
 * `tls.connect({ socket })`, not a native socket) cost more than its two layers do apart?
 */
import { fork } from 'node:child_process';
import http2 from 'node:http2';
import net from 'node:net';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';
import { createCertificateAuthority, type KeyPair } from '../../../shared/pki.ts';

const MiB = 1 << 20;
const totalBytes = 200 * MiB;
const rounds = 5;
const windowBytes = 16 * MiB;

type Ports = { tls: number; h2: number };

/** The server side: a TLS and a plain TCP blob server, and an HTTP/2-over-TLS relay to either (the agent's role). */
async function serve(pair: KeyPair): Promise<Ports> {
  const chunk = Buffer.alloc(64 * 1024, 7);
  const send = (socket: net.Socket) => {
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
  const relay = http2.createSecureServer({ ...pair, settings: { initialWindowSize: windowBytes } });
  relay.on('session', (session) => session.setLocalWindowSize(4 * windowBytes));
  relay.on('stream', (stream, headers) => {
    const upstream = net.connect(headers[':path'] === '/tls' ? tlsPort : plainPort, '127.0.0.1');
    stream.respond({ ':status': 200 });
    stream.pipe(upstream);
    upstream.pipe(stream);
  });
  return { tls: tlsPort, h2: await listen(relay) };
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

async function tunnelStream(ports: Ports, ca: string, path: string) {
  const session = http2.connect(`https://127.0.0.1:${ports.h2}`, {
    ca,
    servername: 'localhost',
    settings: { initialWindowSize: windowBytes },
  });
  session.on('connect', () => session.setLocalWindowSize(4 * windowBytes));
  const stream = session.request({ ':method': 'POST', ':path': path }, { endStream: false });
  await new Promise((resolve) => stream.once('response', resolve));
  return { session, stream };
}

const layers = {
  'tls over tcp': (ports: Ports, ca: string) =>
    drain(tls.connect({ host: '127.0.0.1', port: ports.tls, ca, servername: 'localhost' })),
  'h2 stream over tls': async (ports: Ports, ca: string) => {
    const { session, stream } = await tunnelStream(ports, ca, '/plain');
    const bytes = await drain(stream);
    session.close();
    return bytes;
  },
  'tls over h2 stream over tls': async (ports: Ports, ca: string) => {
    const { session, stream } = await tunnelStream(ports, ca, '/tls');
    const bytes = await drain(tls.connect({ socket: stream, ca, servername: 'localhost' }));
    session.close();
    return bytes;
  },
} as const;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

if (process.argv[2] === '--serve') {
  const pair = JSON.parse(process.env.TLS_LAYERS_PAIR ?? '{}') as KeyPair;
  process.send?.(await serve(pair));
} else {
  const authority = await createCertificateAuthority('tls-layers bench');
  const pair = await authority.issue({ commonName: 'localhost', dnsNames: ['localhost'], usage: 'server' });
  const server = fork(fileURLToPath(import.meta.url), ['--serve'], {
    env: { ...process.env, TLS_LAYERS_PAIR: JSON.stringify(pair) },
  });
  const ports = await new Promise<Ports>((resolve) => server.once('message', (m) => resolve(m as Ports)));
  const results = new Map<string, { cpu: number[]; rate: number[] }>();
  for (let round = 0; round < rounds; round++) {
    for (const [name, read] of Object.entries(layers)) {
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
  process.exit(0);
}

/**
 * The client side of Kubernetes SPDY streaming, as client-go does it
 * (tools/remotecommand v2–v5 and tools/portforward), for tests that talk to
 * the stand-in kubelet directly. kubectl and kube-apiserver remain the real
 * clients in end-to-end tests; this exists to test the server without them.
 */
import type { IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import { SpdyConnection, type SpdyStream } from './spdy.ts';

export interface DialOptions {
  /** e.g. https://127.0.0.1:10250/exec/ns/pod/container?command=echo&stdout=1 */
  url: string | URL;
  /** client-go uses POST for exec and port-forward. */
  method?: 'GET' | 'POST';
  /** X-Stream-Protocol-Version values, preferred first. */
  protocols: string[];
  /** CA for the server certificate; omit with rejectUnauthorized: false to skip verification. */
  ca?: string;
  cert?: string;
  key?: string;
  rejectUnauthorized?: boolean;
}

export class UpgradeRefusedError extends Error {
  readonly statusCode: number;
  readonly body: string;
  readonly headers: IncomingHttpHeaders;
  constructor(statusCode: number, body: string, headers: IncomingHttpHeaders) {
    super(`upgrade refused: HTTP ${statusCode}: ${body.trim()}`);
    this.name = 'UpgradeRefusedError';
    this.statusCode = statusCode;
    this.body = body;
    this.headers = headers;
  }
}

export interface Dialed {
  connection: SpdyConnection;
  /** The protocol the server chose (X-Stream-Protocol-Version of the 101). */
  protocol: string;
  headers: IncomingHttpHeaders;
}

/** Sends the SPDY/3.1 upgrade request and wraps the switched socket in a client-side connection. */
export function dialSpdy(options: DialOptions): Promise<Dialed> {
  return new Promise((resolve, reject) => {
    const req = https.request(options.url, {
      method: options.method ?? 'POST',
      headers: {
        Connection: 'Upgrade',
        Upgrade: 'SPDY/3.1',
        'X-Stream-Protocol-Version': options.protocols,
        'Content-Length': '0',
      },
      ...(options.ca ? { ca: options.ca } : {}),
      ...(options.cert ? { cert: options.cert, key: options.key } : {}),
      rejectUnauthorized: options.rejectUnauthorized ?? true,
      agent: false,
    });
    req.on('upgrade', (res, socket: Duplex, head: Buffer) => {
      const connection = new SpdyConnection(socket, { role: 'client' }, head);
      resolve({
        connection,
        protocol: String(res.headers['x-stream-protocol-version'] ?? ''),
        headers: res.headers,
      });
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => reject(new UpgradeRefusedError(res.statusCode ?? 0, body, res.headers)));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Everything a readable yields until it ends or is torn down. */
export function collect(stream: SpdyStream | undefined): Promise<Buffer> {
  if (!stream) return Promise.resolve(Buffer.alloc(0));
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  return new Promise((resolve) => {
    const done = () => resolve(Buffer.concat(chunks));
    if (stream.readableEnded || stream.destroyed) done();
    stream.once('end', done);
    stream.once('close', done);
  });
}

export interface ExecOptions extends Omit<DialOptions, 'protocols' | 'url'> {
  /** https://host:port of the kubelet. */
  server: string;
  namespace: string;
  pod: string;
  container: string;
  command: string[];
  /** Sent, then stdin is closed; omit for no stdin stream. */
  stdin?: string | Buffer;
  tty?: boolean;
  protocols?: string[];
}

export interface ExecResult {
  stdout: string;
  stderr: string;
  /** What the error stream carried: a metav1.Status JSON (v4+) or a message (v2/v3), '' on success before v4. */
  errorStream: string;
  exitCode: number;
  protocol: string;
}

/**
 * Runs a command like client-go's SPDY executor: error stream first, then
 * stdin/stdout/stderr (and resize for a TTY), copy stdin and close it, read
 * stdout/stderr to EOF, then decode the error stream.
 */
export async function execViaSpdy(options: ExecOptions): Promise<ExecResult> {
  const url = new URL(
    `/exec/${encodeURIComponent(options.namespace)}/${encodeURIComponent(options.pod)}/${encodeURIComponent(options.container)}`,
    options.server,
  );
  for (const arg of options.command) url.searchParams.append('command', arg);
  // The kubelet's parameter names (core/v1 ExecStdinParam etc.), as kube-apiserver sends them.
  const stdin = options.stdin !== undefined;
  if (stdin) url.searchParams.set('input', '1');
  url.searchParams.set('output', '1');
  if (!options.tty) url.searchParams.set('error', '1');
  if (options.tty) url.searchParams.set('tty', '1');

  const { connection, protocol } = await dialSpdy({
    ...options,
    url,
    protocols: options.protocols ?? [
      'v5.channel.k8s.io',
      'v4.channel.k8s.io',
      'v3.channel.k8s.io',
      'v2.channel.k8s.io',
    ],
  });
  try {
    const error = await connection.createStream({ streamType: 'error' });
    const errorText = collect(error);
    const input = stdin ? await connection.createStream({ streamType: 'stdin' }) : undefined;
    const stdout = await connection.createStream({ streamType: 'stdout' });
    const stdoutText = collect(stdout);
    const stderr = options.tty ? undefined : await connection.createStream({ streamType: 'stderr' });
    const stderrText = collect(stderr);
    if (options.tty && !protocol.startsWith('v2.')) {
      const resize = await connection.createStream({ streamType: 'resize' });
      resize.write(`${JSON.stringify({ Width: 80, Height: 24 })}\n`);
    }
    if (input) input.end(options.stdin);
    const [out, err] = await Promise.all([stdoutText, stderrText]);
    const errorStream = (await errorText).toString();
    return {
      stdout: out.toString(),
      stderr: err.toString(),
      errorStream,
      exitCode: exitCodeFrom(errorStream, protocol),
      protocol,
    };
  } finally {
    await connection.close();
  }
}

/** client-go errorDecoderV4: Success → 0, NonZeroExitCode → the ExitCode cause; v2/v3: any message → 1. */
export function exitCodeFrom(errorStream: string, protocol: string): number {
  if (!protocol.startsWith('v4.') && !protocol.startsWith('v5.')) return errorStream ? 1 : 0;
  const status = JSON.parse(errorStream) as {
    status: string;
    reason?: string;
    details?: { causes?: { reason?: string; message?: string }[] };
  };
  if (status.status === 'Success') return 0;
  const cause = status.details?.causes?.find((c) => c.reason === 'ExitCode');
  if (status.reason === 'NonZeroExitCode' && cause?.message) return Number(cause.message);
  throw new Error(`exec failed: ${errorStream}`);
}

export interface PortForwardSession {
  connection: SpdyConnection;
  /** Opens the error and data streams of one forwarded connection, as client-go handleConnection does. */
  open(port: number): Promise<{ data: SpdyStream; error: SpdyStream; errorText: Promise<string> }>;
  close(): Promise<void>;
}

export async function portForwardViaSpdy(
  options: Omit<DialOptions, 'protocols' | 'url'> & { server: string; namespace: string; pod: string },
): Promise<PortForwardSession> {
  const url = new URL(
    `/portForward/${encodeURIComponent(options.namespace)}/${encodeURIComponent(options.pod)}`,
    options.server,
  );
  const { connection } = await dialSpdy({ ...options, url, protocols: ['portforward.k8s.io'] });
  let nextRequestId = 0;
  return {
    connection,
    async open(port) {
      const requestId = nextRequestId++;
      const headers = { streamType: 'error', port: String(port), requestID: String(requestId) };
      const error = await connection.createStream(headers);
      // client-go closes its side of the error stream at once and only reads it.
      error.end();
      const errorText = collect(error).then((b) => b.toString());
      const data = await connection.createStream({ ...headers, streamType: 'data' });
      return { data, error, errorText };
    },
    close: () => connection.close(),
  };
}

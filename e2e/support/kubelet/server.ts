/**
 * A stand-in kubelet: an HTTPS server on loopback that serves the kubelet's
 * streaming endpoints (containerLogs, exec, portForward) with fake containers,
 * so that `kubectl logs -f`, `kubectl exec` and `kubectl port-forward` can run
 * through a real kube-apiserver on a machine with no container runtime.
 * Register it with node.ts (a Node whose address is 127.0.0.1 and whose
 * kubeletEndpoint port is this server's).
 *
 * What kube-apiserver needs to reach it (read in k8s.io/kubernetes v1.36.3):
 *
 * - Address: pkg/kubelet/client/kubelet_client.go GetConnectionInfo dials the
 *   first status.addresses entry whose type is in --kubelet-preferred-address-types
 *   (default Hostname,InternalDNS,InternalIP,ExternalDNS,ExternalIP, set in
 *   cmd/kube-apiserver/app/options/options.go) on
 *   status.daemonEndpoints.kubeletEndpoint.Port (--kubelet-port, 10250, only if
 *   that is 0). With the default order it dials the Hostname "localhost", which
 *   may resolve to ::1 first; pass --kubelet-preferred-address-types=InternalIP,Hostname
 *   so it dials 127.0.0.1, where this server listens.
 * - Loopback is allowed for logs, exec, attach and port-forward:
 *   pkg/registry/core/pod/strategy.go LogLocation, streamLocation and
 *   PortForwardLocation use the node address as is. Only the proxy
 *   subresources refuse it: nodes/proxy (pkg/registry/core/node/strategy.go
 *   isProxyableHostname, IsGlobalUnicast) and pods/proxy (pod ResourceLocation,
 *   pod IP IsGlobalUnicast) answer 400 "address not allowed".
 * - TLS: without --kubelet-certificate-authority the apiserver skips verifying
 *   the kubelet's certificate (kubelet_client.go transportConfig sets
 *   TLS.Insecure when there is no CA). With it, this server's certificate must
 *   chain to that CA and name the dialled host: issue it with IP SAN 127.0.0.1
 *   and DNS SAN localhost. --kubelet-client-certificate/--kubelet-client-key is
 *   the client certificate the apiserver presents; set `tls.clientCa` to require
 *   and verify it, as a kubelet with --client-ca-file does. `kubectl logs
 *   --insecure-skip-tls-verify-backend` uses a transport that skips verification
 *   (strategy.go LogLocation).
 * - Protocol: only SPDY/3.1 (and plain HTTP/1.1 for logs) reaches the kubelet.
 *   pkg/registry/core/pod/rest/subresources.go: with
 *   TranslateStreamCloseWebsocketRequests (beta, on) kubectl's WebSocket exec
 *   and attach are translated at the apiserver into a SPDY client towards the
 *   kubelet (k8s.io/apiserver/pkg/util/proxy/streamtranslator.go, client-go SPDY
 *   executor, PING every 5 s); with PortForwardWebsockets (beta, on) the
 *   port-forward WebSocket is unwrapped (streamtunnel.go) and the SPDY frames it
 *   carries go to the kubelet. SPDY from kubectl is proxied byte for byte
 *   (UpgradeAwareHandler). ExtendWebSocketsToKubelet (beta, on in 1.36) would
 *   proxy WebSockets straight to the kubelet, but only for a Node that lists it
 *   in status.declaredFeatures (checkNodeSupportsWebsockets); the stand-in Node
 *   declares nothing, so keep it that way.
 * - AuthorizePodWebsocketUpgradeCreatePermission (beta, on) additionally needs
 *   the `create` verb on pods/exec, pods/attach and pods/portforward for
 *   WebSocket clients: a concern for the RBAC of whoever calls, not for this server.
 * - Exec flags reach the kubelet as input/output/error/tty=1 (core/v1
 *   ExecStdinParam etc., written by strategy.go streamParams), not as the
 *   stdin/stdout/stderr names of the pods/exec API.
 *
 * Checked end to end against kube-apiserver and kubectl v1.36.3 with
 * --kubelet-certificate-authority, --kubelet-client-certificate/key and this
 * server requiring client certificates: kubectl exec (WebSocket and
 * KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false), exec -i, exit codes, port-forward
 * (WebSocket tunnel and KUBECTL_PORT_FORWARD_WEBSOCKETS=false), logs, --tail
 * and -f, under both --kubelet-preferred-address-types=InternalIP,Hostname and
 * the default order.
 *
 * Exec and port-forward follow the kubelet's CRI streaming server
 * (k8s.io/kubelet pkg/cri/streaming remotecommand/httpstream.go, exec.go,
 * portforward/httpstream.go): protocol handshake by X-Stream-Protocol-Version
 * (the first protocol in the client's list that we support), 101 Switching
 * Protocols, one SPDY stream per channel, exit status as a metav1.Status on the
 * error stream.
 */
import { EventEmitter } from 'node:events';
import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Duplex, Readable } from 'node:stream';
import { Writable } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { RstStatus, SpdyConnection, type SpdyStream } from './spdy.ts';

/** remotecommand protocols, newest first; v5 is v4 over SPDY (remotecommand/httpstream.go). */
export const EXEC_PROTOCOLS = [
  'v5.channel.k8s.io',
  'v4.channel.k8s.io',
  'v3.channel.k8s.io',
  'v2.channel.k8s.io',
];
export const PORT_FORWARD_PROTOCOLS = ['portforward.k8s.io'];

export interface ExecContext {
  namespace: string;
  pod: string;
  container: string;
  /** The command and its arguments, from the repeated `command` query parameter. */
  args: string[];
  tty: boolean;
  /** The client's stdin, or null if it asked for none. Ends when the client closes it. */
  stdin: Readable | null;
  /** Discards writes if the client asked for no stdout. */
  stdout: Writable;
  /** With a TTY this is stdout, as on a real terminal. */
  stderr: Writable;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
}

/** A fake executable: writes to ctx.stdout/stderr and returns its exit code. */
export type FakeCommand = (ctx: ExecContext) => number | Promise<number>;

export interface StandInKubeletOptions {
  /** Loopback only; the default. */
  host?: string;
  /** 0 (the default) picks a free port. */
  port?: number;
  /** Serving certificate (SANs 127.0.0.1 and localhost) and, optionally, the CA that client certificates must chain to. */
  tls: { cert: string; key: string; clientCa?: string };
  /** Pod port → local port on 127.0.0.1 for port-forward; unmapped ports echo what they receive. */
  portMap?: Record<number, number>;
  /** Delay between follow-mode log lines (default 1000). */
  logIntervalMs?: number;
  /** Lines a container has logged before anyone asks (default 3). */
  initialLogLines?: number;
  /** Extra or replacement fake commands, by argv[0]. */
  commands?: Record<string, FakeCommand>;
  /** How long to wait for a client to open all the streams it announced (default 30 s). */
  streamCreationTimeoutMs?: number;
}

export interface RequestRecord {
  method: string;
  path: string;
  upgrade: boolean;
  /** CN of the verified client certificate, when `tls.clientCa` is set. */
  clientCommonName?: string;
}

export interface LogStreamRecord {
  namespace: string;
  pod: string;
  container: string;
  follow: boolean;
  linesWritten: number;
  /** True when the client hung up before the server ended the response. */
  clientClosed: boolean;
}

export interface ExecRecord {
  namespace: string;
  pod: string;
  container: string;
  args: string[];
  protocol: string;
  /** Undefined when the client went away before the command finished or before it opened its streams. */
  exitCode?: number;
}

export interface PortForwardRecord {
  namespace: string;
  pod: string;
  port: number;
  requestId: string;
  target: number | 'echo';
  error?: string;
}

export interface StandInKubeletEvents {
  request: [RequestRecord];
  logsClosed: [LogStreamRecord];
  execFinished: [ExecRecord];
  portForwardClosed: [PortForwardRecord];
}

export interface StandInKubelet {
  readonly host: string;
  readonly port: number;
  /** https://host:port */
  readonly url: string;
  readonly events: EventEmitter<StandInKubeletEvents>;
  /** Log responses and SPDY connections currently open. */
  readonly active: { readonly logStreams: number; readonly spdyConnections: number };
  close(): Promise<void>;
}

export async function startStandInKubelet(options: StandInKubeletOptions): Promise<StandInKubelet> {
  const host = options.host ?? '127.0.0.1';
  const events = new EventEmitter<StandInKubeletEvents>();
  // Each open log response, with a promise that settles once it has closed.
  const logStreams = new Map<ServerResponse, Promise<void>>();
  const spdyConnections = new Set<SpdyConnection>();
  const settings: Settings = {
    portMap: options.portMap ?? {},
    logIntervalMs: options.logIntervalMs ?? 1000,
    initialLogLines: options.initialLogLines ?? 3,
    commands: withShell({ ...builtinCommands, ...options.commands }, options.commands?.sh !== undefined),
    streamCreationTimeoutMs: options.streamCreationTimeoutMs ?? 30_000,
    events,
    logStreams,
    spdyConnections,
  };

  const server = https.createServer({
    cert: options.tls.cert,
    key: options.tls.key,
    ...(options.tls.clientCa
      ? { ca: options.tls.clientCa, requestCert: true, rejectUnauthorized: true }
      : {}),
    // No ALPN: Go's HTTP/2-capable transport then speaks HTTP/1.1, which the SPDY upgrade needs.
  });

  server.on('request', (req, res) => {
    const route = parseRoute(req);
    events.emit('request', requestRecord(req, false));
    try {
      if (route.kind === 'healthz' && (req.method === 'GET' || req.method === 'HEAD')) {
        res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end('ok');
      } else if (route.kind === 'logs' && req.method === 'GET') {
        serveLogs(req, res, route, settings);
      } else if ((route.kind === 'exec' || route.kind === 'portForward') && isStreamMethod(req.method)) {
        // The kubelet proxies these with upgradeRequired (server.go getExec, getPortForward).
        res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' }).end('Upgrade request required\n');
      } else {
        res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('404 page not found\n');
      }
    } catch (err) {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(`${(err as Error).message}\n`);
    }
  });

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const route = parseRoute(req);
    events.emit('request', requestRecord(req, true));
    socket.on('error', () => undefined);
    if (route.kind === 'exec' && isStreamMethod(req.method)) serveExec(req, socket, head, route, settings);
    else if (route.kind === 'portForward' && isStreamMethod(req.method))
      servePortForward(req, socket, head, route, settings);
    else rawResponse(socket, 404, '404 page not found');
  });

  // A TLS handshake that fails (say, a client without the required certificate) is the client's problem.
  server.on('tlsClientError', () => undefined);

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as net.AddressInfo).port;

  return {
    host,
    port,
    url: `https://${host}:${port}`,
    events,
    active: {
      get logStreams() {
        return logStreams.size;
      },
      get spdyConnections() {
        return spdyConnections.size;
      },
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      const pending = [...logStreams.values(), ...[...spdyConnections].map((c) => c.done)];
      for (const res of logStreams.keys()) res.destroy();
      for (const conn of spdyConnections) conn.destroy();
      server.closeAllConnections();
      await Promise.all([closed, ...pending]);
    },
  };
}

interface Settings {
  portMap: Record<number, number>;
  logIntervalMs: number;
  initialLogLines: number;
  commands: Record<string, FakeCommand>;
  streamCreationTimeoutMs: number;
  events: EventEmitter<StandInKubeletEvents>;
  logStreams: Map<ServerResponse, Promise<void>>;
  spdyConnections: Set<SpdyConnection>;
}

type Route =
  | { kind: 'healthz' }
  | { kind: 'logs'; namespace: string; pod: string; container: string; query: URLSearchParams }
  | { kind: 'exec'; namespace: string; pod: string; uid: string; container: string; query: URLSearchParams }
  | { kind: 'portForward'; namespace: string; pod: string; uid: string; query: URLSearchParams }
  | { kind: 'unknown' };

/** The kubelet's routes (pkg/kubelet/server/server.go), including the forms with a pod UID. */
function parseRoute(req: IncomingMessage): Route {
  const url = new URL(req.url ?? '/', 'https://stand-in.invalid');
  let parts: string[];
  try {
    parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  } catch {
    return { kind: 'unknown' };
  }
  const [head, namespace, pod, a, b] = parts;
  const query = url.searchParams;
  if (head === 'healthz' && parts.length === 1) return { kind: 'healthz' };
  if (!namespace || !pod) return { kind: 'unknown' };
  if (head === 'containerLogs' && parts.length === 4 && a)
    return { kind: 'logs', namespace, pod, container: a, query };
  if (head === 'exec' && parts.length === 4 && a)
    return { kind: 'exec', namespace, pod, uid: '', container: a, query };
  if (head === 'exec' && parts.length === 5 && a && b)
    return { kind: 'exec', namespace, pod, uid: a, container: b, query };
  if (head === 'portForward' && parts.length === 3)
    return { kind: 'portForward', namespace, pod, uid: '', query };
  if (head === 'portForward' && parts.length === 4 && a)
    return { kind: 'portForward', namespace, pod, uid: a, query };
  return { kind: 'unknown' };
}

function isStreamMethod(method: string | undefined): boolean {
  return method === 'GET' || method === 'POST';
}

function requestRecord(req: IncomingMessage, upgrade: boolean): RequestRecord {
  const record: RequestRecord = { method: req.method ?? '', path: req.url ?? '', upgrade };
  const socket = req.socket as TLSSocket;
  if (socket.authorized) {
    const cn = socket.getPeerCertificate()?.subject?.CN;
    if (cn) record.clientCommonName = Array.isArray(cn) ? cn[0] : cn;
  }
  return record;
}

// ---------------------------------------------------------------------------
// Logs

/**
 * A container whose log is "log line 1", "log line 2", ...: initialLogLines
 * lines exist already; with follow=true a new one is written every
 * logIntervalMs until the client hangs up. Honours tailLines, limitBytes and
 * timestamps like the kubelet (PodLogOptions query parameters).
 */
function serveLogs(
  req: IncomingMessage,
  res: ServerResponse,
  route: Extract<Route, { kind: 'logs' }>,
  settings: Settings,
): void {
  const { query } = route;
  const follow = query.get('follow') === 'true';
  const timestamps = query.get('timestamps') === 'true';
  const tailLines = nonNegativeInt(query.get('tailLines') ?? query.get('tail'));
  const limitBytes = positiveInt(query.get('limitBytes'));
  const record: LogStreamRecord = {
    namespace: route.namespace,
    pod: route.pod,
    container: route.container,
    follow,
    linesWritten: 0,
    clientClosed: false,
  };

  res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-cache' });
  res.flushHeaders();
  req.socket.setNoDelay(true);
  let closed!: () => void;
  settings.logStreams.set(
    res,
    new Promise<void>((resolve) => {
      closed = resolve;
    }),
  );

  let bytesWritten = 0;
  let timer: NodeJS.Timeout | undefined;
  const finish = () => {
    clearInterval(timer);
    if (!settings.logStreams.delete(res)) return;
    settings.events.emit('logsClosed', record);
    closed();
  };
  res.on('close', () => {
    // 'close' before the response finished means the client (or apiserver) hung up.
    if (!res.writableFinished) record.clientClosed = true;
    finish();
  });

  /** Writes one line; false once limitBytes is reached and the response has ended. */
  const writeLine = (n: number): boolean => {
    let line = `${timestamps ? `${new Date().toISOString()} ` : ''}log line ${n}\n`;
    if (limitBytes !== undefined && bytesWritten + Buffer.byteLength(line) >= limitBytes) {
      line = Buffer.from(line)
        .subarray(0, limitBytes - bytesWritten)
        .toString();
      res.end(line);
      record.linesWritten++;
      return false;
    }
    res.write(line);
    bytesWritten += Buffer.byteLength(line);
    record.linesWritten++;
    return true;
  };

  const existing = settings.initialLogLines;
  const first = tailLines === undefined ? 1 : Math.max(1, existing - tailLines + 1);
  for (let n = first; n <= existing; n++) {
    if (!writeLine(n)) return;
  }
  if (!follow) {
    res.end();
    return;
  }
  let next = existing + 1;
  timer = setInterval(() => {
    if (res.destroyed || res.writableEnded) return finish();
    if (!writeLine(next++)) clearInterval(timer);
  }, settings.logIntervalMs);
}

function nonNegativeInt(value: string | null): number | undefined {
  if (value === null || !/^\d+$/.test(value)) return undefined;
  return Number(value);
}

function positiveInt(value: string | null): number | undefined {
  const n = nonNegativeInt(value);
  return n !== undefined && n > 0 ? n : undefined;
}

// ---------------------------------------------------------------------------
// SPDY upgrade

/**
 * httpstream.Handshake plus spdy.NewResponseUpgrader: picks the first client
 * protocol we support, answers 400/403 like the kubelet when that fails, and
 * otherwise switches the socket to SPDY.
 */
function upgrade(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  serverProtocols: string[],
  settings: Settings,
): { conn: SpdyConnection; protocol: string } | undefined {
  const offered = (req.headersDistinct['x-stream-protocol-version'] ?? [])
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter(Boolean);
  if (offered.length === 0) {
    rawResponse(socket, 400, 'unable to upgrade: header X-Stream-Protocol-Version does not exist in request');
    return undefined;
  }
  const protocol = offered.find((p) => serverProtocols.includes(p));
  if (!protocol) {
    rawResponse(
      socket,
      403,
      `unable to upgrade: unable to negotiate protocol: client supports [${offered.join(' ')}], server accepts [${serverProtocols.join(' ')}]`,
      serverProtocols.map((p) => ['X-Accepted-Stream-Protocol-Versions', p]),
    );
    return undefined;
  }
  const connection = String(req.headers.connection ?? '').toLowerCase();
  const upgradeHeader = String(req.headers.upgrade ?? '').toLowerCase();
  if (!connection.includes('upgrade') || !upgradeHeader.includes('spdy/3.1')) {
    rawResponse(socket, 400, 'unable to upgrade: missing upgrade headers in request');
    return undefined;
  }
  socket.write(
    'HTTP/1.1 101 Switching Protocols\r\n' +
      'Connection: Upgrade\r\n' +
      'Upgrade: SPDY/3.1\r\n' +
      `X-Stream-Protocol-Version: ${protocol}\r\n` +
      '\r\n',
  );
  const conn = new SpdyConnection(socket, { role: 'server' }, head);
  settings.spdyConnections.add(conn);
  conn.once('close', () => settings.spdyConnections.delete(conn));
  return { conn, protocol };
}

function rawResponse(
  socket: Duplex,
  status: number,
  message: string,
  headers: [string, string][] = [],
): void {
  const body = Buffer.from(`${message}\n`);
  const extra = headers.map(([k, v]) => `${k}: ${v}\r\n`).join('');
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n` +
      'Content-Type: text/plain; charset=utf-8\r\n' +
      'X-Content-Type-Options: nosniff\r\n' +
      `Content-Length: ${body.length}\r\n` +
      'Connection: close\r\n' +
      extra +
      '\r\n' +
      body.toString(),
  );
}

// ---------------------------------------------------------------------------
// Exec

const STREAM_TYPES = ['error', 'stdin', 'stdout', 'stderr', 'resize'] as const;
type StreamType = (typeof STREAM_TYPES)[number];

function serveExec(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  route: Extract<Route, { kind: 'exec' }>,
  settings: Settings,
): void {
  const { query } = route;
  // The kubelet reads input/output/error/tty=1 (core/v1 ExecStdinParam and friends, which
  // kube-apiserver's streamParams writes); stdin/stdout/stderr, the pods/exec API names, are
  // accepted too for callers that talk to the stand-in directly.
  const flag = (...names: string[]) => names.some((n) => query.get(n) === '1' || query.get(n) === 'true');
  const tty = flag('tty');
  const stdin = flag('input', 'stdin');
  const stdout = flag('output', 'stdout');
  // remotecommand.NewOptions: a TTY has no separate stderr.
  const stderr = flag('error', 'stderr') && !tty;
  if (!stdin && !stdout && !stderr) {
    rawResponse(socket, 400, 'you must specify at least 1 of stdin, stdout, stderr');
    return;
  }
  const upgraded = upgrade(req, socket, head, EXEC_PROTOCOLS, settings);
  if (!upgraded) return;
  const { conn, protocol } = upgraded;
  const version = Number(/^v(\d+)\./.exec(protocol)?.[1] ?? 1);
  const record: ExecRecord = {
    namespace: route.namespace,
    pod: route.pod,
    container: route.container,
    args: query.getAll('command'),
    protocol,
  };

  // Error stream first, then stdin/stdout/stderr as asked, then resize for a TTY from v3 on.
  const expected = 1 + Number(stdin) + Number(stdout) + Number(stderr) + Number(tty && version >= 3);
  const streams: Partial<Record<StreamType, SpdyStream>> = {};
  let received = 0;
  const timer = setTimeout(() => {
    // remotecommand waitForStreams: give up and drop the connection.
    conn.destroy(new Error('timed out waiting for client to create streams'));
  }, settings.streamCreationTimeoutMs);
  conn.once('close', () => {
    clearTimeout(timer);
    if (received < expected) settings.events.emit('execFinished', record);
  });

  conn.on('stream', (stream) => {
    // The kubelet accepts every stream, including ones of a type it does not know.
    stream.reply().catch(() => undefined);
    const type = stream.header('streamtype') as StreamType | undefined;
    if (!type || !STREAM_TYPES.includes(type) || streams[type]) return;
    streams[type] = stream;
    if (type === 'resize') stream.resume(); // terminal sizes mean nothing to a fake shell
    if (++received === expected) {
      clearTimeout(timer);
      runExec(conn, streams, version, route, record, tty, settings).catch(() => conn.destroy());
    }
  });
}

async function runExec(
  conn: SpdyConnection,
  streams: Partial<Record<StreamType, SpdyStream>>,
  version: number,
  route: Extract<Route, { kind: 'exec' }>,
  record: ExecRecord,
  tty: boolean,
  settings: Settings,
): Promise<void> {
  const abort = new AbortController();
  if (conn.closed) abort.abort();
  else conn.once('close', () => abort.abort());
  const stdout = streams.stdout ?? discard();
  const ctx: ExecContext = {
    namespace: route.namespace,
    pod: route.pod,
    container: route.container,
    args: record.args,
    tty,
    stdin: streams.stdin ?? null,
    stdout,
    stderr: tty ? stdout : (streams.stderr ?? discard()),
    signal: abort.signal,
  };
  let exitCode: number | undefined;
  let failure: string | undefined;
  try {
    const name = record.args[0];
    const command = name === undefined ? undefined : settings.commands[name];
    exitCode = command ? await command(ctx) : await commandNotFound(ctx);
  } catch (err) {
    failure = (err as Error).message;
  }
  if (abort.signal.aborted) {
    settings.events.emit('execFinished', record);
    return;
  }
  // The runtime closes the process's stdout/stderr before the status goes out.
  await Promise.all([endStream(streams.stdout), endStream(streams.stderr)]);
  const status = execStatus(record.args, exitCode, failure);
  const error = streams.error;
  if (error) {
    // v4/v5 send the metav1.Status as JSON (v4WriteStatusFunc); v2/v3 send only a failure's message (v1WriteStatusFunc).
    const payload = version >= 4 ? JSON.stringify(status) : status.status === 'Failure' ? status.message : '';
    if (payload) error.write(payload);
    await endStream(error);
  }
  if (exitCode !== undefined) record.exitCode = exitCode;
  settings.events.emit('execFinished', record);
  // remotecommand ServeExec: `defer ctx.conn.Close()` resets stdin and resize, sends GOAWAY.
  await conn.close();
}

interface ExecStatus {
  metadata: Record<string, never>;
  status: 'Success' | 'Failure';
  message?: string;
  reason?: string;
  details?: { causes: { reason?: string; message: string }[] };
  code?: number;
}

/** The metav1.Status that remotecommand ServeExec writes, field for field as encoding/json emits it. */
function execStatus(args: string[], exitCode: number | undefined, failure: string | undefined): ExecStatus {
  if (failure !== undefined) {
    const message = `error executing command in container: ${failure}`;
    return {
      metadata: {},
      status: 'Failure',
      message: `Internal error occurred: ${message}`,
      reason: 'InternalError',
      details: { causes: [{ message }] },
      code: 500,
    };
  }
  if (!exitCode) return { metadata: {}, status: 'Success' };
  return {
    metadata: {},
    status: 'Failure',
    message: `command terminated with non-zero exit code: error executing command [${args.join(' ')}], exit code ${exitCode}`,
    reason: 'NonZeroExitCode',
    details: { causes: [{ reason: 'ExitCode', message: String(exitCode) }] },
  };
}

function endStream(stream: SpdyStream | undefined): Promise<void> {
  if (!stream || stream.destroyed || stream.writableFinished) return Promise.resolve();
  return new Promise((resolve) => {
    stream.once('close', resolve);
    stream.end(resolve);
  });
}

function discard(): Writable {
  return new Writable({ write: (_chunk, _enc, cb) => cb() });
}

// ---------------------------------------------------------------------------
// Fake commands

function write(stream: Writable, text: string): Promise<void> {
  return new Promise((resolve) => stream.write(text, () => resolve()));
}

/** Resolves when a readable ends or is torn down, whichever comes first. */
function whenDone(stream: Readable): Promise<void> {
  if (stream.readableEnded || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    stream.once('end', resolve);
    stream.once('close', resolve);
  });
}

async function commandNotFound(ctx: ExecContext): Promise<number> {
  await write(ctx.stderr, `${ctx.args[0] ?? ''}: command not found\n`);
  return 127;
}

/**
 * The fake container's executables: echo, cat (stdin to stdout), hostname
 * (the pod's name), true, false, sleep N, and `sh -c 'cmd args; cmd args'`
 * with `exit N`; words are split on whitespace, no quoting. Anything else
 * prints "command not found" to stderr and exits 127.
 */
export const builtinCommands: Record<string, FakeCommand> = withShell({
  async echo(ctx) {
    await write(ctx.stdout, `${ctx.args.slice(1).join(' ')}\n`);
    return 0;
  },
  async cat(ctx) {
    if (ctx.args.length > 1) {
      await write(ctx.stderr, `cat: ${ctx.args[1]}: No such file or directory\n`);
      return 1;
    }
    const stdin = ctx.stdin;
    if (!stdin) return 0;
    stdin.on('data', (chunk: Buffer) => {
      if (!ctx.stdout.write(chunk)) {
        stdin.pause();
        ctx.stdout.once('drain', () => stdin.resume());
      }
    });
    await whenDone(stdin);
    return 0;
  },
  async hostname(ctx) {
    await write(ctx.stdout, `${ctx.pod}\n`);
    return 0;
  },
  true: () => 0,
  false: () => 1,
  async sleep(ctx) {
    const seconds = Number(ctx.args[1] ?? 0);
    if (!Number.isFinite(seconds) || seconds < 0) {
      await write(ctx.stderr, `sleep: invalid time interval '${ctx.args[1]}'\n`);
      return 1;
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, seconds * 1000);
      ctx.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        resolve();
      });
    });
    return 0;
  },
});

/** Adds `sh -c` over a command table, so scripts can call the table's commands (custom ones too). */
function withShell(table: Record<string, FakeCommand>, keepExisting = false): Record<string, FakeCommand> {
  if (keepExisting) return table;
  table.sh = async (ctx) => {
    if (ctx.args[1] !== '-c' || ctx.args[2] === undefined) {
      await write(ctx.stderr, 'sh: only `sh -c <script>` is supported here\n');
      return 2;
    }
    let code = 0;
    for (const statement of ctx.args[2].split(';')) {
      const words = statement.trim().split(/\s+/).filter(Boolean);
      const name = words[0];
      if (name === undefined) continue;
      if (name === 'exit') return Number(words[1] ?? code) & 0xff;
      const command = table[name];
      const sub = { ...ctx, args: words };
      code = command ? await command(sub) : await commandNotFound(sub);
    }
    return code;
  };
  return table;
}

// ---------------------------------------------------------------------------
// Port-forward

interface StreamPair {
  requestId: string;
  port: number;
  data?: SpdyStream;
  error?: SpdyStream;
  timer?: NodeJS.Timeout;
}

function servePortForward(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  route: Extract<Route, { kind: 'portForward' }>,
  settings: Settings,
): void {
  const upgraded = upgrade(req, socket, head, PORT_FORWARD_PROTOCOLS, settings);
  if (!upgraded) return;
  const { conn } = upgraded;
  const pairs = new Map<string, StreamPair>();
  conn.once('close', () => {
    for (const pair of pairs.values()) clearTimeout(pair.timer);
  });

  conn.on('stream', (stream) => {
    // portforward httpStreamReceived: a stream without a valid port or type is reset, not replied to.
    const portHeader = stream.header('port') ?? '';
    const port = /^\d+$/.test(portHeader) ? Number(portHeader) : 0;
    const type = stream.header('streamtype');
    if (port < 1 || port > 65535 || (type !== 'data' && type !== 'error')) {
      stream.reset(RstStatus.Cancel);
      return;
    }
    stream.reply().catch(() => undefined);
    // Old clients send no requestid; the kubelet derives one from the stream ids (httpStreamHandler.requestID).
    const requestId = stream.header('requestid') ?? String(type === 'error' ? stream.id : stream.id - 2);
    let pair = pairs.get(requestId);
    if (!pair) {
      const created: StreamPair = { requestId, port };
      created.timer = setTimeout(() => {
        pairs.delete(requestId);
        created.error?.end(`(conn=stand-in, request=${requestId}) timed out waiting for streams`);
      }, settings.streamCreationTimeoutMs);
      pairs.set(requestId, created);
      pair = created;
    }
    if (pair[type]) {
      stream.end(`error processing stream for request ${requestId}: ${type} stream already assigned`);
      return;
    }
    pair[type] = stream;
    if (pair.data && pair.error) {
      clearTimeout(pair.timer);
      pairs.delete(requestId);
      forward(pair as Required<StreamPair>, route, settings);
    }
  });
}

/** One forwarded connection: the data stream to 127.0.0.1:<mapped port>, or back to itself. */
function forward(
  pair: Required<StreamPair>,
  route: Extract<Route, { kind: 'portForward' }>,
  settings: Settings,
): void {
  const { data, error, port, requestId } = pair;
  const target = settings.portMap[port];
  const record: PortForwardRecord = {
    namespace: route.namespace,
    pod: route.pod,
    port,
    requestId,
    target: target ?? 'echo',
  };
  // The client closes its side of the error stream at once and only reads it; drain it so it can end.
  error.resume();

  const done = (err?: NodeJS.ErrnoException) => {
    if (err) {
      record.error = err.message;
      // portforward.go handleStreamPortForwardErr: EPIPE and ECONNRESET keep the client's connection open.
      const keep = err.code === 'EPIPE' || err.code === 'ECONNRESET';
      const message = `error forwarding port ${port} to pod ${route.pod}, uid ${route.uid}: ${err.message}`;
      error.write(`${JSON.stringify(keep ? { message } : { closeConnection: true, message })}\n`);
    }
    // The kubelet closes both streams when PortForward returns (`defer ...Close()`).
    data.end();
    error.end();
    settings.events.emit('portForwardClosed', record);
  };

  if (target === undefined) {
    data.on('data', (chunk: Buffer) => data.write(chunk));
    whenDone(data).then(() => done());
    return;
  }

  const upstream = net.connect({ host: '127.0.0.1', port: target });
  let failure: NodeJS.ErrnoException | undefined;
  upstream.setNoDelay(true);
  upstream.on('error', (err: NodeJS.ErrnoException) => {
    failure ??= err;
  });
  upstream.on('connect', () => {
    data.on('data', (chunk: Buffer) => {
      if (!upstream.write(chunk)) {
        data.pause();
        upstream.once('drain', () => data.resume());
      }
    });
    whenDone(data).then(() => {
      // The client's FIN half-closes the target; a reset or lost connection drops it.
      if (data.wasReset || !data.readableEnded) upstream.destroy();
      else upstream.end();
    });
  });
  upstream.on('data', (chunk: Buffer) => {
    if (!data.write(chunk)) {
      upstream.pause();
      data.once('drain', () => upstream.resume());
    }
  });
  upstream.on('close', () => done(failure));
}

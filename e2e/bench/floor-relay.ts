/**
 * The floor of bench:compare: the least a Node process must do to relay the same requests, run as a
 * process of its own so its CPU and memory are read as the gateway's are. Every bytes figure of the
 * gateway is read against it: what is above it is the gateway's own doing, what is below it is not
 * Node's to give.
 *
 *   node e2e/bench/floor-relay.ts <tls|h2> <config.json> <port>
 *
 * - `tls`: a bare TLS relay. Each caller connection is decrypted and encrypted again onto a TLS
 *   connection of its own to the cluster (`pipe` both ways, no HTTP at all), so the caller speaks to
 *   kube-apiserver through it as if directly. No relay that reads HTTP can cost less per byte.
 * - `h2`: a bare HTTP relay of the gateway's shape: HTTPS/1.1 from the caller (as the aggregator
 *   calls the gateway), each request one stream on one HTTP/2 session to the cluster (as the gateway
 *   does, with the same receive windows), the body piped back. No authentication, no authorization,
 *   no header rewriting beyond the protocol change, no access log, no upgrades: the path the gateway
 *   cannot avoid.
 *
 * The config file holds the serving certificate, the cluster's address, CA and client credential.
 * Listens on 127.0.0.1:<port>.
 */
import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';

export interface FloorRelayConfig {
  /** Serving certificate and key of the relay (PEM). */
  cert: string;
  key: string;
  /** The cluster: `https://host:port`, its CA, the client certificate the relay presents. */
  upstream: string;
  upstreamCa: string;
  upstreamCert: string;
  upstreamKey: string;
}

/** The gateway's receive windows (shared/transport/http2-sessions.ts), so the floor is not throttled where the gateway is not. */
const STREAM_WINDOW_BYTES = 1 << 20;
const CONNECTION_WINDOW_BYTES = 16 << 20;

/** HTTP/1.1 headers that have no place on HTTP/2 (RFC 9113 §8.2.2), and Host, which becomes :authority. */
const NOT_ON_HTTP2 = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'host',
]);

function tlsRelay(config: FloorRelayConfig): tls.Server {
  const target = new URL(config.upstream);
  return tls.createServer({ cert: config.cert, key: config.key }, (caller) => {
    const cluster = tls.connect({
      host: target.hostname,
      port: Number(target.port),
      ca: config.upstreamCa,
      cert: config.upstreamCert,
      key: config.upstreamKey,
      servername: target.hostname === '127.0.0.1' ? undefined : target.hostname,
      ALPNProtocols: ['http/1.1'],
    });
    cluster.setNoDelay(true);
    caller.setNoDelay(true);
    const close = () => {
      caller.destroy();
      cluster.destroy();
    };
    caller.on('error', close).on('close', close);
    cluster.on('error', close).on('close', close);
    caller.pipe(cluster).pipe(caller);
  });
}

function h2Relay(config: FloorRelayConfig): https.Server {
  let session: http2.ClientHttp2Session | undefined;
  const connect = (): http2.ClientHttp2Session => {
    if (session && !session.closed && !session.destroyed) return session;
    const opened = http2.connect(config.upstream, {
      ca: config.upstreamCa,
      cert: config.upstreamCert,
      key: config.upstreamKey,
      settings: { enablePush: false, initialWindowSize: STREAM_WINDOW_BYTES },
    });
    opened.on('connect', () => opened.setLocalWindowSize(CONNECTION_WINDOW_BYTES));
    opened.on('error', () => undefined);
    opened.on('close', () => {
      if (session === opened) session = undefined;
    });
    session = opened;
    return opened;
  };
  return https.createServer({ cert: config.cert, key: config.key }, (req, res) => {
    const headers: http2.OutgoingHttpHeaders = { ':method': req.method, ':path': req.url };
    for (const [name, value] of Object.entries(req.headers)) {
      if (!NOT_ON_HTTP2.has(name)) headers[name] = value;
    }
    const hasBody =
      req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
    const stream = connect().request(headers, { endStream: !hasBody });
    stream.on('response', (answer) => {
      const out: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(answer)) {
        if (name[0] !== ':' && value !== undefined) out[name] = value as string | string[];
      }
      res.writeHead(Number(answer[':status']), out);
      // A watch's headers go out at once, as the gateway sends them.
      if (req.url?.includes('watch=')) res.flushHeaders();
      stream.pipe(res);
    });
    stream.on('error', () => res.destroy());
    res.on('close', () => {
      if (!res.writableFinished) stream.close(http2.constants.NGHTTP2_CANCEL);
    });
    if (hasBody) req.pipe(stream);
  });
}

const [mode, configFile, port] = process.argv.slice(2);
if ((mode !== 'tls' && mode !== 'h2') || !configFile || !(Number(port) > 0)) {
  console.error('usage: node e2e/bench/floor-relay.ts <tls|h2> <config.json> <port>');
  process.exit(2);
}
const config = JSON.parse(readFileSync(configFile, 'utf8')) as FloorRelayConfig;
// Exit (not die) on the supervisor's SIGTERM, so a --cpu-prof given through CG_FLOOR_NODE_FLAGS is written.
process.once('SIGTERM', () => process.exit(0));
const server = mode === 'tls' ? tlsRelay(config) : h2Relay(config);
server.listen(Number(port), '127.0.0.1', () => {
  console.log(`${mode} floor relay listening on ${(server.address() as AddressInfo).port}`);
});

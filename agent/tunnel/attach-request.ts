/**
 * Opens the agent's end of the tunnel: an upgrade request to the hub kube-apiserver on
 * `clustergateways/<cluster>/attach`, authenticated with the addon's hub credential (the
 * registration Secret's client certificate, read fresh for every attempt so a rotated one is used).
 * The kube-aggregator relays it to the gateway; a 101 hands over the raw connection.
 *
 * Anything but a 101 is a refusal, reported with the hub's (or the gateway's) Status message: an
 * unknown CA or an expired certificate is the hub's 401, a missing grant its 403, an identity for
 * another cluster the gateway's 403.
 */
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import type { ProxyDecision } from '../../shared/transport/env-proxy.ts';
import { dialRoute } from '../../shared/transport/proxy-agent.ts';
import { attachPath, tunnelUpgradeProtocol } from '../../shared/tunnel/protocol.ts';
import type { Connection } from '../connection/kubeconfig.ts';

/** The hub or the gateway answered, but not with a 101. */
export class AttachRefusedError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.name = 'AttachRefusedError';
    this.code = code;
  }
}

export interface UpgradedConnection {
  socket: Duplex;
  /** Bytes that arrived right behind the 101 (the gateway's HTTP/2 preface may). */
  head: Buffer;
}

const maxRefusalBody = 64 * 1024;

export function requestAttach(
  hub: Connection,
  cluster: string,
  options: {
    timeoutMs: number;
    signal?: AbortSignal;
    userAgent?: string;
    /** Direct (the default), or through a proxy's CONNECT with TLS to the hub inside it. */
    route?: (url: URL) => ProxyDecision;
  },
): Promise<UpgradedConnection> {
  const url = new URL(hub.server);
  const secure = url.protocol === 'https:';
  const basePath = url.pathname.replace(/\/+$/, '');
  const { headers: credentialHeaders, ...tlsOptions } = hub.options;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const port = Number(url.port) || (secure ? 443 : 80);
  const decision = options.route?.(url);
  // Through a proxy: the connection is opened by hand (CONNECT, then TLS to the hub with the hub's
  // CA and client certificate inside it), one per attach as the direct one is.
  const connection: Pick<https.RequestOptions, 'agent' | 'createConnection'> =
    decision && decision.kind !== 'direct'
      ? {
          agent: undefined,
          createConnection: (_o: unknown, done: (err: Error | null, socket: Duplex) => void) => {
            dialRoute(decision, host, port).then(
              (raw) => {
                if (!secure) return done(null, raw);
                const servername =
                  (tlsOptions.servername as string | undefined) ?? (net.isIP(host) ? undefined : host);
                done(
                  null,
                  tls.connect({
                    ...(tlsOptions as tls.ConnectionOptions),
                    socket: raw,
                    ...(servername ? { servername } : {}),
                    ALPNProtocols: ['http/1.1'],
                  }),
                );
              },
              (err: Error) => done(err, undefined as never),
            );
            return undefined;
          },
        }
      : // A connection of its own (never pooled), speaking HTTP/1.1: an h2 connection cannot upgrade.
        { agent: false };
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn();
    };
    const req = (secure ? https : http).request({
      ...tlsOptions,
      host,
      port,
      method: 'POST',
      path: basePath + attachPath(cluster),
      headers: {
        ...(credentialHeaders as Record<string, string> | undefined),
        Connection: 'Upgrade',
        Upgrade: tunnelUpgradeProtocol,
        'Content-Length': '0',
        'User-Agent': options.userAgent ?? 'cluster-gateway-agent',
      },
      ...connection,
      ...(secure ? { ALPNProtocols: ['http/1.1'] } : {}),
    });
    const timer = setTimeout(
      () =>
        settle(() => {
          req.destroy();
          reject(new Error(`no answer to the attach request within ${options.timeoutMs} ms`));
        }),
      options.timeoutMs,
    );
    const onAbort = () =>
      settle(() => {
        req.destroy();
        reject(new Error('stopped'));
      });
    options.signal?.addEventListener('abort', onAbort, { once: true });
    req.once('close', () => options.signal?.removeEventListener('abort', onAbort));

    req.once('upgrade', (res, socket, head) => {
      const protocol = String(res.headers.upgrade ?? '').toLowerCase();
      if (res.statusCode !== 101 || protocol !== tunnelUpgradeProtocol) {
        socket.destroy();
        settle(() =>
          reject(
            new AttachRefusedError(502, `the hub upgraded to "${protocol}", not "${tunnelUpgradeProtocol}"`),
          ),
        );
        return;
      }
      settle(() => resolve({ socket, head }));
    });
    req.once('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= maxRefusalBody) chunks.push(chunk);
      });
      res.once('end', () => {
        const code = res.statusCode ?? 0;
        settle(() =>
          reject(new AttachRefusedError(code, refusalMessage(code, Buffer.concat(chunks).toString()))),
        );
      });
      res.once('error', (err) => settle(() => reject(err)));
    });
    req.once('error', (err) => settle(() => reject(err)));
    req.end();
  });
}

/** The Status message when the body is one (the hub's and the gateway's are), else the start of the body. */
function refusalMessage(code: number, body: string): string {
  try {
    const status = JSON.parse(body) as { message?: unknown };
    if (typeof status.message === 'string' && status.message) return `${code}: ${status.message}`;
  } catch {
    // not JSON
  }
  const text = body.trim().slice(0, 300);
  return text ? `${code}: ${text}` : `${code} ${http.STATUS_CODES[code] ?? ''}`.trim();
}

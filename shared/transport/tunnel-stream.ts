/**
 * Dialing through a tunnel: one HTTP/2 CONNECT stream, usable once the other end has answered 200.
 * The gateway opens such streams on an agent's tunnel (manager/gateway/tunnel/session.ts) and
 * through the replica that holds a tunnel (manager/gateway/tunnel/peers.ts); each says in its own
 * words what went wrong.
 */
import type http2 from 'node:http2';
import type { Duplex } from 'node:stream';
import { asSocket, type TunnelStreamKind, tunnelErrorHeader } from '../tunnel/protocol.ts';

/** The messages a failed dial rejects with, in the words of whoever dials. */
export interface TunnelStreamFailures {
  timedOut(timeoutMs: number): string;
  /** Any answer but 200, with the other end's reason (tunnelErrorHeader) if it gave one. */
  refused(status: number, cause: string | undefined): string;
  failed(err: Error): string;
  closed(): string;
}

/**
 * Resolves with the stream once it is answered 200, an `impersonate` one wrapped for Node's HTTP
 * code (protocol.ts, asSocket); rejects, the stream destroyed, on any other answer, an error, its
 * close or `timeoutMs` without an answer.
 */
export function awaitTunnelStream(
  stream: http2.ClientHttp2Stream,
  kind: TunnelStreamKind,
  timeoutMs: number,
  failures: TunnelStreamFailures,
): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (why: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      stream.destroy();
      reject(new Error(why));
    };
    const timer = setTimeout(() => fail(failures.timedOut(timeoutMs)), timeoutMs);
    stream.once('response', (headers) => {
      const status = Number(headers[':status']);
      if (status !== 200) {
        const cause = headers[tunnelErrorHeader];
        fail(failures.refused(status, cause === undefined ? undefined : String(cause)));
        return;
      }
      settled = true;
      clearTimeout(timer);
      // Plain HTTP/1.1 written by Node's HTTP code must not reach an Http2Stream directly (protocol.ts).
      resolve(kind === 'impersonate' ? asSocket(stream) : stream);
    });
    stream.on('error', (err) => fail(failures.failed(err)));
    stream.once('close', () => fail(failures.closed()));
  });
}

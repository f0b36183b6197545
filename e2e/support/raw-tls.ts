/**
 * Bytes straight onto a TLS connection, for tests that must control the
 * framing of a request themselves (request smuggling, slow or idle clients),
 * which no HTTP client lets them do.
 */
import tls from 'node:tls';
import { frontProxyClient } from './users.ts';

export interface TlsTarget {
  url: string;
  /** A client certificate to present; none by default. */
  client?: { cert: string; key: string };
}

export function openTls(target: TlsTarget): Promise<tls.TLSSocket> {
  const url = new URL(target.url);
  return new Promise((resolve, reject) => {
    const socket = tls.connect(
      { host: url.hostname, port: Number(url.port), ca: frontProxyClient().ca, ...(target.client ?? {}) },
      () => resolve(socket),
    );
    socket.once('error', reject);
  });
}

/** Sends `bytes` on a new connection and resolves with all the server answered, once it closes. */
export async function tlsExchange(target: TlsTarget, bytes: string, timeoutMs = 15_000): Promise<string> {
  const socket = await openTls(target);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString()));
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`no close within ${timeoutMs} ms`)));
    socket.write(bytes);
  });
}

/** The status codes of the HTTP/1.1 responses in a raw answer, in order. */
export function statusCodes(answer: string): number[] {
  return [...answer.matchAll(/(?:^|\r\n)HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
}

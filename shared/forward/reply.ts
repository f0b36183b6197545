/**
 * The gateway's own error answers, as metav1.Status JSON, on a normal
 * response or straight onto a socket (upgrade requests have no
 * ServerResponse).
 */
import type { ServerResponse } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { failureStatus, type KubeStatus } from '../kube/status.ts';
import { FramingError } from './framing.ts';

const RESOURCE = { group: 'cluster.core.oam.dev', kind: 'clustergateways' };

/** 503 for a cluster that cannot be reached, naming the cluster and the cause. */
export function unreachable(cluster: string, cause: string): KubeStatus {
  return failureStatus(503, `cluster "${cluster}" is unreachable: ${cause}`, { name: cluster, ...RESOURCE });
}

/**
 * The gateway's answer to a request it will not forward: the framing's own
 * code (400 or 501), or 400 for a request line or header Node refuses to send.
 */
export function refusal(cluster: string, err: unknown): KubeStatus {
  const code = err instanceof FramingError ? err.code : 400;
  return failureStatus(code, `cannot proxy to cluster "${cluster}": ${errorMessage(err)}`);
}

/** The message of a connection error; Node's happy-eyeballs AggregateError has an empty one. */
export function errorMessage(err: unknown): string {
  if (err instanceof AggregateError && !err.message) {
    return err.errors.map((e: unknown) => (e instanceof Error ? e.message : String(e))).join('; ');
  }
  return err instanceof Error ? err.message : String(err);
}

export function writeStatus(res: ServerResponse, status: KubeStatus): void {
  const body = JSON.stringify(status);
  res.writeHead(status.code, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** Writes a complete HTTP/1.1 response carrying the Status, then closes the socket. */
export function writeStatusToSocket(socket: Duplex, status: KubeStatus): void {
  if (socket.destroyed || !socket.writable) return;
  const body = JSON.stringify(status);
  socket.end(
    `HTTP/1.1 ${status.code} ${STATUS_CODES[status.code] ?? ''}\r\n` +
      'Content-Type: application/json\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      'Connection: close\r\n\r\n' +
      body,
  );
}

/**
 * The plain result every API function returns, so handlers stay testable
 * without sockets and the server wiring only copies it onto the response.
 */
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';

export interface ApiResponse {
  status: number;
  headers: Record<string, string>;
  /** Already serialised; empty for 304. */
  body: string;
}

export function jsonResponse(
  body: unknown,
  options: { status?: number; contentType?: string; headers?: Record<string, string> } = {},
): ApiResponse {
  return {
    status: options.status ?? 200,
    headers: { 'content-type': options.contentType ?? 'application/json', ...options.headers },
    body: JSON.stringify(body),
  };
}

/** Any error as a metav1.Status response; unexpected errors become 500 without internals. */
export function errorResponse(err: unknown): ApiResponse {
  if (err instanceof StatusError) return jsonResponse(err.status, { status: err.code });
  return jsonResponse(failureStatus(500, 'internal error'), { status: 500 });
}

export function badRequest(message: string): StatusError {
  return new StatusError(failureStatus(400, message));
}

/** A strong ETag over the body; `ifNoneMatch` may list several tags or be "*". */
export function etagMatches(etag: string, ifNoneMatch: string | undefined): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch
    .split(',')
    .map((tag) => tag.trim().replace(/^W\//, ''))
    .some((tag) => tag === '*' || tag === etag);
}

export function notModified(etag: string): ApiResponse {
  return { status: 304, headers: { etag }, body: '' };
}

/** What the API functions need of an http.ServerResponse (which satisfies it). */
export interface StreamResponse {
  writeHead(status: number, headers: Record<string, string>): unknown;
  write(chunk: string): boolean;
  end(chunk?: string): unknown;
  flushHeaders?(): void;
  readonly writableLength?: number;
  once(event: 'close', listener: () => void): unknown;
  off(event: 'close', listener: () => void): unknown;
}

/** Copies an ApiResponse onto a ServerResponse. */
export function writeResponse(res: StreamResponse, response: ApiResponse): void {
  res.writeHead(response.status, response.headers);
  res.end(response.body);
}

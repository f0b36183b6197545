/**
 * The upstream request's headers as an HTTP/2 header block, and an HTTP/2
 * response's headers as the raw array the caller's HTTP/1.1 response takes.
 *
 * The request side starts from what `upstreamHeaders` built for HTTP/1.1
 * (credential, impersonation, hop-by-hop headers already dropped), so both
 * protocols forward exactly the same fields: `Host` becomes `:authority`,
 * and chunked framing is dropped because HTTP/2 frames every body itself
 * (RFC 9113 §8.2.2 forbids connection-specific fields). Node writes header
 * values as latin1, as it does on HTTP/1.1, so the UTF-8 bytes of an
 * impersonated name (shared/identity/impersonation-headers.ts, wireValue) reach the cluster unchanged.
 */
import { validateHeaderValue } from 'node:http';
import type { OutgoingHttpHeaders } from 'node:http2';
import type { RawHeaders } from './headers.ts';

/**
 * Fields HTTP/2 forbids (RFC 9113 §8.2.2; Node throws ERR_HTTP2_INVALID_CONNECTION_HEADERS for each),
 * and Host, which becomes :authority. `HTTP2-Settings` belongs to the HTTP/1.1 upgrade to h2c only.
 */
const DROPPED = new Set([
  'host',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'proxy-connection',
  'upgrade',
  'http2-settings',
]);

/**
 * An HTTP/2 request header block from HTTP/1.1 raw headers: repeated fields stay separate values.
 * Throws, as http.request does on HTTP/1.1, for a value Node will not send (a control character in
 * an impersonated name, say), so the caller gets a 400 rather than the session an invalid block.
 */
export function http2RequestHeaders(raw: RawHeaders, method: string, path: string): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = { ':method': method, ':scheme': 'https', ':path': path };
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    if (name === 'host') {
      headers[':authority'] = value;
      continue;
    }
    if (DROPPED.has(name)) continue;
    // TE is allowed in HTTP/2 with the value "trailers" only.
    if (name === 'te' && value.trim().toLowerCase() !== 'trailers') continue;
    validateHeaderValue(name, value);
    const previous = headers[name];
    if (previous === undefined) headers[name] = value;
    else if (Array.isArray(previous)) previous.push(value);
    else headers[name] = [String(previous), value];
  }
  return headers;
}

/** The response's fields for `res.writeHead`, pseudo-headers left out, in the order the cluster sent them. */
export function http1ResponseHeaders(raw: readonly string[]): RawHeaders {
  const out: RawHeaders = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.charCodeAt(0) === 58) continue; // ':status'
    out.push(name, raw[i + 1]!);
  }
  return out;
}

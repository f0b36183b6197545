/**
 * One HTTPS request with the request target sent exactly as given (no URL
 * normalization of `..`, `//` or escapes) and headers as a flat raw list, so
 * a header may repeat or be empty: what an attacker's client can send.
 */
import https from 'node:https';
import { frontProxyClient } from './users.ts';

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface RawRequestOptions {
  /** Flat [name, value, name, value, ...], sent in this order. */
  headers?: string[];
  /** Present the front-proxy client certificate, as the aggregator does. */
  frontProxy?: boolean;
  /** A client certificate of another identity. */
  client?: { cert: string; key: string };
  body?: string;
  timeoutMs?: number;
}

export function rawRequest(
  baseUrl: string,
  method: string,
  target: string,
  options: RawRequestOptions = {},
): Promise<RawResponse> {
  const base = new URL(baseUrl);
  const fp = frontProxyClient();
  const client = options.client ?? (options.frontProxy ? { cert: fp.cert, key: fp.key } : undefined);
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: base.hostname,
        port: base.port,
        method,
        path: target,
        // A raw header list gets no automatic Host header from Node.
        headers: ['Host', base.host, 'Accept', 'application/json', ...(options.headers ?? [])],
        ca: fp.ca,
        agent: false,
        ...(client ?? {}),
        timeout: options.timeoutMs ?? 15_000,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${options.timeoutMs ?? 15_000} ms`)));
    req.on('error', reject);
    req.end(options.body);
  });
}

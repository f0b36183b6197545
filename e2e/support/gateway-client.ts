/** Requests straight to the gateway (bypassing the aggregator), with a chosen way of authenticating. */
import https from 'node:https';
import { environmentState } from './environment.ts';
import { frontProxyClient } from './users.ts';

export interface GatewayResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  json<T = Record<string, unknown>>(): T;
}

export interface GatewayAuth {
  /** As the aggregator: front-proxy certificate plus X-Remote-* headers. */
  frontProxy?: { user: string; groups?: string[] };
  /** X-Remote-* headers without the certificate (must be refused). */
  spoofedHeaders?: { user: string; groups?: string[] };
  bearerToken?: string;
}

/**
 * `baseUrl` defaults to the environment's gateway; tests that start their own pass theirs.
 * A `body` is sent as JSON.
 */
export function gatewayRequest(
  method: string,
  path: string,
  auth: GatewayAuth,
  baseUrl?: string,
  body?: unknown,
): Promise<GatewayResponse> {
  const url = baseUrl ?? environmentState().gateway?.url;
  if (!url) throw new Error('the e2e environment runs no gateway');
  const fp = frontProxyClient();
  const headers: Record<string, string | string[]> = { accept: 'application/json' };
  const remote = auth.frontProxy ?? auth.spoofedHeaders;
  if (remote) {
    headers['x-remote-user'] = remote.user;
    if (remote.groups) headers['x-remote-group'] = remote.groups;
  }
  if (auth.bearerToken) headers.authorization = `Bearer ${auth.bearerToken}`;
  const payload = body === undefined ? undefined : JSON.stringify(body);
  if (payload) headers['content-type'] = 'application/json';
  return new Promise((resolve, reject) => {
    const req = https.request(
      `${url}${path}`,
      {
        method,
        headers,
        ca: fp.ca,
        ...(auth.frontProxy ? { cert: fp.cert, key: fp.key } : {}),
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: text,
            json: () => JSON.parse(text),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/**
 * The connector of an egress endpoint: through an HTTP(S) forward proxy (a Const endpoint's
 * `proxy-url`), one `CONNECT host:port` per upstream connection, after which the socket is a raw
 * byte stream to the cluster and TLS to the kube-apiserver runs inside it, end to end. The pool is
 * otherwise a direct endpoint's (connect-direct.ts).
 *
 * SOCKS5 (which the Go original also accepts) is not implemented yet:
 * parseProxyUrl() reports it so the caller answers with a clear Status
 * instead of silently connecting directly.
 */
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import { connectUrl } from './connect-direct.ts';
import type { EgressEndpoint, TransportTarget } from './target.ts';
import type { ConnectedUpstream, PoolSettings } from './upstream.ts';

const BRACKETS = /^\[|\]$/g;

export interface ProxyUrl {
  url: URL;
  /** Proxy-Authorization for credentials in the URL's userinfo. */
  authorization?: string;
}

export function connectEgress(
  target: TransportTarget,
  endpoint: EgressEndpoint,
  settings: PoolSettings,
): ConnectedUpstream | string {
  return connectUrl(target, endpoint, settings, (host, port) => {
    const proxy = parseProxyUrl(endpoint.proxyUrl);
    if (typeof proxy === 'string') return proxy;
    return () => connectThroughProxy(proxy, host, port);
  });
}

/** Parses a proxy-url; returns a problem string for schemes that are not supported. */
export function parseProxyUrl(raw: string): ProxyUrl | string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'proxy-url is not a valid URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return `proxy-url scheme "${url.protocol.slice(0, -1)}" is not supported yet (only http and https CONNECT proxies)`;
  }
  const parsed: ProxyUrl = { url };
  if (url.username || url.password) {
    const user = decodeURIComponent(url.username);
    const password = decodeURIComponent(url.password);
    parsed.authorization = 'Basic ' + Buffer.from(`${user}:${password}`).toString('base64');
  }
  return parsed;
}

/** Opens a tunnel to host:port through the proxy with HTTP CONNECT. */
export function connectThroughProxy(proxy: ProxyUrl, host: string, port: number): Promise<Duplex> {
  const authority = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  const headers: Record<string, string> = { Host: authority };
  if (proxy.authorization) headers['Proxy-Authorization'] = proxy.authorization;
  const request = proxy.url.protocol === 'https:' ? https.request : http.request;
  return new Promise((resolve, reject) => {
    const req = request({
      host: proxy.url.hostname.replace(BRACKETS, ''),
      port: proxy.url.port || (proxy.url.protocol === 'https:' ? 443 : 80),
      method: 'CONNECT',
      path: authority,
      headers,
      agent: false,
    });
    req.once('connect', (res, socket, head) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        reject(new Error(`egress proxy ${proxy.url.host} refused CONNECT ${authority}: ${res.statusCode}`));
        return;
      }
      if (head.length > 0) socket.unshift(head);
      resolve(socket);
    });
    req.once('error', (err) => reject(new Error(`egress proxy ${proxy.url.host}: ${err.message}`)));
    req.end();
  });
}

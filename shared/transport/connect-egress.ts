/**
 * The connector of an egress endpoint (a Const endpoint's `proxy-url`): each upstream connection
 * is opened through the proxy, after which the socket is a raw byte stream to the cluster and TLS
 * to the kube-apiserver runs inside it, end to end. The pool is otherwise a direct endpoint's
 * (connect-direct.ts). The proxy is either
 * - http:// or https://: an HTTP forward proxy, one `CONNECT host:port` per connection (here), or
 * - socks5:// or socks5h://: a SOCKS5 proxy (socks5.ts), as the Go original's net/http dials it.
 *
 * parseProxyUrl and connectThroughProxy are the HTTP CONNECT half alone (the agent's HTTPS_PROXY
 * uses them too); parseEgressProxy and dialEgressProxy take every scheme a proxy-url may have.
 */
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import { connectUrl } from './connect-direct.ts';
import { connectThroughSocks5, parseSocks5Url, type Socks5Proxy } from './socks5.ts';
import type { EgressEndpoint, TransportTarget } from './target.ts';
import type { ConnectedUpstream, PoolSettings } from './upstream.ts';

const BRACKETS = /^\[|\]$/g;

export interface ProxyUrl {
  url: URL;
  /** Proxy-Authorization for credentials in the URL's userinfo. */
  authorization?: string;
}

/** A proxy-url of any supported scheme, parsed. */
export type EgressProxy = { kind: 'connect'; proxy: ProxyUrl } | { kind: 'socks5'; proxy: Socks5Proxy };

export function connectEgress(
  target: TransportTarget,
  endpoint: EgressEndpoint,
  settings: PoolSettings,
): ConnectedUpstream | string {
  return connectUrl(target, endpoint, settings, (host, port) => {
    const proxy = parseEgressProxy(endpoint.proxyUrl);
    if (typeof proxy === 'string') return proxy;
    return () => dialEgressProxy(proxy, host, port, settings.connectTimeoutMs);
  });
}

/**
 * Parses a proxy-url of any supported scheme (http, https, socks5, socks5h); returns a problem
 * string, which never holds the URL's password, when it cannot be used.
 */
export function parseEgressProxy(raw: string): EgressProxy | string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'proxy-url is not a valid URL';
  }
  if (url.protocol === 'socks5:' || url.protocol === 'socks5h:') {
    const proxy = parseSocks5Url(url);
    return typeof proxy === 'string' ? proxy : { kind: 'socks5', proxy };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return `proxy-url scheme "${url.protocol.slice(0, -1)}" is not supported (use http, https, socks5 or socks5h)`;
  }
  const proxy = parseProxyUrl(raw);
  return typeof proxy === 'string' ? proxy : { kind: 'connect', proxy };
}

/** Opens a byte stream to host:port through the proxy, whatever its kind. */
export function dialEgressProxy(
  proxy: EgressProxy,
  host: string,
  port: number,
  timeoutMs?: number,
): Promise<Duplex> {
  return proxy.kind === 'socks5'
    ? connectThroughSocks5(proxy.proxy, host, port, timeoutMs)
    : connectThroughProxy(proxy.proxy, host, port);
}

/**
 * Parses an HTTP(S) CONNECT proxy URL; returns a problem string for other schemes (socks5 is
 * parseEgressProxy's) and for userinfo that is not valid percent-encoding.
 */
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
    let user: string;
    let password: string;
    try {
      user = decodeURIComponent(url.username);
      password = decodeURIComponent(url.password);
    } catch {
      return 'proxy-url user name or password is not valid percent-encoding';
    }
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

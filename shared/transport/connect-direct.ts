/**
 * The connector of a direct endpoint: TCP to the kube-apiserver's URL, TLS for https:// (HTTP/2
 * offered) and plain HTTP for http://. An egress endpoint is the same pool with its connections
 * dialled through the proxy (connect-egress.ts).
 */
import http from 'node:http';
import https from 'node:https';
import type tls from 'node:tls';
import { type Dial, deadline } from './deadline.ts';
import { dialWith } from './dialed-agent.ts';
import { http1Over, http2Over } from './http2-connector.ts';
import { authorizationOf, type DirectEndpoint, type EgressEndpoint, type TransportTarget } from './target.ts';
import { type ContextGetter, contextOf, poolTls, serverNameOf } from './tls-context.ts';
import { agentOptions, type ConnectedUpstream, type PoolSettings, type UpstreamParts } from './upstream.ts';

const BRACKETS = /^\[|\]$/g;

export function connectDirect(
  target: TransportTarget,
  endpoint: DirectEndpoint,
  settings: PoolSettings,
): ConnectedUpstream | string {
  return connectUrl(target, endpoint, settings);
}

/**
 * The pool of an endpoint reached by URL: directly, or through `dialFor`'s stream to host:port
 * (an egress proxy) when given.
 */
export function connectUrl(
  target: TransportTarget,
  endpoint: DirectEndpoint | EgressEndpoint,
  settings: PoolSettings,
  dialFor?: (host: string, port: number) => Dial | string,
): ConnectedUpstream | string {
  let url: URL;
  try {
    url = new URL(endpoint.url);
  } catch {
    return `endpoint address "${endpoint.url}" is not a valid URL`;
  }
  const secure = url.protocol === 'https:';
  if (!secure && url.protocol !== 'http:') {
    return `endpoint address "${endpoint.url}" must be an https:// or http:// URL`;
  }
  const hostname = url.hostname.replace(BRACKETS, '');
  const port = Number(url.port) || (secure ? 443 : 80);
  const base = agentOptions(settings);
  const tlsSetup = secure ? poolTls(target, endpoint, hostname, base) : undefined;
  if (typeof tlsSetup === 'string') return tlsSetup;
  const agent = tlsSetup ? new https.Agent(tlsSetup.options) : new http.Agent(base);
  let dial: Dial | undefined;
  if (dialFor) {
    const dialling = dialFor(hostname, port);
    if (typeof dialling === 'string') return dialling;
    dial = dialling;
    dialWith(agent, dial, tlsSetup?.context, settings.connectTimeoutMs);
  } else {
    limitConnect(agent, tlsSetup?.context, settings.connectTimeoutMs);
  }
  const connection = {
    host: hostname,
    port,
    ...serverNameOf(hostname),
    rejectUnauthorized: !endpoint.insecure,
  };
  const http2 = tlsSetup
    ? http2Over(settings, `https://${url.host}`, connection, tlsSetup.context, dial)
    : undefined;
  const http1 =
    tlsSetup && settings.passThrough ? http1Over(settings, connection, tlsSetup.context, dial) : undefined;
  const authorization = authorizationOf(target.credential);
  const upstream: UpstreamParts = {
    name: target.name,
    key: target.key,
    agent,
    request: secure ? https.request : http.request,
    hostname,
    port,
    basePath: basePathOf(url.pathname),
    hostHeader: url.host,
    ...(authorization ? { authorization } : {}),
    ...(http2 ? { http2 } : {}),
    ...(http1 ? { http1 } : {}),
  };
  return { upstream, ...(tlsSetup?.trust ? { trust: tlsSetup.trust } : {}) };
}

/** Normalizes an endpoint URL's pathname into a base path: '' or '/prefix' without trailing slash. */
export function basePathOf(pathname: string): string {
  let end = pathname.length;
  while (end > 0 && pathname.charCodeAt(end - 1) === 47 /* '/' */) end--;
  return pathname.slice(0, end);
}

/**
 * Bounds a direct connection's TCP connect plus TLS handshake: without it a
 * black-holed address would hang for the kernel's SYN retry time (minutes).
 * Reused keep-alive sockets never come through here. For https, also hands
 * the pool's TLS context to the connection.
 */
function limitConnect(agent: http.Agent, context: ContextGetter | undefined, timeoutMs: number): void {
  const createConnection = agent.createConnection.bind(agent);
  agent.createConnection = (options, callback) => {
    if (context) (options as tls.ConnectionOptions).secureContext = contextOf(options, context);
    const socket = createConnection(options, callback);
    if (socket) deadline(socket, context ? 'secureConnect' : 'connect', timeoutMs);
    return socket;
  };
}

/**
 * The connector of a tunnel endpoint: each connection is one stream of the agent's reverse tunnel
 * (tunnel-stream.ts opens them). On `relay` streams the pool runs TLS to the managed apiserver inside
 * the stream, with the credential, and offers HTTP/2 as for a direct endpoint; `impersonate`
 * streams carry plain HTTP that the agent serves with its own credential.
 */
import http from 'node:http';
import https from 'node:https';
import { dialWith } from './dialed-agent.ts';
import { http1Over, http2Over } from './http2-connector.ts';
import { authorizationOf, type TransportTarget, type TunnelDialEndpoint } from './target.ts';
import { poolTls, serverNameOf } from './tls-context.ts';
import { agentOptions, type ConnectedUpstream, type PoolSettings, type UpstreamParts } from './upstream.ts';

export function connectTunnel(
  target: TransportTarget,
  endpoint: TunnelDialEndpoint,
  settings: PoolSettings,
): ConnectedUpstream | string {
  const base = agentOptions(settings);
  const tunnel = { dial: endpoint.dial };
  if (endpoint.stream === 'impersonate') {
    // The agent serves HTTP on these streams and authenticates itself (shared/tunnel/protocol.ts):
    // no TLS and no credential from here; the caller's identity goes as the tunnel hop's identity
    // headers (shared/tunnel/identity.ts).
    const agent = new http.Agent(base);
    dialWith(agent, () => tunnel.dial('impersonate'), undefined, settings.connectTimeoutMs);
    const upstream: UpstreamParts = {
      name: target.name,
      key: target.key,
      agent,
      request: http.request,
      hostname: endpoint.serverName,
      port: 80,
      basePath: '',
      hostHeader: endpoint.serverName,
      tunnelStream: 'impersonate',
    };
    return { upstream, tunnel };
  }
  const secure = poolTls(target, endpoint, endpoint.serverName, base);
  if (typeof secure === 'string') return secure;
  const agent = new https.Agent({ ...secure.options, servername: endpoint.serverName });
  const dial = () => tunnel.dial('relay');
  dialWith(agent, dial, secure.context, settings.connectTimeoutMs);
  const authorization = authorizationOf(target.credential);
  const upstream: UpstreamParts = {
    name: target.name,
    key: target.key,
    agent,
    request: https.request,
    hostname: endpoint.serverName,
    port: 443,
    basePath: '',
    hostHeader: endpoint.serverName,
    ...(authorization ? { authorization } : {}),
    tunnelStream: 'relay',
  };
  const connection = { ...serverNameOf(endpoint.serverName), rejectUnauthorized: !endpoint.insecure };
  const http2 = http2Over(settings, `https://${endpoint.serverName}`, connection, secure.context, dial);
  if (http2) upstream.http2 = http2;
  // Plain reads pass through inside the tunnel as on a direct endpoint: without the HTTP/2 session
  // inside the stream, a tunnelled MiB skips one framing layer and its per-frame JS events
  // (bench:tls-layers: TLS inside a tunnel stream costs the reader about 1 ms per MiB less than
  // HTTP/2 over that TLS).
  if (settings.passThrough) upstream.http1 = http1Over(settings, connection, secure.context, dial);
  return { upstream, tunnel, ...(secure.trust ? { trust: secure.trust } : {}) };
}

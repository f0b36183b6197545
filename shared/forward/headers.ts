/**
 * Header rewriting between the caller and a managed cluster, from data only: the caller's raw
 * headers, the pool's Host and credential, and the identity to impersonate as a typed value (it is
 * never parsed from headers here; the agent decodes the tunnel hop's with shared/tunnel/identity.ts).
 *
 * Headers travel as Node's raw header arrays (`[name, value, name, value, ...]`,
 * the shape of `req.rawHeaders`), which `http.request` and `res.writeHead`
 * accept as is: repeated headers (several `Impersonate-Group` or `Set-Cookie`
 * lines, `X-Stream-Protocol-Version` offers) stay separate lines in their
 * original order, and nothing is merged or re-cased.
 */
import { appendImpersonation } from '../identity/impersonation-headers.ts';
import type { UserInfo } from '../identity/user.ts';

export type RawHeaders = string[];

/** RFC 7230 hop-by-hop headers, as Go's httputil.ReverseProxy lists them (lower case). */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * Request headers the gateway never forwards: hop-by-hop ones, the caller's
 * own credentials and identity claims (the gateway authenticated the caller
 * already and speaks for it with the cluster's credential), `Host` (set to
 * the endpoint), `Expect` (the front server answered it),
 * `X-Forwarded-For` (rebuilt with the caller's address appended) and the
 * framing headers, which are always rebuilt from what Node parsed
 * (framing.ts), whatever `Connection` lists.
 */
const DROPPED_REQUEST = new Set([
  ...HOP_BY_HOP,
  'authorization',
  'host',
  'expect',
  'x-forwarded-for',
  'content-length',
]);
const DROPPED_REQUEST_PREFIXES = ['proxy-', 'impersonate-', 'x-remote-'];

export interface UpstreamHeaderOptions {
  /** Host header for the cluster: the endpoint's host[:port]. */
  host: string;
  /** The request's framing headers (framingHeaders in framing.ts); the caller's are never copied. */
  framing?: readonly string[];
  /** Authorization header value for the cluster credential (shared/transport/target.ts, authorizationOf). */
  authorization?: string;
  /** When set, the request is made as this user through Impersonate-* headers. */
  identity?: UserInfo;
  /**
   * How the identity is written: Kubernetes' impersonation headers (the default), or the tunnel
   * hop's encoding for an `impersonate` stream (shared/tunnel/identity.ts). Chosen once per pool.
   */
  encodeIdentity?: (out: RawHeaders, identity: UserInfo) => void;
  /** Keep `Upgrade` and send `Connection: Upgrade` (WebSocket and SPDY). */
  upgrade?: boolean;
  /** The caller's address, appended to X-Forwarded-For as Go's proxies do (audit sourceIPs). */
  forwardedFor?: string;
}

/** Builds the headers sent to the managed kube-apiserver from the caller's raw headers. */
export function upstreamHeaders(raw: readonly string[], options: UpstreamHeaderOptions): RawHeaders {
  const out: RawHeaders = ['Host', options.host];
  const connectionTokens = connectionListed(raw);
  let forwarded = '';
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    const value = raw[i + 1]!;
    const lower = name.toLowerCase();
    if (lower === 'x-forwarded-for') {
      forwarded = forwarded ? `${forwarded}, ${value}` : value;
      continue;
    }
    if (lower === 'upgrade' && options.upgrade) {
      out.push(name, value);
      continue;
    }
    // ':'-prefixed HTTP/2 pseudo-headers never belong on an HTTP/1.1 request.
    if (DROPPED_REQUEST.has(lower) || hasDroppedPrefix(lower) || lower.charCodeAt(0) === 58) continue;
    if (connectionTokens?.has(lower)) continue;
    out.push(name, value);
  }
  if (options.framing) out.push(...options.framing);
  if (options.upgrade) out.push('Connection', 'Upgrade');
  if (options.forwardedFor) {
    out.push('X-Forwarded-For', forwarded ? `${forwarded}, ${options.forwardedFor}` : options.forwardedFor);
  }
  if (options.authorization) out.push('Authorization', options.authorization);
  if (options.identity) (options.encodeIdentity ?? appendImpersonation)(out, options.identity);
  return out;
}

/** Response headers for the caller: everything but hop-by-hop headers. */
export function downstreamHeaders(raw: readonly string[]): RawHeaders {
  const connectionTokens = connectionListed(raw);
  const out: RawHeaders = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || connectionTokens?.has(lower)) continue;
    out.push(name, raw[i + 1]!);
  }
  return out;
}

function hasDroppedPrefix(lower: string): boolean {
  for (const prefix of DROPPED_REQUEST_PREFIXES) if (lower.startsWith(prefix)) return true;
  return false;
}

/**
 * Extra hop-by-hop headers named by `Connection` (RFC 7230 §6.1). Undefined
 * in the common case where it lists only standard tokens, to allocate nothing.
 */
function connectionListed(raw: readonly string[]): Set<string> | undefined {
  let tokens: Set<string> | undefined;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]!.length !== 10 || raw[i]!.toLowerCase() !== 'connection') continue;
    for (const token of raw[i + 1]!.split(',')) {
      const t = token.trim().toLowerCase();
      if (t === '' || t === 'close' || t === 'keep-alive' || t === 'upgrade') continue;
      tokens ??= new Set();
      tokens.add(t);
    }
  }
  return tokens;
}

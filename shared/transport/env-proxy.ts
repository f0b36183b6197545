/**
 * Which proxy, if any, a connection to a URL goes through: the HTTP_PROXY / HTTPS_PROXY / NO_PROXY
 * convention as Go's golang.org/x/net/http/httpproxy reads it (the OCM agents and client-go do, so an
 * AddOnDeploymentConfig's proxyConfig means the same to this agent as to OCM's own):
 *
 * - HTTPS_PROXY (else https_proxy) for https:// targets, HTTP_PROXY (else http_proxy) for http://;
 *   the upper-case name wins when both are set and non-empty (Go's getEnvAny);
 * - a proxy value without a scheme ("proxy:3128") means http:// (Go's parseProxy);
 * - HTTP_PROXY is ignored in a CGI environment (REQUEST_METHOD set), as Go refuses it there;
 * - localhost and loopback addresses are never proxied;
 * - NO_PROXY (else no_proxy): comma-separated, trimmed, case-insensitive entries, each one of
 *   `*` (nothing is proxied), an IP or CIDR (`10.0.0.0/8`, `fd00::/8`), an IP with a port
 *   (`10.0.0.1:6443`, `[fd00::1]:6443`), a host name that matches itself and its subdomains
 *   (`example.com` matches `a.example.com`), `.example.com` or `*.example.com` that match subdomains
 *   only, each optionally with a port (`example.com:6443`). The target's port is its URL's, else
 *   the scheme's default (443, 80), as Go's canonicalAddr. Malformed entries are skipped, as in Go.
 *
 * Where the connection differs from Go's net/http Transport: an http:// target is tunnelled with
 * CONNECT too (Go sends it absolute-form requests; the agent's servers are https anyway), and a
 * socks5:// value is refused with a message by connect-egress.ts's parseProxyUrl (Go dials it).
 *
 * Only the decision lives here; the connection through the proxy is connect-egress.ts's
 * (HTTP CONNECT) and proxy-agent.ts's. Nothing reads process.env by itself: a process opts in by
 * passing its environment (the agent does; the gateway and the manager do not).
 */
import net from 'node:net';
import { domainToASCII } from 'node:url';

export interface ProxyEnvironment {
  httpProxy?: string;
  httpsProxy?: string;
  noProxy?: string;
  /** REQUEST_METHOD is set: HTTP_PROXY may come from a request header (httpoxy), so it is ignored. */
  cgi?: boolean;
}

export type ProxyDecision =
  | { kind: 'direct'; reason: string }
  | {
      kind: 'proxy';
      url: URL;
      /** Where it came from, for messages: HTTPS_PROXY, HTTP_PROXY or proxy-url. */
      source: string;
    }
  | { kind: 'invalid'; message: string };

/** Decides for one target URL. */
export type ProxyRoute = (target: URL) => ProxyDecision;

/** Go's getEnvAny: the first of the names that is set and non-empty. */
function envAny(env: Record<string, string | undefined>, ...names: string[]): string | undefined {
  for (const name of names) {
    const value = env[name];
    if (value) return value;
  }
  return undefined;
}

/** Go's httpproxy.FromEnvironment. */
export function proxyEnvironment(env: Record<string, string | undefined>): ProxyEnvironment {
  const settings: ProxyEnvironment = {};
  const httpProxy = envAny(env, 'HTTP_PROXY', 'http_proxy');
  const httpsProxy = envAny(env, 'HTTPS_PROXY', 'https_proxy');
  const noProxy = envAny(env, 'NO_PROXY', 'no_proxy');
  if (httpProxy) settings.httpProxy = httpProxy;
  if (httpsProxy) settings.httpsProxy = httpsProxy;
  if (noProxy) settings.noProxy = noProxy;
  if (env.REQUEST_METHOD) settings.cgi = true;
  return settings;
}

/** Go's parseProxy: a value that is not a URL with a scheme and a host is tried again as http://value. */
export function parseProxyValue(raw: string): URL | undefined {
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (!url?.protocol || !url.host) {
    try {
      return new URL(`http://${raw}`);
    } catch {
      return url;
    }
  }
  return url;
}

/** A proxy URL fit for a log line: the userinfo (a password, a token) replaced. */
export function redactProxyUrl(url: URL | string): string {
  // A string is read as Go reads a proxy variable: "user:pw@proxy:3128" is http://user:pw@proxy:3128,
  // not a URL of scheme "user" whose path would carry the password into the log.
  const parsed = typeof url === 'string' ? parseProxyValue(url) : new URL(url.href);
  if (!parsed) return '(not a URL)';
  if (parsed.username || parsed.password) {
    parsed.username = 'redacted';
    parsed.password = '';
  }
  // The origin is what a proxy URL means; a trailing "/" would only add noise.
  return parsed.href.replace(/\/$/, '');
}

/** The host part of an address, brackets and case dropped, IDNA to ASCII (Go's idnaASCII). */
function canonicalHost(host: string): string {
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (net.isIP(bare)) return bare;
  return domainToASCII(bare) || bare;
}

/** Go's net.SplitHostPort, enough for NO_PROXY entries: host:port, [v6]:port; undefined when no port. */
function splitHostPort(entry: string): { host: string; port: string } | undefined {
  const bracketed = /^\[([^\]]*)\]:(\d*)$/.exec(entry);
  if (bracketed) return { host: bracketed[1] ?? '', port: bracketed[2] ?? '' };
  const colon = entry.lastIndexOf(':');
  if (colon < 0 || entry.indexOf(':') !== colon) return undefined; // none, or a bare IPv6 address
  return { host: entry.slice(0, colon), port: entry.slice(colon + 1) };
}

const isLoopback = (ip: string): boolean => {
  const family = net.isIP(ip);
  if (family === 4) return ip.startsWith('127.');
  const loopback = new net.BlockList();
  loopback.addAddress('::1', 'ipv6');
  loopback.addSubnet('::ffff:127.0.0.0', 104, 'ipv6');
  return loopback.check(ip, 'ipv6');
};

/** Two IP addresses are the same one (v6 spellings differ: fd00::1 and fd00:0::1). */
function sameIp(a: string, b: string): boolean {
  const family = net.isIP(a);
  if (family !== net.isIP(b)) return false;
  const list = new net.BlockList();
  list.addAddress(a, family === 4 ? 'ipv4' : 'ipv6');
  return list.check(b, family === 4 ? 'ipv4' : 'ipv6');
}

interface NoProxy {
  all: boolean;
  /** `match(ip, port)` for IP and CIDR entries. */
  ips: ((ip: string, port: string) => boolean)[];
  /** Host names: suffix ".example.com"; `exact` also matches "example.com" itself. */
  domains: { suffix: string; exact: boolean; port: string }[];
}

/** Go's config.init: NO_PROXY into matchers. */
export function parseNoProxy(value: string | undefined): NoProxy {
  const rules: NoProxy = { all: false, ips: [], domains: [] };
  for (const raw of (value ?? '').split(',')) {
    const entry = raw.trim().toLowerCase();
    if (!entry) continue;
    if (entry === '*') return { all: true, ips: [], domains: [] };
    const cidr = /^([^/]+)\/(\d{1,3})$/.exec(entry);
    if (cidr) {
      const [, address = '', bits = ''] = cidr;
      const family = net.isIP(address);
      const prefix = Number(bits);
      if (family && prefix <= (family === 4 ? 32 : 128)) {
        const list = new net.BlockList();
        list.addSubnet(address, prefix, family === 4 ? 'ipv4' : 'ipv6');
        rules.ips.push((ip) => net.isIP(ip) === family && list.check(ip, family === 4 ? 'ipv4' : 'ipv6'));
      }
      continue; // a malformed CIDR is skipped, as Go skips what it cannot parse as anything
    }
    const split = splitHostPort(entry);
    let host = split ? split.host : entry;
    const port = split?.port ?? '';
    if (split && !host) continue; // ":6443": no host part (Go ignores it)
    host = host.replace(/^\[|\]$/g, '');
    if (net.isIP(host)) {
      rules.ips.push((ip, targetPort) => sameIp(host, ip) && (!port || port === targetPort));
      continue;
    }
    if (!host) continue;
    if (host.startsWith('*.')) host = host.slice(1);
    const exact = !host.startsWith('.');
    const name = exact ? host : host.slice(1);
    if (!name) continue;
    rules.domains.push({ suffix: `.${domainToASCII(name) || name}`, exact, port });
  }
  return rules;
}

/** Go's config.useProxy for host and port (port already defaulted). */
function useProxy(
  rules: NoProxy,
  host: string,
  port: string,
): { use: true } | { use: false; reason: string } {
  if (host === 'localhost' || (net.isIP(host) && isLoopback(host))) {
    return { use: false, reason: 'loopback is never proxied' };
  }
  if (rules.all) return { use: false, reason: 'NO_PROXY is *' };
  if (net.isIP(host)) {
    if (rules.ips.some((match) => match(host, port))) return { use: false, reason: 'in NO_PROXY' };
    return { use: true }; // Go runs the domain matchers on IPs too, but they never match one
  }
  for (const d of rules.domains) {
    if (host.endsWith(d.suffix) || (d.exact && host === d.suffix.slice(1))) {
      if (!d.port || d.port === port) return { use: false, reason: 'in NO_PROXY' };
    }
  }
  return { use: true };
}

/** Go's ProxyFunc: the decision for each target URL, from one environment read once. */
export function proxyRouteFromEnvironment(environment: ProxyEnvironment): ProxyRoute {
  const rules = parseNoProxy(environment.noProxy);
  const proxyOf = (value: string | undefined, name: string): ProxyDecision | undefined => {
    if (!value) return undefined;
    const url = parseProxyValue(value);
    if (!url) return { kind: 'invalid', message: `${name} is not a valid proxy URL` };
    return { kind: 'proxy', url, source: name };
  };
  const https = proxyOf(environment.httpsProxy, 'HTTPS_PROXY');
  const http = proxyOf(environment.httpProxy, 'HTTP_PROXY');
  return (target) => {
    const scheme = target.protocol;
    let proxy: ProxyDecision | undefined;
    if (scheme === 'https:' || scheme === 'wss:') proxy = https;
    else if (scheme === 'http:' || scheme === 'ws:') {
      if (http && environment.cgi) {
        return {
          kind: 'invalid',
          message: 'refusing to use HTTP_PROXY in a CGI environment (REQUEST_METHOD is set)',
        };
      }
      proxy = http;
    }
    if (!proxy) return { kind: 'direct', reason: `no ${scheme === 'http:' ? 'HTTP' : 'HTTPS'}_PROXY set` };
    const host = canonicalHost(target.hostname);
    const port = target.port || (scheme === 'https:' || scheme === 'wss:' ? '443' : '80');
    const verdict = useProxy(rules, host, port);
    return verdict.use ? proxy : { kind: 'direct', reason: verdict.reason };
  };
}

/** A kubeconfig's proxy-url: every connection goes through it, whatever the environment says (client-go). */
export function fixedProxyRoute(proxyUrl: string): ProxyRoute {
  let decision: ProxyDecision;
  try {
    decision = { kind: 'proxy', url: new URL(proxyUrl), source: 'proxy-url' };
  } catch {
    decision = { kind: 'invalid', message: 'proxy-url is not a valid URL' };
  }
  return () => decision;
}

/** Says how a target is reached, for a log line (credentials redacted). */
export function describeDecision(decision: ProxyDecision): string {
  switch (decision.kind) {
    case 'proxy':
      return `through ${redactProxyUrl(decision.url)} (${decision.source})`;
    case 'direct':
      return `direct (${decision.reason})`;
    case 'invalid':
      return `refused: ${decision.message}`;
  }
}

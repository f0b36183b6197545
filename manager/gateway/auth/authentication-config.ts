/**
 * The delegated-authentication settings the kube-apiserver publishes in
 * ConfigMap `kube-system/extension-apiserver-authentication`, parsed once
 * per ConfigMap revision. Every aggregated API server reads the same keys:
 * the CA files are PEM bundles, the header and name lists JSON arrays.
 */
import type { X509Certificate } from 'node:crypto';
import { parsePemBundle } from '../../../shared/x509-chain.ts';

/** Headers the kube-apiserver uses when the ConfigMap does not list any. */
export const defaultUsernameHeaders = ['x-remote-user'];

export interface RequestHeaderConfig {
  /** The front-proxy CA bundle (`requestheader-client-ca-file`). */
  caBundle: string;
  roots: X509Certificate[];
  /** Accepted front-proxy certificate CNs; empty accepts any CN from the CA. */
  allowedNames: string[];
  /** Lower-case header names, in precedence order. */
  usernameHeaders: string[];
  uidHeaders: string[];
  groupHeaders: string[];
  extraHeaderPrefixes: string[];
}

export interface ClientCAConfig {
  caBundle: string;
  roots: X509Certificate[];
}

export interface AuthenticationConfig {
  /** Absent when the ConfigMap has no front-proxy CA: header authentication is off. */
  requestHeader?: RequestHeaderConfig;
  /** Absent when there is no `client-ca-file`: client-certificate authentication is off. */
  clientCA?: ClientCAConfig;
}

/**
 * Parses the ConfigMap's data. Throws on malformed content, so a watcher can
 * keep serving with the previous configuration instead of dropping to none.
 */
export function parseAuthenticationConfig(data: Record<string, string> | undefined): AuthenticationConfig {
  const requestHeader = parseRequestHeaderConfig(data);
  const clientCA = parseClientCAConfig(data);
  return { ...(requestHeader ? { requestHeader } : {}), ...(clientCA ? { clientCA } : {}) };
}

/** The front-proxy part alone, so a bad `client-ca-file` cannot block its updates. */
export function parseRequestHeaderConfig(
  data: Record<string, string> | undefined,
): RequestHeaderConfig | undefined {
  const caBundle = data?.['requestheader-client-ca-file']?.trim();
  if (!caBundle) return undefined;
  return {
    caBundle,
    roots: parseBundle(caBundle, 'requestheader-client-ca-file'),
    allowedNames: stringList(data, 'requestheader-allowed-names'),
    usernameHeaders: headerList(data, 'requestheader-username-headers'),
    uidHeaders: headerList(data, 'requestheader-uid-headers'),
    groupHeaders: headerList(data, 'requestheader-group-headers'),
    extraHeaderPrefixes: headerList(data, 'requestheader-extra-headers-prefix'),
  };
}

/** The client-certificate part alone. */
export function parseClientCAConfig(data: Record<string, string> | undefined): ClientCAConfig | undefined {
  const caBundle = data?.['client-ca-file']?.trim();
  if (!caBundle) return undefined;
  return { caBundle, roots: parseBundle(caBundle, 'client-ca-file') };
}

/**
 * The CA bundles the TLS server must list for client certificates: both,
 * because a Go client (the aggregator among them) only sends a certificate
 * issued by a CA the server names in its CertificateRequest.
 */
export function trustedClientCAs(config: AuthenticationConfig): string[] {
  const bundles: string[] = [];
  if (config.requestHeader) bundles.push(config.requestHeader.caBundle);
  if (config.clientCA) bundles.push(config.clientCA.caBundle);
  return bundles;
}

function parseBundle(pem: string, key: string): X509Certificate[] {
  const roots = parsePemBundle(pem);
  if (roots.length === 0) throw new Error(`${key}: no PEM certificate found`);
  return roots;
}

function stringList(data: Record<string, string> | undefined, key: string): string[] {
  const raw = data?.[key]?.trim();
  if (!raw) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    throw new Error(`${key}: not a JSON array of strings: ${(err as Error).message}`);
  }
  if (!Array.isArray(parsed) || !parsed.every((item) => typeof item === 'string')) {
    throw new Error(`${key}: not a JSON array of strings`);
  }
  return parsed;
}

// Header names compare case-insensitively; Node lower-cases incoming ones.
function headerList(data: Record<string, string> | undefined, key: string): string[] {
  return stringList(data, key)
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name.length > 0);
}

/**
 * Front-proxy ("requestheader") authentication, as Kubernetes'
 * headerrequest and x509 verifier do it for aggregated API servers: the
 * kube-aggregator authenticates the end user, then calls us with its proxy
 * client certificate and the identity in X-Remote-User / X-Remote-Group /
 * X-Remote-Extra-*. Those headers are trusted only after the certificate
 * chain verifies against the front-proxy CA and its CN is an allowed name.
 *
 * Values are UTF-8, as the aggregator writes them (Go strings are bytes): Node
 * reads them as latin1, so they are decoded here (shared/identity/header-encoding.ts);
 * a value that is not valid UTF-8 is rejected rather than guessed at, so the
 * SubjectAccessReview, exchange rules and access log see the hub's own name.
 * Extra keys are percent-encoded UTF-8 in the header name, decoded the same way.
 *
 * One deliberate difference from Kubernetes: a request that carries a
 * username header without such a certificate is rejected with 401 (a
 * RejectedCredentialsError that stops the authenticator chain) instead of
 * having the headers ignored, so a spoofed or misrouted identity never
 * silently becomes some other identity.
 */
import type { IncomingMessage } from 'node:http';
import { utf8HeaderValue } from '../../../shared/identity/header-encoding.ts';
import type { UserInfo } from '../../../shared/identity/user.ts';
import { RejectedCredentialsError } from './auth-errors.ts';
import {
  defaultUsernameHeaders,
  parseRequestHeaderConfig,
  type RequestHeaderConfig,
} from './authentication-config.ts';
import type { Authenticator } from './contracts.ts';
import { allHeaderValues, firstHeaderValue, removeHeaders } from './header-utils.ts';
import { verifyPeer } from './peer-verification.ts';

export interface RequestHeaderAuthenticatorOptions {
  /** Initial ConfigMap data; without it every identity header is rejected until update(). */
  configMapData?: Record<string, string>;
  /** Clock for certificate validity, injectable for tests. */
  now?: () => Date;
}

export class RequestHeaderAuthenticator implements Authenticator {
  #config: RequestHeaderConfig | undefined;
  readonly #now: () => Date;

  constructor(options: RequestHeaderAuthenticatorOptions = {}) {
    this.#now = options.now ?? (() => new Date());
    if (options.configMapData) this.update(options.configMapData);
  }

  /**
   * Applies a new revision of `kube-system/extension-apiserver-authentication`.
   * Throws on malformed data and keeps the previous configuration.
   */
  update(configMapData: Record<string, string> | undefined): void {
    this.#config = parseRequestHeaderConfig(configMapData);
  }

  get configured(): boolean {
    return this.#config !== undefined;
  }

  async authenticate(req: IncomingMessage): Promise<UserInfo | undefined> {
    const config = this.#config;
    // Spoofing is checked against the default headers too: while the
    // configuration is missing, or names other headers, an X-Remote-User
    // still means the caller expects to be someone it cannot prove. Any
    // identity header counts, with any value: an empty X-Remote-User
    // followed by a real one, or groups alone, are claims all the same.
    const usernameHeaders = config
      ? [...config.usernameHeaders, ...defaultUsernameHeaders]
      : defaultUsernameHeaders;
    const claimed = Object.keys(req.headersDistinct).some((header) =>
      isClaimHeader(header, config, usernameHeaders),
    );
    if (!claimed) return undefined;
    if (!config) throw rejected('front-proxy authentication is not configured');

    const verification = verifyPeer(req, config.roots, this.#now());
    if (!verification) throw rejected('no client certificate presented');
    if (!verification.ok) throw rejected(verification.reason);
    const { commonName } = verification;
    if (config.allowedNames.length > 0 && !config.allowedNames.includes(commonName)) {
      throw rejected(`client certificate CN "${commonName}" is not an allowed front-proxy name`);
    }

    // Only the configured headers carry the identity; the default one merely
    // triggered the check above.
    // Go's Header.Get: the first value of each configured header, in order.
    const rawName = firstHeaderValue(req, config.usernameHeaders);
    if (rawName === undefined) {
      throw rejected(`no user name in ${config.usernameHeaders.join(', ') || 'any username header'}`);
    }
    const name = utf8(rawName, 'user name');
    const rawUid = firstHeaderValue(req, config.uidHeaders);
    const uid = rawUid === undefined ? undefined : utf8(rawUid, 'uid');
    const user: UserInfo = {
      name,
      groups: allHeaderValues(req, config.groupHeaders).map((group) => utf8(group, 'group')),
      extra: extraFromHeaders(req, config.extraHeaderPrefixes),
      ...(uid ? { uid } : {}),
    };
    removeHeaders(req, (header) => isIdentityHeader(header, config, usernameHeaders));
    return user;
  }
}

/** A header value's UTF-8 text; a 401 when its bytes are not UTF-8. */
function utf8(nodeValue: string, what: string): string {
  const text = utf8HeaderValue(nodeValue);
  if (text === undefined) throw rejected(`the ${what} header value is not valid UTF-8`);
  return text;
}

function rejected(reason: string): RejectedCredentialsError {
  return new RejectedCredentialsError(`front-proxy identity headers rejected: ${reason}`);
}

/**
 * `<prefix><key>` headers become extra[key]: Kubernetes lower-cases the key,
 * then percent-decodes it (so a key may carry "/" and other characters that
 * are not legal in header names), and keeps each header value as one item.
 */
function extraFromHeaders(req: IncomingMessage, prefixes: readonly string[]): Record<string, string[]> {
  const extra: Record<string, string[]> = {};
  for (const prefix of prefixes) {
    for (const header of Object.keys(req.headersDistinct)) {
      if (!header.startsWith(prefix) || header.length === prefix.length) continue;
      const key = unescapeExtraKey(header.slice(prefix.length));
      const values = allHeaderValues(req, [header]).map((value) => utf8(value, `extra ${key}`));
      if (values.length > 0) extra[key] = [...(extra[key] ?? []), ...values];
    }
  }
  return extra;
}

// Go's url.PathUnescape falls back to the raw key when it is malformed. decodeURIComponent reads
// %XX sequences as UTF-8 (client-go escapes the key's UTF-8 bytes); a sequence that is not UTF-8
// throws and, as there, the raw key is kept.
function unescapeExtraKey(encoded: string): string {
  try {
    return decodeURIComponent(encoded);
  } catch {
    return encoded;
  }
}

// The identity headers the aggregator sends by default, whatever the configuration says.
const defaultIdentityHeaders = ['x-remote-user', 'x-remote-uid', 'x-remote-group'];
const defaultExtraPrefix = 'x-remote-extra-';

function isClaimHeader(
  header: string,
  config: RequestHeaderConfig | undefined,
  usernameHeaders: string[],
): boolean {
  if (defaultIdentityHeaders.includes(header) || header.startsWith(defaultExtraPrefix)) return true;
  return config ? isIdentityHeader(header, config, usernameHeaders) : false;
}

function isIdentityHeader(header: string, config: RequestHeaderConfig, usernameHeaders: string[]): boolean {
  return (
    usernameHeaders.includes(header) ||
    config.uidHeaders.includes(header) ||
    config.groupHeaders.includes(header) ||
    config.extraHeaderPrefixes.some((prefix) => header.startsWith(prefix))
  );
}

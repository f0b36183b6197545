/**
 * Client-certificate authentication for callers that reach the gateway
 * directly rather than through the aggregator: the chain must verify
 * against `client-ca-file` from the authentication ConfigMap, and then, as
 * in Kubernetes, the subject CN is the user name and each O a group.
 */
import type { IncomingMessage } from 'node:http';
import type { UserInfo } from '../../../shared/identity/user.ts';
import { unauthorized } from './auth-errors.ts';
import { type ClientCAConfig, parseClientCAConfig } from './authentication-config.ts';
import type { Authenticator } from './contracts.ts';
import { verifyPeer } from './peer-verification.ts';

export interface ClientCertAuthenticatorOptions {
  configMapData?: Record<string, string>;
  /** Clock for certificate validity, injectable for tests. */
  now?: () => Date;
}

export class ClientCertAuthenticator implements Authenticator {
  #config: ClientCAConfig | undefined;
  readonly #now: () => Date;

  constructor(options: ClientCertAuthenticatorOptions = {}) {
    this.#now = options.now ?? (() => new Date());
    if (options.configMapData) this.update(options.configMapData);
  }

  /** Applies a new ConfigMap revision; throws on malformed data and keeps the previous one. */
  update(configMapData: Record<string, string> | undefined): void {
    this.#config = parseClientCAConfig(configMapData);
  }

  get configured(): boolean {
    return this.#config !== undefined;
  }

  async authenticate(req: IncomingMessage): Promise<UserInfo | undefined> {
    const config = this.#config;
    if (!config) return undefined;
    const verification = verifyPeer(req, config.roots, this.#now());
    if (!verification) return undefined;
    // An unverifiable certificate is an error, not "no credentials", as in
    // Kubernetes: the union still lets a later authenticator (a bearer
    // token) succeed, but never falls back to anonymous because of it.
    if (!verification.ok) throw unauthorized(`client certificate rejected: ${verification.reason}`);
    const { commonName, organizations } = verification;
    if (!commonName) return undefined;
    return { name: commonName, groups: organizations, extra: {} };
  }
}

/**
 * ExternalIdentityExchanger: asks an HTTPS service which identity a hub
 * caller has on a cluster. The Go original left this type unimplemented.
 *
 * Wire format (JSON, POST to the rule's url):
 *   request  {apiVersion: gateway.cluster.core.oam.dev/v1alpha1, kind: IdentityExchangeReview,
 *             spec: {rule, cluster, user: {username, uid?, groups, extra}}}
 *   answer   {status: {user: {username, groups?, uid?, extra?}}}
 *         or {status: {denied: true, reason?}}  -> 403 to the caller
 *
 * Failures never fall back to another identity (least of all the cluster's
 * own credential): the service unreachable or too slow is a 503, an answer
 * that is not a usable identity a 502, and the request is not forwarded.
 * Answers are cached per (configuration, rule, cluster, caller) for the
 * rule's cacheTTLSeconds in a bounded LRU, and identical lookups in flight
 * share one call, so a burst of kubectl requests costs one round trip.
 */
import https from 'node:https';
import type { UserInfo } from '../../../shared/identity/user.ts';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import { TtlCache } from '../auth/ttl-cache.ts';
import { CONFIGURATION_API_VERSION, type ExchangeRule } from './configuration.ts';

export type ExternalRule = Extract<ExchangeRule, { type: 'ExternalIdentityExchanger' }>;

export const REVIEW_KIND = 'IdentityExchangeReview';
const MAX_ANSWER_BYTES = 64 * 1024;
const MAX_NAME = 1024;
const TOO_LARGE = -1;
/** What may go into an Impersonate-* header: no control characters, nothing Node would refuse. */
const HEADER_SAFE = /^[\x20-\x7e\x80-\xff]+$/;

export interface ExternalExchangerOptions {
  /** Upper bound on cached answers (--identity-exchange-cache-size). */
  maxEntries: number;
  now?: () => number;
}

export class ExternalIdentityExchanger {
  readonly #cache: TtlCache<string, UserInfo>;
  // One keep-alive agent; Node pools its connections per CA bundle and host.
  readonly #agent = new https.Agent({ keepAlive: true, maxSockets: 32, timeout: 60_000 });

  constructor(options: ExternalExchangerOptions) {
    this.#cache = new TtlCache({
      maxEntries: options.maxEntries,
      ...(options.now ? { now: options.now } : {}),
    });
  }

  get cachedAnswers(): number {
    return this.#cache.size;
  }

  /**
   * The identity `user` has on `cluster` according to the rule's service.
   * `configurationKey` separates answers of different configurations (and
   * generations of one), so an edited rule is never served a stale answer.
   */
  exchange(rule: ExternalRule, configurationKey: string, user: UserInfo, cluster: string): Promise<UserInfo> {
    const key = JSON.stringify([
      configurationKey,
      rule.name,
      cluster,
      user.name,
      user.uid ?? '',
      [...user.groups].sort(),
      Object.entries(user.extra).sort(([a], [b]) => (a < b ? -1 : 1)),
    ]);
    return this.#cache.getOrLoad(
      key,
      () => this.#ask(rule, user, cluster),
      () => rule.external.cacheTtlMs,
    );
  }

  close(): void {
    this.#agent.destroy();
  }

  async #ask(rule: ExternalRule, user: UserInfo, cluster: string): Promise<UserInfo> {
    const { url, caBundle, timeoutMs } = rule.external;
    const what = `identity exchanger "${rule.name}" (${url.host})`;
    const body = JSON.stringify({
      apiVersion: CONFIGURATION_API_VERSION,
      kind: REVIEW_KIND,
      spec: {
        rule: rule.name,
        cluster,
        user: {
          username: user.name,
          ...(user.uid ? { uid: user.uid } : {}),
          groups: user.groups,
          extra: user.extra,
        },
      },
    });
    let answer: { code: number; text: string };
    try {
      answer = await post(url, body, {
        agent: this.#agent,
        ...(caBundle ? { ca: caBundle } : {}),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      const cause =
        err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')
          ? `no answer within ${timeoutMs / 1000}s`
          : errorText(err);
      throw new StatusError(
        failureStatus(
          503,
          `${what} is unavailable: ${cause}; the request was not forwarded to cluster "${cluster}"`,
        ),
      );
    }
    if (answer.code === TOO_LARGE)
      throw badAnswer(what, cluster, `answered more than ${MAX_ANSWER_BYTES} bytes`);
    if (answer.code < 200 || answer.code > 299) {
      throw badAnswer(what, cluster, `answered HTTP ${answer.code}`);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(answer.text);
    } catch {
      throw badAnswer(what, cluster, 'answered something that is not JSON');
    }
    const status = (parsed as { status?: unknown } | null)?.status as Record<string, unknown> | undefined;
    if (status?.denied === true) {
      const reason =
        typeof status.reason === 'string' && status.reason ? `: ${status.reason.slice(0, 256)}` : '';
      throw new StatusError(
        failureStatus(403, `${what} refused user "${user.name}" on cluster "${cluster}"${reason}`),
      );
    }
    const identity = identityFrom(status?.user);
    if (typeof identity === 'string') throw badAnswer(what, cluster, identity);
    return identity;
  }
}

function badAnswer(what: string, cluster: string, problem: string): StatusError {
  return new StatusError(
    failureStatus(502, `${what} ${problem}; the request was not forwarded to cluster "${cluster}"`),
  );
}

/** The identity in an answer's status.user, or what is wrong with it. */
export function identityFrom(raw: unknown): UserInfo | string {
  if (typeof raw !== 'object' || raw === null) return 'gave no status.user';
  const user = raw as Record<string, unknown>;
  if (!safeName(user.username)) return 'gave no usable status.user.username';
  const groups = user.groups ?? [];
  if (!Array.isArray(groups) || groups.length > 256 || !groups.every(safeName))
    return 'gave an unusable status.user.groups';
  if (user.uid !== undefined && !safeName(user.uid)) return 'gave an unusable status.user.uid';
  const extra: Record<string, string[]> = {};
  if (user.extra !== undefined) {
    if (typeof user.extra !== 'object' || user.extra === null || Array.isArray(user.extra))
      return 'gave an unusable status.user.extra';
    for (const [key, values] of Object.entries(user.extra)) {
      if (!safeName(key) || !Array.isArray(values) || !values.every(safeName))
        return 'gave an unusable status.user.extra';
      extra[key] = values as string[];
    }
  }
  return {
    name: user.username as string,
    groups: groups as string[],
    extra,
    ...(user.uid !== undefined ? { uid: user.uid as string } : {}),
  };
}

function safeName(value: unknown): value is string {
  return typeof value === 'string' && value.length <= MAX_NAME && HEADER_SAFE.test(value);
}

function post(
  url: URL,
  body: string,
  options: { agent: https.Agent; ca?: string; signal: AbortSignal },
): Promise<{ code: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      url,
      {
        method: 'POST',
        agent: options.agent,
        ...(options.ca ? { ca: options.ca } : {}),
        signal: options.signal,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        let text = '';
        let size = 0;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          size += Buffer.byteLength(chunk);
          if (size > MAX_ANSWER_BYTES) {
            res.destroy();
            resolve({ code: TOO_LARGE, text: '' });
            return;
          }
          text += chunk;
        });
        res.on('end', () => resolve({ code: res.statusCode ?? 0, text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function errorText(err: unknown): string {
  if (err instanceof AggregateError && !err.message) {
    return err.errors.map((e: unknown) => (e instanceof Error ? e.message : String(e))).join('; ');
  }
  return err instanceof Error ? err.message : String(err);
}

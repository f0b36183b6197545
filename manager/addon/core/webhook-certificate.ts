/**
 * The admission webhook's serving certificate, made by the manager itself and
 * kept in a Secret in its own namespace (`<addon>-addon-manager-webhook`,
 * type kubernetes.io/tls, plus the CA's key):
 * - one CA and one serving certificate for every replica and every restart:
 *   the MutatingWebhookConfiguration's caBundle stays valid whichever
 *   replica the Service routes a call to, and a restart changes nothing;
 * - the first replica to find the Secret missing creates it; a replica that
 *   loses that race (409) or a concurrent renewal (resourceVersion conflict)
 *   reads the winner's and uses it;
 * - renewed before expiry, checked on every start and every `checkEveryMs`:
 *   the serving certificate when a third of its life is left (same CA, so
 *   the caBundle does not change), the CA when a third of its life is left
 *   (the old CA stays in the bundle, `ca-previous.crt`, until it expires, so
 *   a replica still serving a certificate of the old CA keeps being trusted).
 * A serving certificate that does not name every host the webhook is
 * reached at (Service DNS names, the --webhook-url host) is reissued too.
 */
import { X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import type { Logger } from 'pino';
import type { KubeClient, KubeObject } from '../../../shared/kube/client.ts';
import { StatusError } from '../../../shared/kube/status.ts';
import { createCertificateAuthority, loadCertificateAuthority } from '../../../shared/pki.ts';

const day = 24 * 3600 * 1000;

export interface ServingCertificate {
  /** PEM: the serving certificate and its key. */
  cert: string;
  key: string;
  /** PEM CA certificates a client must trust (the MutatingWebhookConfiguration's caBundle, decoded). */
  caBundle: string;
}

export interface SecretData {
  'ca.crt'?: string;
  'ca.key'?: string;
  'ca-previous.crt'?: string;
  'tls.crt'?: string;
  'tls.key'?: string;
  /** The current and previous CA in one PEM file: what the gateway's replicas trust in each other (gateway-deploy/). */
  'ca-bundle.crt'?: string;
}

export type Renewal = 'none' | 'serving' | 'ca';

/** What must be made anew for `data` to serve `hosts` well past `now`. Pure. */
export function renewalNeeded(data: SecretData, hosts: string[], now: number): Renewal {
  const repair = repairNeeded(data, hosts);
  if (repair === 'ca') return 'ca';
  if (lifeLeft(new X509Certificate(data['ca.crt'] ?? ''), now) < 1 / 3) return 'ca';
  if (repair === 'serving') return 'serving';
  return lifeLeft(new X509Certificate(data['tls.crt'] ?? ''), now) < 1 / 3 ? 'serving' : 'none';
}

/**
 * What must be made anew whatever the time: a CA or key that is missing or unreadable ('ca'), a serving
 * certificate its CA did not sign or that does not name every one of `hosts` ('serving'). Pure.
 */
export function repairNeeded(data: SecretData, hosts: string[]): Renewal {
  let ca: X509Certificate;
  let leaf: X509Certificate;
  try {
    if (!data['ca.key'] || !data['tls.key']) return 'ca';
    ca = new X509Certificate(data['ca.crt'] ?? '');
    leaf = new X509Certificate(data['tls.crt'] ?? '');
  } catch {
    return 'ca';
  }
  if (!leaf.checkIssued(ca) || !leaf.verify(ca.publicKey)) return 'serving';
  const named = hosts.every((h) => (isIP(h) ? leaf.checkIP(h) : leaf.checkHost(h, { wildcards: false })));
  return named ? 'none' : 'serving';
}

function lifeLeft(cert: X509Certificate, now: number): number {
  const from = Date.parse(cert.validFrom);
  const to = Date.parse(cert.validTo);
  return to <= from ? 0 : (to - now) / (to - from);
}

/** The CA bundle of `data`: its CA, and the previous CA while that one is still valid. */
export function caBundleOf(data: SecretData, now: number): string {
  const bundle = [data['ca.crt'] ?? ''];
  const previous = data['ca-previous.crt'];
  if (previous) {
    try {
      if (Date.parse(new X509Certificate(previous).validTo) > now) bundle.push(previous);
    } catch {
      // an unreadable previous CA is simply not trusted any more
    }
  }
  return bundle.map((pem) => `${pem.trimEnd()}\n`).join('');
}

export interface WebhookCertificateOptions {
  hub: Pick<KubeClient, 'getOptional' | 'create' | 'request'>;
  namespace: string;
  secretName: string;
  /** DNS names and IP addresses the webhook is reached at. */
  hosts: string[];
  log: Pick<Logger, 'info' | 'warn'>;
  caValidForMs?: number;
  servingValidForMs?: number;
  now?: () => number;
}

type Secret = KubeObject & { type?: string; data?: Record<string, string> };

export class WebhookCertificate {
  readonly #o: WebhookCertificateOptions;
  readonly #now: () => number;
  #current: ServingCertificate | undefined;

  constructor(options: WebhookCertificateOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
  }

  get current(): ServingCertificate | undefined {
    return this.#current;
  }

  /** Reads the Secret, creating or renewing what it needs; returns what to serve. */
  async ensure(): Promise<ServingCertificate> {
    const path = `/api/v1/namespaces/${this.#o.namespace}/secrets/${this.#o.secretName}`;
    for (let attempt = 0; ; attempt++) {
      const secret = await this.#o.hub.getOptional<Secret>(path);
      const data = decode(secret?.data);
      const renewal = renewalNeeded(data, this.#o.hosts, this.#now());
      if (renewal === 'none') return this.#use(data);
      const next = await this.#renew(data, renewal);
      try {
        if (secret) {
          await this.#o.hub.request('PUT', path, {
            body: this.#secret(next, secret.metadata?.resourceVersion),
          });
        } else {
          await this.#o.hub.create(`/api/v1/namespaces/${this.#o.namespace}/secrets`, this.#secret(next));
        }
      } catch (err) {
        // Another replica created or renewed it first: use theirs (read again).
        if (err instanceof StatusError && err.code === 409 && attempt < 3) continue;
        throw err;
      }
      this.#o.log.info(
        { secret: `${this.#o.namespace}/${this.#o.secretName}`, renewed: renewal, created: !secret },
        renewal === 'ca' ? 'webhook CA and serving certificate issued' : 'webhook serving certificate issued',
      );
      return this.#use(next);
    }
  }

  /** Runs ensure() every `everyMs`; `onChange` gets a certificate that differs from the last one. */
  watch(signal: AbortSignal, everyMs: number, onChange: (serving: ServingCertificate) => void): void {
    const timer = setInterval(async () => {
      const before = this.#current;
      try {
        const after = await this.ensure();
        if (after.cert !== before?.cert || after.caBundle !== before?.caBundle) onChange(after);
      } catch (err) {
        this.#o.log.warn(
          { err: (err as Error).message },
          'cannot check the webhook serving certificate; retrying',
        );
      }
    }, everyMs);
    timer.unref();
    signal.addEventListener('abort', () => clearInterval(timer), { once: true });
  }

  #use(data: SecretData): ServingCertificate {
    this.#current = {
      cert: data['tls.crt'] ?? '',
      key: data['tls.key'] ?? '',
      caBundle: caBundleOf(data, this.#now()),
    };
    return this.#current;
  }

  async #renew(data: SecretData, renewal: Renewal): Promise<SecretData> {
    const subject = `${this.#o.secretName}.${this.#o.namespace}`;
    const next: SecretData = {};
    let ca: Awaited<ReturnType<typeof createCertificateAuthority>>;
    if (renewal === 'ca') {
      ca = await createCertificateAuthority(`${subject}-ca`, this.#o.caValidForMs ?? 10 * 365 * day);
      if (data['ca.crt'] && data['ca.key']) next['ca-previous.crt'] = data['ca.crt'];
    } else {
      ca = await loadCertificateAuthority({ cert: data['ca.crt'] ?? '', key: data['ca.key'] ?? '' });
      if (data['ca-previous.crt']) next['ca-previous.crt'] = data['ca-previous.crt'];
    }
    const leaf = await ca.issue({
      commonName: subject,
      dnsNames: this.#o.hosts.filter((h) => !isIP(h)),
      ipAddresses: this.#o.hosts.filter((h) => isIP(h)),
      usage: 'server',
      validForMs: this.#o.servingValidForMs ?? 365 * day,
    });
    return { ...next, 'ca.crt': ca.cert, 'ca.key': ca.key, 'tls.crt': leaf.cert, 'tls.key': leaf.key };
  }

  #secret(data: SecretData, resourceVersion?: string): Secret {
    return {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: this.#o.secretName,
        namespace: this.#o.namespace,
        ...(resourceVersion ? { resourceVersion } : {}),
        labels: { 'app.kubernetes.io/part-of': 'cluster-gateway' },
      },
      type: 'kubernetes.io/tls',
      data: Object.fromEntries(
        Object.entries(data).map(([k, v]) => [k, Buffer.from(v as string).toString('base64')]),
      ),
    };
  }
}

function decode(data: Record<string, string> | undefined): SecretData {
  return Object.fromEntries(
    Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
  ) as SecretData;
}

/**
 * The cluster's credential Secret on the hub, written by the agent: how the gateway reaches this
 * cluster through the tunnel, and with what (docs/tunnel.md, "Trust models"). One Secret, named
 * after the cluster, in the gateway's credential namespace; the manager grants the agent that name
 * only (manager/addon/registration/hub-permissions.ts) and deletes it when the addon is disabled.
 *
 * - hub-credential: a token of a ServiceAccount on this cluster (its RBAC is the addon's
 *   configuration, rendered by the manager), requested here with the TokenRequest API, and this
 *   apiserver's CA. The gateway runs TLS end to end inside the tunnel with it. The token is renewed
 *   after `rotateSeconds`, well before it expires; the previous one stays valid until its own expiry,
 *   so requests in flight are never cut. Deleting the ServiceAccount (the addon disabled) voids every
 *   token at once.
 * - no-credential: the labels alone; the hub holds nothing, the agent acts as the caller
 *   (tunnel/impersonation.ts).
 *
 * Written by server-side apply under the agent's own field manager, never forced, and only to a
 * Secret that is absent or carries the agent's label: a Secret an admin wrote for this cluster is not
 * taken over (the conflict is logged, and retried until resolved).
 * A Secret that drifted (edited, deleted) is repaired within `checkSeconds`.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { KubeClient, KubeObject } from '../shared/kube/client.ts';
import { failureStatus, StatusError } from '../shared/kube/status.ts';

export type AgentTrustModel = 'hub-credential' | 'no-credential';

/** Labels of the Go original's credential Secrets (manager/gateway/clusters/keys.ts), and who wrote it. */
export const secretLabels = {
  endpointType: 'cluster.core.oam.dev/cluster-endpoint-type',
  credentialType: 'cluster.core.oam.dev/cluster-credential-type',
  managedBy: 'app.kubernetes.io/managed-by',
} as const;
export const agentSecretWriter = 'cluster-gateway-agent';
export const trustModelAnnotation = 'cluster.core.oam.dev/trust-model';
export const tokenExpiryAnnotation = 'cluster.core.oam.dev/token-expiration';

export interface HubCredentialOptions {
  cluster: string;
  trustModel: AgentTrustModel;
  /** The gateway's credential namespace on the hub. */
  namespace: string;
  hub: () => KubeClient;
  spoke: () => KubeClient;
  /** This apiserver's CA (PEM) as the agent trusts it: written as ca.crt for the gateway's TLS. */
  spokeCa: () => string | undefined;
  /** hub-credential: the ServiceAccount whose tokens the hub gets. */
  serviceAccount?: { namespace: string; name: string };
  /** Lifetime asked for each token (the apiserver may cap it). */
  tokenSeconds: number;
  /** A new token after this long (well before expiry; default half the lifetime). */
  rotateSeconds: number;
  /** How often the hub Secret is compared with what it should be. */
  checkSeconds: number;
  log: { info(o: object, m: string): void; warn(o: object, m: string): void };
  /** Each write and failure, for metrics. */
  onResult?: (result: 'written' | 'unchanged' | 'conflict' | 'error', tokenExpiresAt?: number) => void;
}

interface Token {
  value: string;
  issuedAt: number;
  expiresAt: number;
}

interface SecretObject extends KubeObject {
  data?: Record<string, string>;
}

/** What the hub Secret must hold (pure). */
export function desiredSecret(
  o: Pick<HubCredentialOptions, 'cluster' | 'namespace' | 'trustModel'>,
  token: Token | undefined,
  ca: string | undefined,
): SecretObject {
  const hubCredential = o.trustModel === 'hub-credential';
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: o.cluster,
      namespace: o.namespace,
      labels: {
        [secretLabels.endpointType]: 'ClusterProxy',
        [secretLabels.managedBy]: agentSecretWriter,
        ...(hubCredential ? { [secretLabels.credentialType]: 'ServiceAccountToken' } : {}),
      },
      annotations: {
        [trustModelAnnotation]: o.trustModel,
        ...(hubCredential && token
          ? { [tokenExpiryAnnotation]: new Date(token.expiresAt).toISOString().replace(/\.\d+Z$/, 'Z') }
          : {}),
      },
    },
    type: 'Opaque',
    ...(hubCredential && token
      ? {
          data: {
            token: Buffer.from(token.value).toString('base64'),
            ...(ca ? { 'ca.crt': Buffer.from(ca).toString('base64') } : {}),
          },
        }
      : {}),
  };
}

/** True when `current` already says everything `desired` says (extra fields of others are fine). */
export function upToDate(current: SecretObject | undefined, desired: SecretObject): boolean {
  if (!current) return false;
  const sub = (want: Record<string, string> | undefined, have: Record<string, string> | undefined) =>
    Object.entries(want ?? {}).every(([k, v]) => have?.[k] === v);
  const meta = (o: SecretObject, key: 'labels' | 'annotations') =>
    o.metadata?.[key] as Record<string, string> | undefined;
  if (!sub(meta(desired, 'labels'), meta(current, 'labels'))) return false;
  if (!sub(meta(desired, 'annotations'), meta(current, 'annotations'))) return false;
  // No data wanted (no-credential): a credential left in it would turn the cluster hub-credential.
  if (!desired.data) return !['token', 'tls.crt', 'tls.key'].some((k) => current.data?.[k] !== undefined);
  return sub(desired.data, current.data);
}

export class HubCredentialWriter {
  readonly #o: HubCredentialOptions;
  #token: Token | undefined;

  constructor(options: HubCredentialOptions) {
    if (options.trustModel === 'hub-credential' && !options.serviceAccount) {
      throw new Error('the hub-credential trust model needs the ServiceAccount whose token the hub gets');
    }
    this.#o = options;
  }

  get secretPath(): string {
    return `/api/v1/namespaces/${this.#o.namespace}/secrets/${this.#o.cluster}`;
  }

  /** Writes and keeps the Secret until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    let failures = 0;
    while (!signal.aborted) {
      let waitMs: number;
      try {
        await this.round();
        failures = 0;
        waitMs = this.#nextWaitMs();
      } catch (err) {
        failures++;
        const conflict = err instanceof StatusError && err.code === 409;
        this.#o.onResult?.(conflict ? 'conflict' : 'error');
        waitMs = Math.min(60_000, 1_000 * 2 ** Math.min(failures, 6));
        this.#o.log.warn(
          {
            secret: `${this.#o.namespace}/${this.#o.cluster}`,
            err: err instanceof Error ? err.message : String(err),
            retryInMs: waitMs,
          },
          conflict
            ? 'the cluster credential Secret on the hub is written by someone else: not taken over'
            : 'cannot write the cluster credential Secret on the hub',
        );
      }
      await delay(waitMs, undefined, { signal }).catch(() => {});
    }
  }

  /** One pass: renew the token when due, then make the hub Secret say so. Throws on failure. */
  async round(now = Date.now()): Promise<'written' | 'unchanged'> {
    const o = this.#o;
    let renewed = false;
    if (o.trustModel === 'hub-credential' && (!this.#token || now >= this.#rotateAt(this.#token))) {
      this.#token = await this.#requestToken(now);
      renewed = true;
    }
    const desired = desiredSecret(o, this.#token, o.spokeCa());
    const hub = o.hub();
    const current = await hub.getOptional<SecretObject>(this.secretPath);
    // Someone else's Secret of this name (an admin's, written before the addon's trust model was set):
    // never taken over. Field ownership alone would not say so: a Secret written with stringData, or
    // with the same label values, leaves the agent's apply nothing to conflict with.
    const writer = (current?.metadata?.labels as Record<string, string> | undefined)?.[
      secretLabels.managedBy
    ];
    if (current && writer !== agentSecretWriter) {
      throw new StatusError(
        failureStatus(
          409,
          `Secret ${o.namespace}/${o.cluster} exists and was not written by the agent (no label ${secretLabels.managedBy}=${agentSecretWriter}): not taken over; delete it to let the agent write the cluster's credential`,
        ),
      );
    }
    if (!renewed && upToDate(current, desired)) {
      o.onResult?.('unchanged', this.#token?.expiresAt);
      return 'unchanged';
    }
    await hub.request('PATCH', `${this.secretPath}?fieldManager=${agentSecretWriter}`, {
      body: desired,
      contentType: 'application/apply-patch+yaml',
    });
    o.onResult?.('written', this.#token?.expiresAt);
    o.log.info(
      {
        secret: `${o.namespace}/${o.cluster}`,
        trustModel: o.trustModel,
        ...(this.#token ? { tokenExpiresAt: new Date(this.#token.expiresAt).toISOString() } : {}),
      },
      renewed
        ? 'cluster credential written to the hub (new token)'
        : 'cluster credential Secret on the hub repaired',
    );
    return 'written';
  }

  #nextWaitMs(now = Date.now()): number {
    const check = this.#o.checkSeconds * 1000;
    if (!this.#token) return check;
    return Math.max(0, Math.min(check, this.#rotateAt(this.#token) - now));
  }

  /** When a token is renewed: after rotateSeconds, and never later than 80 % of the life it really got. */
  #rotateAt(token: Token): number {
    const life = token.expiresAt - token.issuedAt;
    return token.issuedAt + Math.min(this.#o.rotateSeconds * 1000, 0.8 * life);
  }

  async #requestToken(now: number): Promise<Token> {
    const sa = this.#o.serviceAccount!;
    const review = await this.#o.spoke().create<
      KubeObject & {
        status: { token: string; expirationTimestamp?: string };
      }
    >(`/api/v1/namespaces/${sa.namespace}/serviceaccounts/${sa.name}/token`, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { expirationSeconds: this.#o.tokenSeconds },
    });
    const expires = Date.parse(review.status.expirationTimestamp ?? '');
    return {
      value: review.status.token,
      issuedAt: now,
      expiresAt: Number.isNaN(expires) ? now + this.#o.tokenSeconds * 1000 : expires,
    };
  }
}

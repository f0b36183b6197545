/**
 * Registers the LeaseNotFound webhook (lease-not-found-webhook.ts) with the
 * hub apiserver, or removes it.
 *
 * Run by the leader only, like every other writer of the manager: one
 * cluster-wide object gets one writer, so two replicas with different flags
 * (a rolling update) never flap it. Every replica serves the webhook with the
 * same certificate (webhook-certificate.ts, one Secret), so the caBundle the
 * leader registers is right whichever replica the apiserver reaches.
 *
 * - Customized health mode with the listener on: the configuration points at
 *   the Service (in-cluster) or the --webhook-url (a manager outside the
 *   cluster), with the CA bundle from the Secret; applied again when the
 *   certificate is renewed and every few minutes (someone deleting it is
 *   repaired).
 * - Lease mode, or the listener off: removed. In Lease mode OCM's Lease
 *   verdicts are the truth and must not be rewritten; with the listener off a
 *   stale registration would point the apiserver at nothing.
 */
import type { KubeClient } from '../../../shared/kube/client.ts';
import { Controller, type ControllerDeps } from '../core/controller.ts';
import {
  ensureWebhookConfiguration,
  removeWebhookConfiguration,
  type WebhookClientConfig,
  webhookPath,
} from './lease-not-found-webhook.ts';

export type WebhookTarget = { url: string } | { service: { namespace: string; name: string } };

/** The host names and addresses the serving certificate must name for `target`. */
export function webhookHosts(target: WebhookTarget): string[] {
  if ('url' in target) return [new URL(target.url).hostname.replace(/^\[|\]$/g, '')];
  const { name, namespace } = target.service;
  return [name, `${name}.${namespace}`, `${name}.${namespace}.svc`, `${name}.${namespace}.svc.cluster.local`];
}

export function webhookClientConfig(target: WebhookTarget, caBundlePem: string): WebhookClientConfig {
  const caBundle = Buffer.from(caBundlePem).toString('base64');
  if ('url' in target) return { url: `${target.url}${webhookPath}`, caBundle };
  return { service: { ...target.service, port: 443, path: webhookPath }, caBundle };
}

export interface WebhookRegistrarDeps extends ControllerDeps {
  hub: KubeClient;
  addonName: string;
  /** Undefined: nothing serves the webhook (or Lease mode): the registration is removed. */
  target: WebhookTarget | undefined;
  /** The PEM CA bundle to register (read on every reconcile: a renewed CA is picked up). */
  caBundle: () => string | undefined;
  /** Re-apply this often (default 5 min). */
  resyncMs?: number;
}

const key = 'webhook';

export class WebhookRegistrar {
  readonly #d: WebhookRegistrarDeps;
  readonly controller: Controller;
  /** The CA bundle last registered (to log a registration once, not every resync). */
  #registered: string | undefined;

  constructor(deps: WebhookRegistrarDeps) {
    this.#d = deps;
    // No informer: the configuration is looked at on start, on refresh() and every resyncMs (the reconcile's requeue).
    this.controller = new Controller(
      { name: 'webhook-registration', keys: () => key, sync: () => this.reconcile() },
      deps,
    );
  }

  /** Applies again now (the certificate changed). */
  refresh(): void {
    this.controller.enqueue(key);
  }

  async reconcile(): Promise<{ requeueAfterMs: number } | undefined> {
    const { hub, addonName, target } = this.#d;
    const log = this.controller.log;
    const caBundle = this.#d.caBundle();
    if (!target || !caBundle) {
      await removeWebhookConfiguration(hub, addonName);
      log.info(
        { addon: addonName },
        'LeaseNotFound webhook not registered (Lease health mode or listener off)',
      );
      return undefined;
    }
    const clientConfig = webhookClientConfig(target, caBundle);
    await ensureWebhookConfiguration(hub, addonName, clientConfig);
    const at = 'url' in clientConfig ? clientConfig.url : clientConfig.service;
    if (this.#registered !== caBundle) log.info({ addon: addonName, at }, 'LeaseNotFound webhook registered');
    this.#registered = caBundle;
    return { requeueAfterMs: this.#d.resyncMs ?? 300_000 };
  }
}

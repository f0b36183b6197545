/**
 * Closes the window in which OCM's klusterlet registration agent writes
 * `Available Unknown / ManagedClusterAddOnLeaseNotFound` on a new addon.
 *
 * The race: `status.healthCheck.mode` defaults to Lease; until the manager's
 * first status write says Customized, the registration agent (its 30 s resync
 * in OCM v1.2/v1.3) may look for the spoke Lease, find none, and write
 * LeaseNotFound. Its write is a merge patch carrying the resourceVersion it
 * read, so once the manager's write lands any stale write of its fails with
 * a conflict and its next sync sees Customized; the window is the time
 * between the addon's creation and the manager's first write.
 *
 * A status written with the CREATE does not help: for a CRD with a status
 * subresource the apiserver drops `status` from a create, after mutating
 * admission (checked in e2e/addon-health.test.ts). So this mutating webhook
 * sits on UPDATE of `managedclusteraddons/status` for this addon only
 * (matchConditions on the name, so no other addon's writes even reach it):
 * when an update would set `Available` to one of OCM's Lease-mode verdicts,
 * it rewrites that condition to the manager's current verdict (or, before
 * the manager has one, to `WaitingForAddonManager`) and sets
 * `healthCheck.mode: Customized`.
 *
 * Who may ask: the manager's verdict for a cluster (its reason and message) is not public, so it
 * goes only to a caller the listener authenticated: the hub apiserver's client certificate, verified
 * against --webhook-client-ca (manager/addon/http.ts refuses anyone else with 401). Without that flag
 * (a hub whose apiserver flags the installer does not control) callers are anonymous, and the
 * webhook answers only from what the AdmissionReview itself carries: the old object's own Available
 * condition, else WaitingForAddonManager. It still keeps LeaseNotFound off the addon; the
 * availability controller's next write brings the current verdict.
 *
 * failurePolicy Ignore: OCM never blocks on this manager. The flip side is
 * the guarantee's limit: while no manager replica serves the webhook,
 * nothing rewrites the write, and the availability controller corrects it only
 * when a manager is back.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { KubeClient } from '../../../shared/kube/client.ts';
import { type ConditionVerdict, metaTime } from '../core/conditions.ts';
import type { Condition, ManagedClusterAddOn } from '../core/resources.ts';

/** What OCM's registration agent writes in Lease mode (pkg/registration/spoke/addon/lease_controller.go). */
export const leaseModeReasons = new Set([
  'ManagedClusterAddOnLeaseNotFound',
  'ManagedClusterAddOnLeaseUpdated',
  'ManagedClusterAddOnLeaseUpdateStopped',
]);

export function waitingForManager(addonName: string): ConditionVerdict {
  return {
    status: 'Unknown',
    reason: 'WaitingForAddonManager',
    message: `the ${addonName} addon manager has not evaluated this addon yet; it reports Available within seconds of running`,
  };
}

export interface AdmissionRequest {
  uid: string;
  operation: string;
  subResource?: string;
  resource?: { group: string; version: string; resource: string };
  namespace?: string;
  name?: string;
  object?: ManagedClusterAddOn;
  oldObject?: ManagedClusterAddOn;
  userInfo?: { username?: string };
}

export interface AdmissionResponse {
  uid: string;
  allowed: true;
  patchType?: 'JSONPatch';
  patch?: string;
  warnings?: string[];
}

type PatchOp = { op: 'add' | 'replace'; path: string; value: unknown };

export interface MutationContext {
  addonName: string;
  /** The manager's verdict for the addon on `cluster`, if it has one. */
  verdictFor(cluster: string): ConditionVerdict | undefined;
  now?: () => number;
}

/** The JSON patch for one admission request (empty: leave the write as it is). */
export function statusPatch(request: AdmissionRequest, context: MutationContext): PatchOp[] {
  const obj = request.object;
  if (
    request.operation !== 'UPDATE' ||
    request.subResource !== 'status' ||
    request.resource?.resource !== 'managedclusteraddons' ||
    !obj ||
    obj.metadata?.name !== context.addonName
  ) {
    return [];
  }
  const ops: PatchOp[] = [];
  if (!obj.status) {
    ops.push({ op: 'add', path: '/status', value: { healthCheck: { mode: 'Customized' } } });
    return ops;
  }
  if (obj.status.healthCheck?.mode !== 'Customized') {
    ops.push({
      op: 'add',
      path: '/status/healthCheck',
      value: { ...obj.status.healthCheck, mode: 'Customized' },
    });
  }
  const conditions = obj.status.conditions ?? [];
  const index = conditions.findIndex((c) => c.type === 'Available');
  const incoming = conditions[index];
  if (!incoming || !leaseModeReasons.has(incoming.reason)) return ops;

  // Prefer what the manager holds now; else what the object said before this write; else "waiting".
  const cluster = obj.metadata.namespace ?? request.namespace ?? '';
  const previous = request.oldObject?.status?.conditions?.find((c) => c.type === 'Available');
  const verdict =
    context.verdictFor(cluster) ??
    (previous && !leaseModeReasons.has(previous.reason) ? previous : undefined) ??
    waitingForManager(context.addonName);
  const now = context.now?.() ?? Date.now();
  const lastTransitionTime =
    previous && previous.status === verdict.status && previous.lastTransitionTime
      ? previous.lastTransitionTime
      : metaTime(now);
  const replacement: Condition = {
    type: 'Available',
    status: verdict.status,
    reason: verdict.reason,
    message: verdict.message,
    lastTransitionTime,
  };
  ops.push({ op: 'replace', path: `/status/conditions/${index}`, value: replacement });
  return ops;
}

export function admissionResponse(request: AdmissionRequest, context: MutationContext): AdmissionResponse {
  const ops = statusPatch(request, context);
  if (ops.length === 0) return { uid: request.uid, allowed: true };
  return {
    uid: request.uid,
    allowed: true,
    patchType: 'JSONPatch',
    patch: Buffer.from(JSON.stringify(ops)).toString('base64'),
  };
}

const maxBody = 3 * 1024 * 1024;

/**
 * What an unauthenticated caller may be told: nothing the manager knows. The verdict then comes from
 * the request's old object or is "waiting", both of which the caller supplied or could guess.
 */
export function anonymousContext(context: MutationContext): MutationContext {
  return { ...context, verdictFor: () => undefined };
}

/**
 * Whether the caller proved who it is: a TLS client certificate the listener verified (only
 * requested, and only ever true, when --webhook-client-ca is set).
 */
function callerVerified(req: IncomingMessage): boolean {
  return (req.socket as Partial<TLSSocket>).authorized === true;
}

/**
 * The HTTP handler (plain Node signature, so express mounts it as is). A
 * request it cannot read gets a 400 Status; failurePolicy Ignore means the
 * apiserver then lets the write through unchanged.
 */
export function admissionHandler(context: MutationContext) {
  return async (req: IncomingMessage & { body?: unknown }, res: ServerResponse): Promise<void> => {
    const reply = (code: number, body: unknown) => {
      res.writeHead(code, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const badRequest = (message: string) =>
      reply(400, {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        reason: 'BadRequest',
        code: 400,
        message,
      });
    let review: { apiVersion?: string; kind?: string; request?: AdmissionRequest };
    try {
      if (req.body && typeof req.body === 'object' && !Buffer.isBuffer(req.body)) {
        review = req.body as typeof review;
      } else {
        let size = 0;
        const chunks: Buffer[] = [];
        for await (const chunk of req) {
          size += (chunk as Buffer).length;
          if (size > maxBody) return badRequest(`AdmissionReview larger than ${maxBody} bytes`);
          chunks.push(chunk as Buffer);
        }
        review = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      }
    } catch (err) {
      return badRequest(`body is not JSON: ${(err as Error).message}`);
    }
    if (review?.kind !== 'AdmissionReview' || !review.request?.uid) {
      return badRequest('expected an admission.k8s.io/v1 AdmissionReview with request.uid');
    }
    reply(200, {
      apiVersion: review.apiVersion ?? 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: admissionResponse(review.request, callerVerified(req) ? context : anonymousContext(context)),
    });
  };
}

export const webhookPath = '/mutate-managedclusteraddon-status';

export type WebhookClientConfig =
  | { url: string; caBundle: string }
  | {
      service: { namespace: string; name: string; port?: number; path: string };
      caBundle: string;
    };

/** The MutatingWebhookConfiguration, scoped to this addon's status writes. */
export function webhookConfiguration(addonName: string, clientConfig: WebhookClientConfig) {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: {
      name: `${addonName}-addon-available`,
      labels: { 'open-cluster-management.io/addon-name': addonName },
    },
    webhooks: [
      {
        name: `available.${addonName}.addon.cluster.core.oam.dev`,
        admissionReviewVersions: ['v1'],
        sideEffects: 'None',
        failurePolicy: 'Ignore',
        timeoutSeconds: 3,
        matchPolicy: 'Equivalent',
        rules: [
          {
            apiGroups: ['addon.open-cluster-management.io'],
            apiVersions: ['v1alpha1', 'v1beta1'],
            operations: ['UPDATE'],
            resources: ['managedclusteraddons/status'],
            scope: 'Namespaced',
          },
        ],
        matchConditions: [{ name: 'this-addon-only', expression: `object.metadata.name == '${addonName}'` }],
        clientConfig,
      },
    ],
  };
}

export const webhookFieldManager = 'cluster-gateway-addon-manager-webhook';

export async function ensureWebhookConfiguration(
  hub: KubeClient,
  addonName: string,
  clientConfig: WebhookClientConfig,
): Promise<void> {
  const config = webhookConfiguration(addonName, clientConfig);
  await hub.apply(
    `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${config.metadata.name}`,
    config,
    webhookFieldManager,
  );
}

/** In Lease mode the rewrite must stop: OCM's Lease verdicts are then the truth. */
export async function removeWebhookConfiguration(hub: KubeClient, addonName: string): Promise<void> {
  await hub.delete(
    `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${addonName}-addon-available`,
  );
}

/**
 * Judges the gateway replicas' peer CertificateSigningRequests (label cluster.core.oam.dev/gateway-peer;
 * which ones pass: peer-csr-decision.ts): approves a replica's, denies anything else with the label
 * (condition Denied with the reason), and removes finished ones: a denied or failed one after
 * `deniedGraceMs` (long enough for its requester to read why), an approved one `issuedGraceMs` after
 * its certificate was issued (the replica has read it by then). CSRs without the label are never
 * looked at: the addon agents' are registration/csr-approver.ts's.
 */
import type { KubeClient } from '../../../shared/kube/client.ts';
import { approveCertificateSigningRequest } from '../../../shared/kube/csr-approval.ts';
import { Informer, type InformerClient, type InformerOptions } from '../../../shared/kube/informer.ts';
import {
  type CertificateSigningRequest,
  csrPath,
  gatewayPeerCsrLabel,
} from '../../gateway/tunnel/peer-certificate.ts';
import { Controller, type ControllerDeps } from '../core/controller.ts';
import type { ProcessResult } from '../core/work-queue.ts';
import { decidePeerCsr, type PeerCsrContext } from './peer-csr-decision.ts';

export const peerApprovalReason = 'GatewayPeerCertificate';
export const peerDenialReason = 'NotAGatewayReplica';

/** The peer CSRs, and only those, as the manager watches them. */
export function peerCsrInformer(
  hub: InformerClient,
  common: Pick<InformerOptions, 'onError'> = {},
): Informer<CertificateSigningRequest> {
  return new Informer<CertificateSigningRequest>(hub, {
    path: csrPath,
    labelSelector: gatewayPeerCsrLabel,
    ...common,
  });
}

type Condition = NonNullable<NonNullable<CertificateSigningRequest['status']>['conditions']>[number] & {
  lastUpdateTime?: string;
  lastTransitionTime?: string;
};

function conditionOf(csr: CertificateSigningRequest, type: string): Condition | undefined {
  return (csr.status?.conditions as Condition[] | undefined)?.find(
    (c) => c.type === type && c.status !== 'False',
  );
}

/** When a condition was set (its update time, else its transition time, else the CSR's creation). */
function since(csr: CertificateSigningRequest, condition: Condition): number {
  const at =
    condition.lastUpdateTime ?? condition.lastTransitionTime ?? String(csr.metadata.creationTimestamp ?? '');
  const ms = Date.parse(at);
  return Number.isNaN(ms) ? 0 : ms;
}

export interface PeerCertificateApproverDeps extends ControllerDeps, PeerCsrContext {
  hub: Pick<KubeClient, 'request' | 'delete'>;
  csrs: Informer<CertificateSigningRequest>;
  deniedGraceMs?: number;
  issuedGraceMs?: number;
  now?: () => number;
}

export class PeerCertificateApprover {
  readonly controller: Controller;
  readonly #deps: PeerCertificateApproverDeps;

  constructor(deps: PeerCertificateApproverDeps) {
    this.#deps = deps;
    const key = (csr: CertificateSigningRequest) => csr.metadata.name;
    this.controller = new Controller(
      {
        name: 'gateway-peer-certificates',
        workers: 2,
        watches: [{ informer: deps.csrs, add: key, update: key }],
        keys: () => deps.csrs.list().map(key),
        sync: (name) => this.reconcile(name),
      },
      deps,
    );
  }

  async reconcile(name: string): Promise<ProcessResult> {
    const { hub, csrs } = this.#deps;
    const log = this.controller.log;
    const csr = csrs.get(name);
    if (!csr) return;
    const now = (this.#deps.now ?? Date.now)();
    const path = `${csrPath}/${encodeURIComponent(name)}`;

    const finished = conditionOf(csr, 'Denied') ?? conditionOf(csr, 'Failed');
    if (finished) {
      const left = since(csr, finished) + (this.#deps.deniedGraceMs ?? 60_000) - now;
      if (left > 0) return { requeueAfterMs: left };
      await hub.delete(path);
      log.info({ csr: name, condition: finished.type }, 'gateway peer CSR removed');
      return;
    }
    const approved = conditionOf(csr, 'Approved');
    if (approved) {
      // Not issued yet: the signer's update brings it back here.
      if (!csr.status?.certificate) return;
      const left = since(csr, approved) + (this.#deps.issuedGraceMs ?? 120_000) - now;
      if (left > 0) return { requeueAfterMs: left };
      await hub.delete(path);
      log.debug({ csr: name }, 'issued gateway peer CSR removed');
      return;
    }

    const decision = decidePeerCsr(csr, this.#deps);
    if ('ignore' in decision) return;
    if (decision.approve) {
      await approveCertificateSigningRequest(
        hub as KubeClient,
        csr,
        peerApprovalReason,
        `Gateway replica ${decision.replica}'s peer certificate.`,
      );
      log.info({ csr: name, replica: decision.replica }, 'gateway peer CSR approved');
      return;
    }
    await denyCertificateSigningRequest(hub, csr, peerDenialReason, decision.why);
    log.warn({ csr: name, requester: csr.spec.username, why: decision.why }, 'gateway peer CSR denied');
  }
}

/** A PUT to `/approval` with a Denied condition, as `kubectl certificate deny` does. */
async function denyCertificateSigningRequest(
  hub: Pick<KubeClient, 'request'>,
  csr: CertificateSigningRequest,
  reason: string,
  message: string,
): Promise<void> {
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  await hub.request('PUT', `${csrPath}/${encodeURIComponent(csr.metadata.name)}/approval`, {
    body: {
      ...csr,
      status: {
        ...csr.status,
        conditions: [
          ...(csr.status?.conditions ?? []),
          { type: 'Denied', status: 'True', reason, message: message.slice(0, 1000), lastUpdateTime: now },
        ],
      },
    },
  });
}

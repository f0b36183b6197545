/**
 * Approves the addon agent's CSRs (see csr-approval.ts for which ones); the
 * hub's kube-controller-manager then signs them. A CSR that fails the check is
 * left pending, logged once with the reason.
 */
import type { Logger } from 'pino';
import type { KubeClient } from '../../../shared/kube/client.ts';
import { approveCertificateSigningRequest } from '../../../shared/kube/csr-approval.ts';
import type { Informer } from '../../../shared/kube/informer.ts';
import type { AddonDefinition } from '../addon.ts';
import { controllerQueue } from '../controller-queue.ts';
import type { AddonMetrics } from '../metrics.ts';
import type { WorkQueue } from '../work-queue.ts';
import { type CertificateSigningRequest, decideCsr, isDecided } from './csr-approval.ts';
import type { ManagedClusterAddOn } from './managed-cluster-addon.ts';
import { addonNameLabel } from './subject.ts';

/** addon-framework's reason and message (certificate/csrapprove.go), familiar to OCM users. */
export const approvalReason = 'AutoApprovedByHubCSRApprovingController';
export const approvalMessage = 'Auto approving addon agent certificate.';

export function csrCollectionPath(): string {
  return '/apis/certificates.k8s.io/v1/certificatesigningrequests';
}
export function csrLabelSelector(addonName: string): string {
  return `${addonNameLabel}=${addonName}`;
}

export interface CsrApproverDeps {
  hub: KubeClient;
  addon: Pick<AddonDefinition, 'name' | 'registrationSubject'>;
  log: Logger;
  metrics?: AddonMetrics;
  informers: {
    certificateSigningRequests: Informer<CertificateSigningRequest>;
    managedClusterAddOns: Informer<ManagedClusterAddOn>;
  };
}

export class CsrApprover {
  readonly #deps: CsrApproverDeps;
  readonly #queue: WorkQueue;
  readonly #reported = new Set<string>();

  constructor(deps: CsrApproverDeps) {
    this.#deps = deps;
    this.#queue = controllerQueue({
      controller: 'csr-approver',
      workers: 4,
      reconcile: (name) => this.reconcile(name),
      log: deps.log,
      metrics: deps.metrics,
    });
  }

  start(signal: AbortSignal): void {
    const { certificateSigningRequests: csrs, managedClusterAddOns: addons } = this.#deps.informers;
    const enqueue = (csr: CertificateSigningRequest) => {
      if (!isDecided(csr)) this.#queue.add(csr.metadata.name);
    };
    const offCsrs = csrs.on({
      onAdd: enqueue,
      onUpdate: (_old, csr) => enqueue(csr),
      onDelete: (csr) => this.#reported.delete(csr.metadata.name),
    });
    // A CSR may be judged before its addon shows up in our cache: look again when it does.
    const offAddons = addons.on({ onAdd: () => csrs.list().forEach(enqueue) });
    signal.addEventListener(
      'abort',
      () => {
        offCsrs();
        offAddons();
      },
      { once: true },
    );
    csrs.list().forEach(enqueue);
    this.#queue.start(signal);
  }

  async reconcile(name: string): Promise<undefined> {
    const { hub, addon, log, informers } = this.#deps;
    const addonName = addon.name;
    const csr = informers.certificateSigningRequests.get(name);
    if (!csr || isDecided(csr)) return;
    const decision = decideCsr(csr, {
      addonName,
      subjectFor: (cluster) => addon.registrationSubject(cluster),
      addonEnabledOn: (cluster) => {
        const mca = informers.managedClusterAddOns.get(`${cluster}/${addonName}`);
        return mca !== undefined && !mca.metadata.deletionTimestamp;
      },
    });
    if (!decision.approve) {
      if (!this.#reported.has(name)) {
        this.#reported.add(name);
        log.warn({ csr: name, requester: csr.spec.username, why: decision.why }, 'CSR left unapproved');
      }
      return;
    }
    await approveCertificateSigningRequest(hub, csr, approvalReason, approvalMessage);
    log.info({ csr: name, cluster: decision.cluster }, 'CSR approved');
    return undefined;
  }
}

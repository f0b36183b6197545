/**
 * Approves the addon agent's CSRs (see csr-approval.ts for which ones); the
 * hub's kube-controller-manager then signs them. A CSR that fails the check is
 * left pending, logged once with the reason.
 *
 * And once an addon is disabled, deletes the CSRs it approved for it. OCM's
 * registration agent stops asking for a certificate while 10 CSRs of the
 * addon exist on the hub (ocm csr.go addonCSRThreshold, "Stop creating csr
 * since there are too many csr created already on hub"), and the hub's CSR
 * cleaner deletes issued ones only after an hour: so the 10th enable of an
 * hour (each asks for a new certificate) left the agent without a credential
 * for good. An approved CSR of a disabled addon is of no use to anyone;
 * pending or denied ones (someone else's, perhaps forged) are left as found.
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
import { addonNameLabel, clusterNameLabel } from './subject.ts';

/** addon-framework's reason and message (certificate/csrapprove.go), familiar to OCM users. */
export const approvalReason = 'AutoApprovedByHubCSRApprovingController';
export const approvalMessage = 'Auto approving addon agent certificate.';

const cleanupPrefix = 'cleanup/';

/** Approved, and by this manager (our reason): never another approver's decision. */
function isApprovedByUs(csr: CertificateSigningRequest): boolean {
  return (csr.status?.conditions ?? []).some(
    (c) => c.type === 'Approved' && c.status !== 'False' && c.reason === approvalReason,
  );
}

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
    const offAddons = addons.on({
      onAdd: () => csrs.list().forEach(enqueue),
      onDelete: (mca) => this.#queueCleanup(mca.metadata.namespace),
    });
    signal.addEventListener(
      'abort',
      () => {
        offCsrs();
        offAddons();
      },
      { once: true },
    );
    csrs.list().forEach(enqueue);
    // Disabled while no manager ran: the approved CSRs of addons that no longer exist.
    for (const csr of csrs.list())
      if (isDecided(csr)) this.#queueCleanup(csr.metadata.labels?.[clusterNameLabel]);
    this.#queue.start(signal);
  }

  /** Cleanup keys never collide with CSR names: `/` is not allowed in an object name. */
  #queueCleanup(cluster: string | undefined): void {
    if (cluster) this.#queue.add(`${cleanupPrefix}${cluster}`);
  }

  /** Deletes the approved CSRs of `cluster`'s addon, if the addon is gone (it may have come back since). */
  async cleanup(cluster: string): Promise<void> {
    const { hub, addon, log, informers } = this.#deps;
    if (informers.managedClusterAddOns.get(`${cluster}/${addon.name}`)) return;
    const approved = informers.certificateSigningRequests
      .list()
      .filter(
        (csr) =>
          csr.metadata.labels?.[addonNameLabel] === addon.name &&
          csr.metadata.labels?.[clusterNameLabel] === cluster &&
          isApprovedByUs(csr),
      );
    for (const csr of approved) await hub.delete(`${csrCollectionPath()}/${csr.metadata.name}`);
    if (approved.length > 0) {
      log.info({ cluster, csrs: approved.length }, 'addon disabled: deleted the CSRs approved for it');
    }
  }

  async reconcile(key: string): Promise<undefined> {
    if (key.startsWith(cleanupPrefix)) {
      await this.cleanup(key.slice(cleanupPrefix.length));
      return;
    }
    const name = key;
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

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
import type { KubeClient } from '../../../shared/kube/client.ts';
import { approveCertificateSigningRequest } from '../../../shared/kube/csr-approval.ts';
import type { Informer } from '../../../shared/kube/informer.ts';
import type { AddonDefinition } from '../core/addon.ts';
import { Controller, type ControllerDeps } from '../core/controller.ts';
import type { ManagedClusterAddOn } from '../core/resources.ts';
import { type CertificateSigningRequest, decideCsr, isDecided } from './csr-approval.ts';
import { addonNameLabel, clusterNameLabel } from './subject.ts';

/** addon-framework's reason and message (certificate/csrapprove.go), familiar to OCM users. */
export const approvalReason = 'AutoApprovedByHubCSRApprovingController';
export const approvalMessage = 'Auto approving addon agent certificate.';

const cleanupPrefix = 'cleanup/';

/** Cleanup keys never collide with CSR names: `/` is not allowed in an object name. */
function cleanupKey(cluster: string | undefined): string | undefined {
  return cluster ? `${cleanupPrefix}${cluster}` : undefined;
}

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

export interface CsrApproverDeps extends ControllerDeps {
  hub: KubeClient;
  addon: Pick<AddonDefinition, 'name' | 'registrationSubject'>;
  informers: {
    certificateSigningRequests: Informer<CertificateSigningRequest>;
    managedClusterAddOns: Informer<ManagedClusterAddOn>;
  };
}

export class CsrApprover {
  readonly #deps: CsrApproverDeps;
  readonly controller: Controller;
  readonly #reported = new Set<string>();

  constructor(deps: CsrApproverDeps) {
    this.#deps = deps;
    const { certificateSigningRequests: csrs, managedClusterAddOns: addons } = deps.informers;
    const undecided = (csr: CertificateSigningRequest) => (isDecided(csr) ? undefined : csr.metadata.name);
    const allUndecided = () => csrs.list().flatMap((csr) => undecided(csr) ?? []);
    this.controller = new Controller(
      {
        name: 'csr-approver',
        workers: 4,
        watches: [
          // Deleted: forgotten (a CSR of the same name later is reported again).
          { informer: csrs, add: undecided, update: undecided, delete: (csr) => csr.metadata.name },
          // A CSR may be judged before its addon shows up in our cache: look again when it does.
          { informer: addons, add: allUndecided, delete: (mca) => cleanupKey(mca.metadata.namespace) },
        ],
        keys: () => [
          ...allUndecided(),
          // Disabled while no manager ran: the approved CSRs of addons that no longer exist.
          ...csrs
            .list()
            .filter(isDecided)
            .flatMap((csr) => cleanupKey(csr.metadata.labels?.[clusterNameLabel]) ?? []),
        ],
        sync: (key) => this.reconcile(key),
      },
      deps,
    );
  }

  /** Deletes the approved CSRs of `cluster`'s addon, if the addon is gone (it may have come back since). */
  async cleanup(cluster: string): Promise<void> {
    const { hub, addon, informers } = this.#deps;
    const log = this.controller.log;
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
    const { hub, addon, informers } = this.#deps;
    const log = this.controller.log;
    const addonName = addon.name;
    const csr = informers.certificateSigningRequests.get(name);
    if (!csr) this.#reported.delete(name);
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

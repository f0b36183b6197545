/**
 * Judges the CSRs labelled for our addon (see csr-approval.ts for which are
 * approved, denied or left waiting); the hub's kube-controller-manager then
 * signs the approved ones.
 *
 * Deletes every CSR of this addon that is Denied (by us or anyone) or Failed,
 * as soon as it sees it: OCM's registration agent stops asking for a
 * certificate while 10 CSRs carry the addon's cluster/addon labels (ocm
 * csr.go addonCSRThreshold, "Stop creating csr since there are too many csr
 * created already on hub"), whatever their state, and any klusterlet can
 * create CSRs with another cluster's labels. A denied CSR yields no
 * certificate to anyone; kept, it only fills the labelled cluster's quota.
 *
 * And once an addon is disabled, deletes the CSRs it approved for it: the
 * hub's CSR cleaner deletes issued ones only after an hour, so the 10th enable
 * of an hour (each asks for a new certificate) left the agent without a
 * credential for good. An approved CSR of a disabled addon is of no use to
 * anyone.
 *
 * CSRs without our addon label (the informer selects on it; checked again
 * here) are never approved, denied or deleted.
 */
import type { KubeClient } from '../../../shared/kube/client.ts';
import { approveCertificateSigningRequest } from '../../../shared/kube/csr-approval.ts';
import type { Informer } from '../../../shared/kube/informer.ts';
import type { AddonDefinition } from '../core/addon.ts';
import { Controller, type ControllerDeps } from '../core/controller.ts';
import type { ManagedClusterAddOn } from '../core/resources.ts';
import { type CertificateSigningRequest, decideCsr, isDecided, isDeniedOrFailed } from './csr-approval.ts';
import {
  deleteCertificateSigningRequest,
  denialMessage,
  denialReason,
  denyCertificateSigningRequest,
} from './csr-denial.ts';
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
    const ofAddon = (csr: CertificateSigningRequest) =>
      csr.metadata.labels?.[addonNameLabel] === deps.addon.name;
    // To judge (no decision yet), or to delete (denied or failed).
    const actionable = (csr: CertificateSigningRequest) =>
      ofAddon(csr) && (!isDecided(csr) || isDeniedOrFailed(csr)) ? csr.metadata.name : undefined;
    const allActionable = () => csrs.list().flatMap((csr) => actionable(csr) ?? []);
    this.controller = new Controller(
      {
        name: 'csr-approver',
        workers: 4,
        watches: [
          // Deleted: forgotten (a CSR of the same name later is reported again).
          { informer: csrs, add: actionable, update: actionable, delete: (csr) => csr.metadata.name },
          // A CSR may be judged before its addon shows up in our cache: look again when it does.
          { informer: addons, add: allActionable, delete: (mca) => cleanupKey(mca.metadata.namespace) },
        ],
        keys: () => [
          ...allActionable(),
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
    if (!csr || csr.metadata.labels?.[addonNameLabel] !== addonName) return;
    if (isDeniedOrFailed(csr)) {
      await this.#remove(csr, 'denied or failed: it counts against the cluster CSR quota');
      return;
    }
    if (isDecided(csr)) return;
    const decision = decideCsr(csr, {
      addonName,
      subjectFor: (cluster) => addon.registrationSubject(cluster),
      addonEnabledOn: (cluster) => {
        const mca = informers.managedClusterAddOns.get(`${cluster}/${addonName}`);
        return mca !== undefined && !mca.metadata.deletionTimestamp;
      },
    });
    switch (decision.verdict) {
      case 'ignore':
        return;
      case 'wait':
        if (!this.#reported.has(name)) {
          this.#reported.add(name);
          log.info({ csr: name, requester: csr.spec.username, why: decision.why }, 'CSR left pending');
        }
        return;
      case 'deny': {
        const cluster = csr.metadata.labels?.[clusterNameLabel];
        const outcome = await denyCertificateSigningRequest(
          hub,
          csr,
          denialReason,
          denialMessage(addonName, cluster, decision.why),
        );
        log.warn(
          { csr: name, cluster, requester: csr.spec.username, why: decision.why, outcome },
          outcome === 'denied'
            ? 'CSR denied: its labels and its request disagree'
            : 'CSR could not be denied (no approve permission on its signer): its labels and its request disagree',
        );
        await this.#remove(csr, decision.why);
        return;
      }
      case 'approve':
        await approveCertificateSigningRequest(hub, csr, approvalReason, approvalMessage);
        log.info({ csr: name, cluster: decision.cluster }, 'CSR approved');
        return;
    }
  }

  /** Deletes a CSR of this addon that will never yield a certificate (`why`, for the log). */
  async #remove(csr: CertificateSigningRequest, why: string): Promise<void> {
    const result = await deleteCertificateSigningRequest(this.#deps.hub, csr);
    if (result === 'deleted') {
      this.controller.log.info(
        {
          csr: csr.metadata.name,
          cluster: csr.metadata.labels?.[clusterNameLabel],
          requester: csr.spec.username,
          why,
        },
        'CSR deleted',
      );
    }
  }
}

/**
 * What the manager does with a CertificateSigningRequest labelled for our
 * addon (`open-cluster-management.io/addon-name`):
 * - approve it when the cluster's own klusterlet registration agent made it
 *   for our addon's agent on that cluster, asking for exactly the subject we
 *   published in `status.registrations`: a CSR is the one way to obtain a hub
 *   identity, so this check is a security boundary;
 * - deny it when its labels and its requester, subject, signer or usages
 *   disagree. Leaving such a CSR pending is not harmless: OCM's registration
 *   agent stops asking for an addon's certificate while 10 CSRs carry that
 *   cluster/addon label pair (ocm register/csr options.go addonCSRThreshold;
 *   it counts labels only), and any klusterlet may create CSRs with any
 *   labels, so ten forged ones would stop another cluster's issuance and
 *   rotation. Denied, they are deleted (csr-approver.ts);
 * - wait only when the request is right but the addon is not (yet) enabled on
 *   the cluster in our cache: looked at again when the addon shows up; such a
 *   CSR can only come from that cluster's own agent, so it weighs on its own
 *   quota alone.
 * A CSR without our addon label is never ours to judge (the gateway replicas'
 * peer CSRs, for one, have an approver of their own).
 *
 * Stricter than addon-framework's DefaultCSRApprover, which accepts any
 * requester whose name merely *starts with* `system:open-cluster-management:<cluster>`
 * (so cluster "prod1" would vouch for cluster "prod10"); here the requester's
 * name must parse to exactly this cluster and carry the cluster's group,
 * which only its registration agent's certificate has.
 */
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import type { KubeObject } from '../../../shared/kube/client.ts';
import {
  addonNameLabel,
  clusterNameLabel,
  kubeApiserverClientSigner,
  ocmSubjectPrefix,
  registrationAgentGroup,
  type Subject,
} from './subject.ts';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

export interface CertificateSigningRequest extends KubeObject {
  metadata: { name: string; labels?: Record<string, string>; [key: string]: unknown };
  spec: {
    request: string; // base64 PEM
    signerName: string;
    username?: string;
    groups?: string[];
    usages?: string[];
  };
  status?: { conditions?: { type: string; status: string; reason?: string }[] };
}

export type CsrDecision =
  | { verdict: 'approve'; cluster: string }
  /** Labelled for this addon, but not what the labelled cluster's registration agent asks for. */
  | { verdict: 'deny'; why: string }
  /** Right in every respect but the addon is not enabled on the cluster (in our cache, yet). */
  | { verdict: 'wait'; why: string }
  /** Not labelled for this addon: someone else's to judge. */
  | { verdict: 'ignore'; why: string };

export interface CsrApprovalContext {
  addonName: string;
  /** The subject published in status.registrations for `cluster`. */
  subjectFor(cluster: string): Subject;
  /** Whether `cluster` has a ManagedClusterAddOn of this addon (no addon, no credential). */
  addonEnabledOn(cluster: string): boolean;
}

/** Approved or denied already: nothing to decide. */
export function isDecided(csr: CertificateSigningRequest): boolean {
  return hasCondition(csr, 'Approved') || hasCondition(csr, 'Denied');
}

/** Denied (by anyone), or approved but the signer failed: it will never yield a certificate. */
export function isDeniedOrFailed(csr: CertificateSigningRequest): boolean {
  return hasCondition(csr, 'Denied') || hasCondition(csr, 'Failed');
}

function hasCondition(csr: CertificateSigningRequest, type: string): boolean {
  return (csr.status?.conditions ?? []).some((c) => c.type === type && c.status !== 'False');
}

export function decideCsr(csr: CertificateSigningRequest, context: CsrApprovalContext): CsrDecision {
  const deny = (why: string): CsrDecision => ({ verdict: 'deny', why });
  const labels = csr.metadata.labels ?? {};
  if (labels[addonNameLabel] !== context.addonName) {
    return { verdict: 'ignore', why: `not labelled for addon ${context.addonName}` };
  }
  const cluster = labels[clusterNameLabel];
  if (!cluster) return deny(`no ${clusterNameLabel} label`);
  if (csr.spec.signerName !== kubeApiserverClientSigner) {
    return deny(`signer ${JSON.stringify(csr.spec.signerName)} is not ${kubeApiserverClientSigner}`);
  }

  // The requester: cluster's registration agent, `system:open-cluster-management:<cluster>:<agent-id>`.
  const username = csr.spec.username ?? '';
  const rest = username.startsWith(ocmSubjectPrefix) ? username.slice(ocmSubjectPrefix.length) : '';
  const [requesterCluster, agentId, ...extra] = rest.split(':');
  if (requesterCluster !== cluster || !agentId || extra.length > 0) {
    return deny(`requester ${JSON.stringify(username)} is not the registration agent of cluster ${cluster}`);
  }
  if (!(csr.spec.groups ?? []).includes(registrationAgentGroup(cluster))) {
    return deny(`requester is not in group ${registrationAgentGroup(cluster)}`);
  }

  // The subject: exactly the one status.registrations publishes for this cluster.
  let request: x509.Pkcs10CertificateRequest;
  try {
    request = new x509.Pkcs10CertificateRequest(Buffer.from(csr.spec.request, 'base64').toString('utf8'));
  } catch (err) {
    return deny(`spec.request is not a PEM certificate request: ${(err as Error).message}`);
  }
  const expected = context.subjectFor(cluster);
  const commonNames = request.subjectName.getField('CN');
  if (commonNames.length !== 1 || commonNames[0] !== expected.user) {
    return deny(`subject CN ${JSON.stringify(commonNames)} is not ${expected.user}`);
  }
  // Organizations are the groups: the expected ones, plus the deprecated
  // system:authenticated that older OCM defaults asked for; nothing else.
  const organizations = new Set(request.subjectName.getField('O'));
  organizations.delete('system:authenticated');
  const sameGroups =
    organizations.size === expected.groups.length && expected.groups.every((g) => organizations.has(g));
  if (!sameGroups) {
    return deny(
      `subject groups ${JSON.stringify([...organizations])} are not ${JSON.stringify(expected.groups)}`,
    );
  }
  const usages = csr.spec.usages ?? [];
  if (usages.includes('server auth')) return deny('asks for server auth');
  // Last: a transient state of our cache, not a fault of the request (which came from the cluster itself).
  if (!context.addonEnabledOn(cluster)) {
    return { verdict: 'wait', why: `addon ${context.addonName} is not enabled on cluster ${cluster}` };
  }
  return { verdict: 'approve', cluster };
}

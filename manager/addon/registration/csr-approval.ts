/**
 * Which CertificateSigningRequests the manager approves: only the ones the
 * cluster's own klusterlet registration agent made for our addon's agent on
 * that cluster, asking for exactly the subject we published in
 * `status.registrations`. Anything else stays pending for a human (or another
 * approver) to judge: a CSR is the one way to obtain a hub identity, so this
 * check is a security boundary.
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

export type CsrDecision = { approve: true; cluster: string } | { approve: false; why: string };

export interface CsrApprovalContext {
  addonName: string;
  /** The subject published in status.registrations for `cluster`. */
  subjectFor(cluster: string): Subject;
  /** Whether `cluster` has a ManagedClusterAddOn of this addon (no addon, no credential). */
  addonEnabledOn(cluster: string): boolean;
}

/** Approved or denied already: nothing to decide. */
export function isDecided(csr: CertificateSigningRequest): boolean {
  return (csr.status?.conditions ?? []).some(
    (c) => (c.type === 'Approved' || c.type === 'Denied') && c.status !== 'False',
  );
}

export function decideCsr(csr: CertificateSigningRequest, context: CsrApprovalContext): CsrDecision {
  const labels = csr.metadata.labels ?? {};
  if (labels[addonNameLabel] !== context.addonName) {
    return { approve: false, why: `not for addon ${context.addonName}` };
  }
  const cluster = labels[clusterNameLabel];
  if (!cluster) return { approve: false, why: `no ${clusterNameLabel} label` };
  if (csr.spec.signerName !== kubeApiserverClientSigner) {
    return { approve: false, why: `signer ${csr.spec.signerName} is not ${kubeApiserverClientSigner}` };
  }
  if (!context.addonEnabledOn(cluster)) {
    return { approve: false, why: `addon ${context.addonName} is not enabled on cluster ${cluster}` };
  }

  // The requester: cluster's registration agent, `system:open-cluster-management:<cluster>:<agent-id>`.
  const username = csr.spec.username ?? '';
  const rest = username.startsWith(ocmSubjectPrefix) ? username.slice(ocmSubjectPrefix.length) : '';
  const [requesterCluster, agentId, ...extra] = rest.split(':');
  if (requesterCluster !== cluster || !agentId || extra.length > 0) {
    return {
      approve: false,
      why: `requester ${JSON.stringify(username)} is not the registration agent of cluster ${cluster}`,
    };
  }
  if (!(csr.spec.groups ?? []).includes(registrationAgentGroup(cluster))) {
    return {
      approve: false,
      why: `requester is not in group ${registrationAgentGroup(cluster)}`,
    };
  }

  // The subject: exactly the one status.registrations publishes for this cluster.
  let request: x509.Pkcs10CertificateRequest;
  try {
    request = new x509.Pkcs10CertificateRequest(Buffer.from(csr.spec.request, 'base64').toString('utf8'));
  } catch (err) {
    return {
      approve: false,
      why: `spec.request is not a PEM certificate request: ${(err as Error).message}`,
    };
  }
  const expected = context.subjectFor(cluster);
  const commonNames = request.subjectName.getField('CN');
  if (commonNames.length !== 1 || commonNames[0] !== expected.user) {
    return { approve: false, why: `subject CN ${JSON.stringify(commonNames)} is not ${expected.user}` };
  }
  // Organizations are the groups: the expected ones, plus the deprecated
  // system:authenticated that older OCM defaults asked for; nothing else.
  const organizations = new Set(request.subjectName.getField('O'));
  organizations.delete('system:authenticated');
  const sameGroups =
    organizations.size === expected.groups.length && expected.groups.every((g) => organizations.has(g));
  if (!sameGroups) {
    return {
      approve: false,
      why: `subject groups ${JSON.stringify([...organizations])} are not ${JSON.stringify(expected.groups)}`,
    };
  }
  const usages = csr.spec.usages ?? [];
  if (usages.includes('server auth')) return { approve: false, why: 'asks for server auth' };
  return { approve: true, cluster };
}

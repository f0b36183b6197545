/**
 * The APIService that makes the hub's kube-aggregator serve the gateway's
 * API, as a pure builder. Its caBundle is the CA that signed the gateway's
 * serving certificate (during a CA rotation, the new and the old CA), never
 * a placeholder and never insecureSkipTLSVerify: the Go original's chart
 * rendered `Cg==` (its issue #169), which left every hub user with broken
 * discovery. Built only with a real bundle: an empty one is a bug here.
 */
import { X509Certificate } from 'node:crypto';
import type { KubeObject } from '../../../shared/kube/client.ts';
import { apiGroup, apiServiceName, apiVersion, type GatewayNames } from './names.ts';
import { labelsOf } from './workload.ts';

export function apiService(names: GatewayNames, port: number, caBundlePem: string): KubeObject {
  assertCertificates(caBundlePem);
  return {
    apiVersion: 'apiregistration.k8s.io/v1',
    kind: 'APIService',
    metadata: { name: apiServiceName, labels: labelsOf(names) },
    spec: {
      group: apiGroup,
      version: apiVersion,
      service: { namespace: names.namespace, name: names.name, port },
      caBundle: Buffer.from(caBundlePem).toString('base64'),
      insecureSkipTLSVerify: false,
      // The values of the Go original's chart: kubectl keeps resolving short names as before.
      groupPriorityMinimum: 5000,
      versionPriority: 10,
    },
  };
}

/** Every PEM block of `bundle` is a certificate, and there is at least one. */
function assertCertificates(bundle: string): void {
  const blocks = bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new Error('refusing to register the APIService without a CA certificate');
  for (const block of blocks) new X509Certificate(block);
}

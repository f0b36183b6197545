/**
 * What KubeVela's bundled Go gateway leaves on a hub, for e2e/migration.test.ts: a Helm release `kubevela`
 * of a chart whose templates are those of KubeVela's `charts/vela-core/templates/cluster-gateway/`
 * (kubevela/kubevela master 5a44b5f: cluster-gateway.yaml; the `kubevela.*` helpers written out for
 * release `kubevela`, whose fullname is `kubevela-vela-core`), so that the APIService carries Helm's
 * ownership annotations and the release's next `helm upgrade` and `helm uninstall` do what KubeVela's do.
 * Not vendored as a chart in the repository: written to a temporary folder by the test.
 *
 * Its hooks need images the environment does not have, so they are done here as they would run:
 * - pre-install `cluster-gateway-tls-secret-create` (kube-webhook-certgen `create`): Secret
 *   `kubevela-vela-core-cluster-gateway-tls-v2` with `ca`, `tls.crt`, `tls.key` ({@link createTlsSecret});
 * - post-install `cluster-gateway-tls-secret-patch` (the original's hack/patch/main.go: GET the APIService,
 *   set `caBundle` to the Secret's `ca` and `insecureSkipTLSVerify: false`, PUT it) ({@link runPatchJob}).
 *
 * The gateway Deployment runs 0 replicas (`multicluster.clusterGateway.replicaCount=0`): the original's
 * image is not on the nodes, and an APIService whose Service has no ready endpoint is the state the
 * original leaves once its pods are gone (scaled down, evicted, or its image gone from a mirror).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { apiServicePath } from '../../manager/addon/gateway-deploy/names.ts';
import type { KubeClient, KubeObject } from '../../shared/kube/client.ts';
import { createCertificateAuthority } from '../../shared/pki.ts';

export const kubevelaRelease = 'kubevela';
/** `kubevela.fullname` for release `kubevela` of chart `vela-core`. */
export const kubevelaFullname = 'kubevela-vela-core';
export const kubevelaServiceName = `${kubevelaRelease}-cluster-gateway-service`;
export const kubevelaTlsSecret = `${kubevelaFullname}-cluster-gateway-tls-v2`;
/** vela-core's ServiceAccount (`kubevela.serviceAccountName`), bound to the proxy ClusterRole below. */
export const kubevelaServiceAccount = kubevelaFullname;
export const kubevelaProxyClusterRole = `${kubevelaFullname}:cluster-gateway:proxy`;

const chartYaml = `apiVersion: v2
name: vela-core
description: KubeVela's bundled cluster-gateway templates (e2e fixture of cluster-gateway's migration test)
type: application
version: 1.10.0
appVersion: 1.10.0
`;

const valuesYaml = `multicluster:
  enabled: true
  clusterGateway:
    direct: true
    replicaCount: 0
    port: 9443
    image:
      repository: oamdev/cluster-gateway
      tag: v1.9.0-alpha.2
      pullPolicy: IfNotPresent
    secureTLS:
      enabled: true
      certManager:
        enabled: false
      certPath: /etc/k8s-cluster-gateway-certs
authentication:
  enabled: false
`;

// KubeVela's cluster-gateway.yaml, with include "kubevela.labels"/"...selectorLabels"/"kubevela.fullname"/
// "kubevela.serviceAccountName" expanded; resources, affinity and securityContext values left out.
const clusterGatewayYaml = `{{ if .Values.multicluster.enabled }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-cluster-gateway
  namespace: {{ .Release.Namespace }}
spec:
  replicas: {{ .Values.multicluster.clusterGateway.replicaCount }}
  selector:
    matchLabels:
      app.kubernetes.io/name: vela-core-cluster-gateway
      app.kubernetes.io/instance: {{ .Release.Name }}-cluster-gateway
  template:
    metadata:
      labels:
        app.kubernetes.io/name: vela-core-cluster-gateway
        app.kubernetes.io/instance: {{ .Release.Name }}-cluster-gateway
    spec:
      serviceAccountName: {{ .Release.Name }}-vela-core
      containers:
        - name: {{ .Release.Name }}-vela-core-cluster-gateway
          args:
            - "apiserver"
            - "--secure-port={{ .Values.multicluster.clusterGateway.port }}"
            - "--secret-namespace={{ .Release.Namespace }}"
            - "--feature-gates=APIPriorityAndFairness=false,ClientIdentityPenetration={{ .Values.authentication.enabled }}"
            - "--cluster-gateway-proxy-config=/etc/proxy-config/config.yaml"
            {{- if .Values.multicluster.clusterGateway.secureTLS.enabled }}
            - "--tls-cert-file={{ .Values.multicluster.clusterGateway.secureTLS.certPath }}/tls.crt"
            - "--tls-private-key-file={{ .Values.multicluster.clusterGateway.secureTLS.certPath }}/tls.key"
            {{- end }}
            - "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"
          image: {{ .Values.multicluster.clusterGateway.image.repository }}:{{ .Values.multicluster.clusterGateway.image.tag }}
          imagePullPolicy: {{ .Values.multicluster.clusterGateway.image.pullPolicy }}
          ports:
            - containerPort: {{ .Values.multicluster.clusterGateway.port }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cluster-gateway-proxy-config
  namespace: {{ .Release.Namespace }}
data:
  config.yaml: |
    apiVersion: cluster.core.oam.dev/v1alpha1
    kind: ClusterGatewayProxyConfiguration
    spec:
      clientIdentityExchanger:
        rules:
          - name: super-user
            source:
              group: kubevela:ux
            type: PrivilegedIdentityExchanger
---
apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}-cluster-gateway-service
  namespace: {{ .Release.Namespace }}
spec:
  selector:
    app.kubernetes.io/name: vela-core-cluster-gateway
    app.kubernetes.io/instance: {{ .Release.Name }}-cluster-gateway
  ports:
    - protocol: TCP
      port: {{ .Values.multicluster.clusterGateway.port }}
      targetPort: {{ .Values.multicluster.clusterGateway.port }}
      name: default
---
{{ $apiSvc := (lookup "apiregistration.k8s.io/v1" "APIService" "" "v1alpha1.cluster.core.oam.dev") }}
{{ $shouldAdopt := (not $apiSvc) }}
{{ if not $shouldAdopt }}
  {{ if $apiSvc.metadata.annotations }}
    {{ $shouldAdopt = (index ($apiSvc).metadata.annotations "meta.helm.sh/release-name") }}
  {{ end }}
{{ end }}
{{ if $shouldAdopt }}
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1alpha1.cluster.core.oam.dev
  labels:
    api: cluster-extension-apiserver
    apiserver: "true"
spec:
  version: v1alpha1
  group: cluster.core.oam.dev
  groupPriorityMinimum: 2000
  service:
    name: {{ .Release.Name }}-cluster-gateway-service
    namespace: {{ .Release.Namespace }}
    port: {{ .Values.multicluster.clusterGateway.port }}
  versionPriority: 10
  insecureSkipTLSVerify: {{ not .Values.multicluster.clusterGateway.secureTLS.enabled }}
  {{ if .Values.multicluster.clusterGateway.secureTLS.enabled }}
  caBundle: Cg==
  {{ end }}
{{ end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .Release.Name }}-vela-core:cluster-gateway:proxy
rules:
  - apiGroups: [ "cluster.core.oam.dev" ]
    resources: [ "clustergateways/proxy" ]
    verbs: [ "get", "list", "watch", "create", "update", "patch", "delete" ]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ .Release.Name }}-vela-core:cluster-gateway:proxy
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ .Release.Name }}-vela-core:cluster-gateway:proxy
subjects:
  - kind: Group
    name: kubevela:client
    apiGroup: rbac.authorization.k8s.io
  - kind: ServiceAccount
    name: {{ .Release.Name }}-vela-core
    namespace: {{ .Release.Namespace }}
{{ end }}
`;

/** Writes the chart to a new temporary folder; returns it and a function that removes it. */
export function writeKubeVelaChart(): { dir: string; remove: () => void } {
  const root = mkdtempSync(path.join(os.tmpdir(), 'cg-e2e-kubevela-'));
  const dir = path.join(root, 'vela-core');
  mkdirSync(path.join(dir, 'templates'), { recursive: true });
  writeFileSync(path.join(dir, 'Chart.yaml'), chartYaml);
  writeFileSync(path.join(dir, 'values.yaml'), valuesYaml);
  writeFileSync(path.join(dir, 'templates', 'cluster-gateway.yaml'), clusterGatewayYaml);
  return { dir, remove: () => rmSync(root, { recursive: true, force: true }) };
}

/** The pre-install hook: the gateway's CA and serving certificate, as kube-webhook-certgen writes them. */
export async function createTlsSecret(hub: KubeClient, namespace: string): Promise<string> {
  const ca = await createCertificateAuthority('cluster-gateway-ca', 3_600_000);
  const serving = await ca.issue({
    commonName: kubevelaServiceName,
    dnsNames: [kubevelaServiceName, `${kubevelaServiceName}.${namespace}.svc`],
    usage: 'server',
    validForMs: 3_600_000,
  });
  await hub.create(`/api/v1/namespaces/${namespace}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: kubevelaTlsSecret, namespace },
    stringData: { ca: ca.cert, 'tls.crt': serving.cert, 'tls.key': serving.key },
  });
  return ca.cert;
}

/** The post-install hook (hack/patch/main.go of the original): caBundle from the Secret's `ca`. */
export async function runPatchJob(hub: KubeClient, namespace: string): Promise<void> {
  const secret = await hub.get<KubeObject & { data: Record<string, string> }>(
    `/api/v1/namespaces/${namespace}/secrets/${kubevelaTlsSecret}`,
  );
  const apiService = await hub.get<KubeObject & { spec: Record<string, unknown> }>(apiServicePath);
  apiService.spec.insecureSkipTLSVerify = false;
  apiService.spec.caBundle = secret.data.ca;
  await hub.request('PUT', apiServicePath, { body: apiService });
}

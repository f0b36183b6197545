/**
 * Runs the gateway on the hub the way a cluster would: as its own
 * ServiceAccount with the RBAC an aggregated API server needs, registered
 * with the kube-aggregator through an APIService and a Service: an ExternalName
 * one pointing at localhost, or, when the hub has a node (its aggregator then
 * routes to endpoints, as the chart's gateway pods need), a Service whose
 * endpoint is the host's address on the pods' bridge. Also gives the gateway a credential for each
 * managed cluster (a ServiceAccount token Secret, what OCM's
 * managed-serviceaccount addon provides in production).
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { gatewayRbac as gatewayPermissions } from '../../manager/addon/gateway-deploy/rbac.ts';
import { gatewayNodeFlags } from '../../manager/addon/gateway-deploy/workload.ts';
import type { KubeClient, KubeObject } from '../../shared/kube/client.ts';
import { requestServiceAccountToken } from '../../shared/kube/service-account-token.ts';
import type { LocalCluster } from './apiserver.ts';
import { repoRoot } from './binaries.ts';
import { compileCacheEnv, warmCompileCache } from './compile-cache.ts';
import { hostAddress } from './host-changes.ts';
import { writeKubeconfig } from './kubeconfig.ts';
import { applyCrds, ensureNamespace } from './ocm.ts';
import { freePort } from './ports.ts';
import type { ManagedProcess, Supervisor } from './supervisor.ts';
import { waitForConditions } from './wait.ts';

export const gatewayNamespace = 'cluster-gateway-system';
export const credentialNamespace = 'open-cluster-management-credentials';
const fieldManager = 'local-environment';
const apiServiceName = 'v1alpha1.cluster.core.oam.dev';

export interface LocalGateway {
  port: number;
  process: ManagedProcess;
  /** Direct URL of the gateway (bypassing the aggregator), for benchmarks. */
  url: string;
  kubeconfig: string;
}

export async function startGateway(
  supervisor: Supervisor,
  hub: LocalCluster,
  managed: LocalCluster[],
  stateDir: string,
  extraArgs: string[] = [],
): Promise<LocalGateway> {
  const client = hub.client;
  // With nodes the hub's aggregator resolves Services to endpoints (--enable-aggregator-routing), which an
  // ExternalName Service has none of: the gateway then listens on the bridge's address too.
  const podNetwork = hub.reachableServer !== hub.server;
  await ensureNamespace(client, gatewayNamespace);
  await ensureNamespace(client, credentialNamespace);
  // The gateway's own CRDs (ClusterGatewayProxyConfiguration), as the chart installs them.
  await applyCrds(client, path.join(repoRoot, 'crds'));
  for (const obj of gatewayRbac()) await client.apply(objectPath(obj), obj, fieldManager);
  await provisionCredentials(client, managed);

  const dir = path.join(stateDir, 'gateway');
  mkdirSync(dir, { recursive: true });
  const serving = await hub.pki.ca.issue({
    commonName: 'cluster-gateway',
    dnsNames: [`cluster-gateway.${gatewayNamespace}.svc`, 'localhost'],
    ipAddresses: ['127.0.0.1', ...(podNetwork ? [hostAddress] : [])],
    usage: 'server',
  });
  writeFileSync(path.join(dir, 'tls.crt'), serving.cert);
  writeFileSync(path.join(dir, 'tls.key'), serving.key, { mode: 0o600 });
  const verdictKey = verdictKeyFile(dir);
  const token = await requestServiceAccountToken(client, gatewayNamespace, 'cluster-gateway');
  const kubeconfig = writeKubeconfig(path.join(dir, 'serviceaccount.kubeconfig'), {
    name: 'hub',
    server: hub.server,
    caCert: hub.pki.ca.cert,
    token,
  });
  const port = await freePort();
  warmCompileCache('manager/gateway/main.ts'); // as the image does: the Deployment sets NODE_COMPILE_CACHE
  const process_ = supervisor.start('hub-cluster-gateway', process.execPath, {
    env: compileCacheEnv,
    args: [
      // The shipped Node flags, then a benchmark's own (later ones win), e.g. for profiling:
      // CG_GATEWAY_NODE_FLAGS="--cpu-prof --cpu-prof-dir=/tmp/p".
      ...gatewayNodeFlags,
      ...(process.env.CG_GATEWAY_NODE_FLAGS?.split(/\s+/).filter(Boolean) ?? []),
      path.join(repoRoot, 'manager', 'gateway', 'main.ts'),
      `--secure-port=${port}`,
      `--bind-address=${podNetwork ? '0.0.0.0' : '127.0.0.1'}`,
      `--tls-cert-file=${path.join(dir, 'tls.crt')}`,
      `--tls-private-key-file=${path.join(dir, 'tls.key')}`,
      `--kubeconfig=${kubeconfig}`,
      `--secret-namespace=${credentialNamespace}`,
      `--probe-verdict-key-file=${verdictKey}`,
      '--health-check-interval=2',
      ...extraArgs,
    ],
  });
  const servicePort = podNetwork ? 443 : port;
  await client.apply(
    `/api/v1/namespaces/${gatewayNamespace}/services/cluster-gateway`,
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'cluster-gateway', namespace: gatewayNamespace },
      spec: podNetwork
        ? { type: 'ClusterIP', ports: [{ name: 'https', port: servicePort, targetPort: port }] }
        : { type: 'ExternalName', externalName: 'localhost' },
    },
    fieldManager,
  );
  if (podNetwork) {
    // No selector: the one endpoint is this process (KCM mirrors it into an EndpointSlice).
    await client.apply(
      `/api/v1/namespaces/${gatewayNamespace}/endpoints/cluster-gateway`,
      {
        apiVersion: 'v1',
        kind: 'Endpoints',
        metadata: { name: 'cluster-gateway', namespace: gatewayNamespace },
        subsets: [{ addresses: [{ ip: hostAddress }], ports: [{ name: 'https', port }] }],
      },
      fieldManager,
    );
  }
  await client.apply(
    `/apis/apiregistration.k8s.io/v1/apiservices/${apiServiceName}`,
    {
      apiVersion: 'apiregistration.k8s.io/v1',
      kind: 'APIService',
      metadata: { name: apiServiceName },
      spec: {
        group: 'cluster.core.oam.dev',
        version: 'v1alpha1',
        service: { namespace: gatewayNamespace, name: 'cluster-gateway', port: servicePort },
        caBundle: Buffer.from(hub.pki.ca.cert).toString('base64'),
        groupPriorityMinimum: 5000,
        versionPriority: 10,
      },
    },
    fieldManager,
  );
  await waitForConditions(
    client,
    `/apis/apiregistration.k8s.io/v1/apiservices/${apiServiceName}`,
    ['Available'],
    {
      what: 'the ClusterGateway APIService to become available',
      timeoutMs: 60_000,
      failFast: () => process_.assertRunning(),
    },
  );
  return { port, process: process_, url: `https://127.0.0.1:${port}`, kubeconfig };
}

/**
 * The key the gateway signs prober verdicts on ManagedClusters with (--probe-verdict-key-file), made once
 * per environment and kept in its state directory: a restarted gateway (or a second one started with the
 * same file) keeps believing the verdicts recorded before, as replicas sharing the manager's Secret do.
 */
export function verdictKeyFile(dir: string): string {
  const file = path.join(dir, 'verdict.key');
  if (!existsSync(file)) writeFileSync(file, randomBytes(32).toString('hex'), { mode: 0o600 });
  return file;
}

/**
 * The credential namespace and a credential Secret in it for each managed cluster: what a gateway needs
 * however it runs (started here, or deployed by the chart's manager, which reads this namespace).
 */
export async function provisionCredentials(hub: KubeClient, managed: LocalCluster[]): Promise<void> {
  await ensureNamespace(hub, credentialNamespace);
  for (const cluster of managed) await provisionCredential(hub, cluster);
}

/**
 * A ServiceAccount on the managed cluster, bound to cluster-admin, whose
 * token the gateway uses; stored as the original's credential Secret.
 */
async function provisionCredential(hub: KubeClient, cluster: LocalCluster): Promise<void> {
  const spoke = cluster.client;
  const ns = 'kube-system';
  await spoke.apply(
    `/api/v1/namespaces/${ns}/serviceaccounts/cluster-gateway`,
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'cluster-gateway', namespace: ns } },
    fieldManager,
  );
  await spoke.apply(
    '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cluster-gateway-admin',
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'cluster-gateway-admin' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
      subjects: [{ kind: 'ServiceAccount', name: 'cluster-gateway', namespace: ns }],
    },
    fieldManager,
  );
  const token = await requestServiceAccountToken(spoke, ns, 'cluster-gateway', 86400 * 7);
  await hub.apply(
    `/api/v1/namespaces/${credentialNamespace}/secrets/${cluster.name}`,
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: cluster.name,
        namespace: credentialNamespace,
        labels: { 'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken' },
      },
      // Endpoint and CA come from the ManagedCluster (OCM integration); the Secret holds the credential.
      stringData: { token },
    },
    fieldManager,
  );
}

/**
 * The gateway's ServiceAccount and its permissions on the hub: the rules the addon manager grants the
 * gateway it deploys (manager/addon/gateway-deploy/rbac.ts), under plain names of the local
 * environment's own (no manager labels: a manager deploying its gateway on this hub leaves them alone).
 */
export function gatewayRbac(): KubeObject[] {
  const name = 'cluster-gateway';
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace: gatewayNamespace } },
    ...gatewayPermissions(
      {
        namespace: gatewayNamespace,
        name,
        credentialNamespace,
        clusterRole: name,
        authDelegator: `${name}-auth-delegator`,
        authReader: `${name}-auth-reader`,
        credentials: `${name}-credentials`,
        tunnelLeases: `${name}-tunnel-leases`,
      },
      {},
    ),
  ];
}

function objectPath(obj: KubeObject): string {
  const name = obj.metadata?.name ?? '';
  const ns = obj.metadata?.namespace;
  switch (obj.kind) {
    case 'ServiceAccount':
      return `/api/v1/namespaces/${ns}/serviceaccounts/${name}`;
    case 'ClusterRole':
      return `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`;
    case 'ClusterRoleBinding':
      return `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${name}`;
    case 'Role':
      return `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles/${name}`;
    case 'RoleBinding':
      return `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings/${name}`;
    default:
      throw new Error(`no path for kind ${obj.kind}`);
  }
}

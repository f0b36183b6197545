/**
 * The addon manager as the local environment installs it on the hub: a
 * Deployment of the project's image (run by the hub's real kubelet, node.ts)
 * with its own ServiceAccount, in-cluster, and the least RBAC for what its
 * controllers do; the hub apiserver calls its LeaseNotFound webhook through
 * a Service. No gateway: the environment's own (gateway.ts) serves the
 * aggregated API. These rules are the environment's, by verb and resource; what
 * users install is the chart's, named object by object and checked by
 * charts/cluster-gateway.test.ts and charts/permissions.test.ts (the broad
 * grants on docs/install.md's reviewed list only).
 *
 * Every rule names the code that needs it (manager/addon/...):
 * - informers (list, watch): main.ts;
 * - ClusterManagementAddOn and the default AddOnDeploymentConfig: cma/cma-controller.ts;
 * - ManifestWork addon-<addon>-deploy-0: deploy/deploy-controller.ts (server-side apply, delete);
 * - ManagedClusterAddOn status (conditions, registrations, namespace, healthCheck): core/addon-status.ts,
 *   for availability/, registration/ and deploy/;
 * - CSR approval for the kube-apiserver-client signer: registration/csr-approver.ts;
 * - the agent's hub Role, RoleBinding and heartbeat Lease in each cluster namespace:
 *   registration/registration-controller.ts. RBAC lets a subject grant only what it
 *   holds, so the manager holds the Lease verbs it grants (get, update, patch), and
 *   `create clustergateways/attach` for each agent's ClusterRole of its tunnel;
 * - leader election over a Lease in its own namespace: leader-election.ts;
 * - the LeaseNotFound webhook's MutatingWebhookConfiguration: availability/lease-not-found-webhook.ts.
 */
import type { KubeClient, KubeObject } from '../../shared/kube/client.ts';
import { credentialNamespace } from './gateway.ts';

export const managerNamespace = 'cluster-gateway-system';
/** The Deployment, its ServiceAccount and RBAC, and the webhook's Service (the manager's default --webhook-service). */
export const managerName = 'cluster-gateway-addon-manager';
const fieldManager = 'cluster-gateway-localenv';

export interface ManagerSettings {
  /**
   * The image the manager and the agents it deploys run: the environment's, imported into every node
   * (EnvironmentState.image). Required to install; the RBAC alone needs none.
   */
  image?: string;
  addonName?: string;
  /** Extra flags, e.g. --health-mode=Lease. */
  args?: string[];
}

export function addonManagerManifests(settings: ManagerSettings = {}): KubeObject[] {
  const addon = settings.addonName ?? 'cluster-gateway';
  const labels = { 'app.kubernetes.io/name': managerName, 'app.kubernetes.io/part-of': 'cluster-gateway' };
  const meta = (name: string, namespaced = true) => ({
    name,
    ...(namespaced ? { namespace: managerNamespace } : {}),
    labels,
  });
  const readWatch = ['get', 'list', 'watch'];
  const image = settings.image ?? 'cluster-gateway-ts:unset';
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: managerNamespace, labels } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta(managerName) },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: meta(managerName, false),
      rules: [
        {
          apiGroups: ['addon.open-cluster-management.io'],
          resources: ['managedclusteraddons', 'addondeploymentconfigs'],
          verbs: readWatch,
        },
        {
          apiGroups: ['addon.open-cluster-management.io'],
          resources: ['clustermanagementaddons'],
          verbs: [...readWatch, 'create'],
        },
        {
          apiGroups: ['addon.open-cluster-management.io'],
          resources: ['clustermanagementaddons'],
          resourceNames: [addon],
          verbs: ['patch', 'update'],
        },
        {
          apiGroups: ['addon.open-cluster-management.io'],
          resources: ['managedclusteraddons/status'],
          verbs: ['patch', 'update'],
        },
        // Config spec hashes on the ClusterManagementAddOn (configs/spec-hash-controller.ts).
        {
          apiGroups: ['addon.open-cluster-management.io'],
          resources: ['clustermanagementaddons/status'],
          resourceNames: [addon],
          verbs: ['patch'],
        },
        {
          apiGroups: ['work.open-cluster-management.io'],
          resources: ['manifestworks'],
          verbs: [...readWatch, 'create', 'patch', 'update', 'delete'],
        },
        {
          apiGroups: ['cluster.open-cluster-management.io'],
          resources: ['managedclusters'],
          verbs: readWatch,
        },
        { apiGroups: ['cluster.core.oam.dev'], resources: ['clustergateways'], verbs: readWatch },
        // delete: the CSRs it approved for an addon once the addon is disabled (registration/csr-approver.ts).
        {
          apiGroups: ['certificates.k8s.io'],
          resources: ['certificatesigningrequests'],
          verbs: [...readWatch, 'delete'],
        },
        {
          apiGroups: ['certificates.k8s.io'],
          resources: ['certificatesigningrequests/approval'],
          verbs: ['update'],
        },
        {
          apiGroups: ['certificates.k8s.io'],
          resources: ['signers'],
          resourceNames: ['kubernetes.io/kube-apiserver-client'],
          verbs: ['approve'],
        },
        // Heartbeat Leases in cluster namespaces (and, through the Role below, the leader-election Lease).
        {
          apiGroups: ['coordination.k8s.io'],
          resources: ['leases'],
          verbs: [...readWatch, 'create', 'update', 'patch'],
        },
        {
          apiGroups: ['rbac.authorization.k8s.io'],
          resources: ['roles', 'rolebindings'],
          verbs: ['get', 'create', 'patch', 'update'],
        },
        // Each agent's tunnel grant: a ClusterRole and ClusterRoleBinding per cluster, deleted with
        // the ManagedClusterAddOn; the manager holds the verb it grants (create clustergateways/attach).
        {
          apiGroups: ['rbac.authorization.k8s.io'],
          resources: ['clusterroles', 'clusterrolebindings'],
          verbs: ['get', 'create', 'patch', 'update', 'delete'],
        },
        { apiGroups: ['cluster.core.oam.dev'], resources: ['clustergateways/attach'], verbs: ['create'] },
        {
          apiGroups: ['admissionregistration.k8s.io'],
          resources: ['mutatingwebhookconfigurations'],
          verbs: ['create'],
        },
        {
          apiGroups: ['admissionregistration.k8s.io'],
          resources: ['mutatingwebhookconfigurations'],
          resourceNames: [`${addon}-addon-available`],
          verbs: ['get', 'patch', 'update', 'delete'],
        },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: meta(managerName, false),
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: managerName },
      subjects: [{ kind: 'ServiceAccount', name: managerName, namespace: managerNamespace }],
    },
    // The default AddOnDeploymentConfig lives in the manager's namespace; it creates it there only.
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: meta(managerName),
      rules: [
        {
          apiGroups: ['addon.open-cluster-management.io'],
          resources: ['addondeploymentconfigs'],
          verbs: ['create'],
        },
        // The webhook's CA and serving certificate, shared by replicas (webhook-certificate.ts).
        { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'create', 'update'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: meta(managerName),
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: managerName },
      subjects: [{ kind: 'ServiceAccount', name: managerName, namespace: managerNamespace }],
    },
    // Agents' credential Secrets in the gateway's credential namespace (registration/hub-permissions.ts,
    // tunnel trust models): the manager holds what it grants (get, create, patch) and removes the grant
    // and the Secret when the addon is disabled.
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: credentialNamespace } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { ...meta(managerName), namespace: credentialNamespace },
      rules: [
        { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'create', 'patch', 'delete'] },
        { apiGroups: ['rbac.authorization.k8s.io'], resources: ['roles', 'rolebindings'], verbs: ['delete'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { ...meta(managerName), namespace: credentialNamespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: managerName },
      subjects: [{ kind: 'ServiceAccount', name: managerName, namespace: managerNamespace }],
    },
    // Where the hub apiserver calls the LeaseNotFound webhook (the manager registers it with this Service).
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: meta(managerName),
      spec: {
        selector: { 'app.kubernetes.io/name': managerName },
        ports: [{ name: 'webhook', port: 443, targetPort: 'webhook' }],
      },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: meta(managerName),
      spec: {
        replicas: 1,
        selector: { matchLabels: { 'app.kubernetes.io/name': managerName } },
        template: {
          metadata: { labels },
          spec: {
            serviceAccountName: managerName,
            // A killed or deleted manager is gone at once: the tests that replace it wait on no grace period.
            terminationGracePeriodSeconds: 5,
            securityContext: {
              runAsNonRoot: true,
              runAsUser: 65532,
              runAsGroup: 65532,
              seccompProfile: { type: 'RuntimeDefault' },
            },
            containers: [
              {
                name: 'manager',
                image,
                // Imported into every node by the environment: a missing image fails at once.
                imagePullPolicy: 'Never',
                command: ['node', '/app/manager/addon/main.ts'],
                args: [
                  `--addon-name=${addon}`,
                  `--agent-image=${image}`,
                  '--log-level=debug',
                  '--http-port=8000',
                  '--webhook-port=9443',
                  `--webhook-service=${managerName}`,
                  ...(settings.args ?? []),
                ],
                env: [
                  { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
                  { name: 'NODE_COMPILE_CACHE', value: '/app/.cache/node-compile-cache' },
                ],
                ports: [
                  { name: 'http', containerPort: 8000 },
                  { name: 'webhook', containerPort: 9443 },
                ],
                readinessProbe: { httpGet: { path: '/readyz', port: 'http' }, periodSeconds: 2 },
                livenessProbe: { httpGet: { path: '/healthz', port: 'http' } },
                securityContext: {
                  allowPrivilegeEscalation: false,
                  readOnlyRootFilesystem: true,
                  capabilities: { drop: ['ALL'] },
                },
              },
            ],
          },
        },
      },
    },
  ];
}

/**
 * Applies the manager's manifests to the hub (server-side apply: re-running updates them, and a changed
 * argument rolls the Deployment as `kubectl apply` would).
 */
export async function installAddonManager(
  hub: KubeClient,
  settings: ManagerSettings & { image: string },
): Promise<void> {
  for (const obj of addonManagerManifests(settings)) await hub.apply(pathOf(obj), obj, fieldManager);
}

/** Deletes what installAddonManager applied (reverse order: the Deployment before its RBAC). */
export async function uninstallAddonManager(hub: KubeClient, settings: ManagerSettings = {}): Promise<void> {
  // The namespace stays: the gateway's Service lives there too, and deleting it took the aggregated API
  // (APIService ServiceNotFound) away from every test that ran after an uninstall.
  for (const obj of addonManagerManifests(settings).reverse()) {
    if (obj.kind !== 'Namespace') await hub.delete(pathOf(obj));
  }
}

function pathOf(obj: KubeObject): string {
  const [group, version] = obj.apiVersion?.includes('/') ? obj.apiVersion.split('/') : ['', obj.apiVersion];
  const base = group ? `/apis/${group}/${version}` : `/api/${version}`;
  const plural = `${obj.kind?.toLowerCase()}s`;
  const ns = obj.metadata?.namespace ? `/namespaces/${obj.metadata.namespace}` : '';
  return `${base}${ns}/${plural}/${obj.metadata?.name}`;
}

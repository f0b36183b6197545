/**
 * The agent's manifests on a managed cluster. Pure.
 *
 * Least RBAC on the managed cluster: the agent renews one Lease, `<addon>`,
 * in its install namespace (create, because the Lease may be missing, and
 * create cannot be limited by name; get/update/patch that Lease by name).
 * It probes the kube-apiserver's /readyz, which the built-in
 * system:public-info-viewer role grants to everyone. Its tunnel pipes bytes
 * to the local kube-apiserver under the credential the hub holds, which needs
 * no RBAC of the agent's. That is all, unless the AddOnDeploymentConfig picks
 * a trust model for the tunnel (customizedVariables TUNNEL_TRUST_MODEL,
 * docs/tunnel.md):
 * - HubCredential: a second ServiceAccount, `<addon>-hub-credential`, bound to
 *   HUB_CREDENTIAL_CLUSTER_ROLE (default cluster-admin): what the hub may do
 *   on this cluster. The agent may only request its tokens (`create
 *   serviceaccounts/token` on that name), which it writes to the hub.
 * - NoCredential: the agent itself may `impersonate` users, groups and uids
 *   (ClusterRole `open-cluster-management:<addon>:agent:impersonate`) and
 *   nothing else: every request it forwards runs as the hub caller, with the
 *   caller's permissions here. Not serviceaccounts (a hub ServiceAccount would
 *   become this cluster's namesake) and not userextras (hub-specific claims).
 */
import { type AgentFlagValues, renderAgentArgs } from '../../../agent/options.ts';
import type { KubeObject } from '../../../shared/kube/client.ts';
import type { AddonDefinition } from '../core/addon.ts';
import { applyPodSettings, noPodSettings, type PodSettings } from '../core/pod-settings.ts';
import { type AgentValues, agentContainerName, valuesHash } from './deployment-config.ts';

/** Where the registration Secret is mounted (OCM's AddOnTemplate convention; the agent's default --hub-kubeconfig). */
export const hubKubeconfigDir = '/managed/hub-kubeconfig';
export const proxyCaDir = '/etc/cluster-gateway/proxy-ca';
/** The agent's /healthz, /readyz, /metrics port (agent/options.ts --port default). */
export const agentPort = 8080;
export const configHashAnnotation = 'addon.cluster-gateway.oam.dev/config-hash';

/**
 * Namespaces the agent shares with others (OCM's default addon namespace,
 * OCM's own, Kubernetes' own): they go into the ManifestWork so they exist,
 * but are orphaned, never deleted, when the addon is disabled.
 */
export const sharedNamespaces = new Set([
  'open-cluster-management-agent-addon',
  'open-cluster-management-agent',
  'open-cluster-management',
  'default',
  'kube-system',
  'kube-public',
  'kube-node-lease',
]);

/**
 * OCM's image pull Secret: the klusterlet copies it from its own namespace into every namespace labelled
 * `addon.open-cluster-management.io/namespace: "true"` (ocm pkg/operator/operators/klusterlet/controllers/
 * addonsecretcontroller), and OCM's addon agents name it (managed-serviceaccount's, the addon-framework's
 * templates). A private registry's credential then reaches the agent with no step of ours; where the
 * klusterlet has none, the kubelet pulls without it (a missing pull Secret is only a warning Event).
 */
export const ocmImagePullSecret = 'open-cluster-management-image-pull-credentials';
export const addonNamespaceLabel = 'addon.open-cluster-management.io/namespace';
/** Kubernetes' own namespaces: never labelled, so the klusterlet copies no credential into them. */
const kubernetesNamespaces = new Set(['default', 'kube-system', 'kube-public', 'kube-node-lease']);

/**
 * The addon's settings for its agent pods on every cluster (manager flags --agent-affinity,
 * --agent-priority-class-name, --agent-pod-annotations, --agent-pod-labels). Optional: without them
 * the agent has none.
 */
export interface AgentPodDefinition {
  agentPod?: PodSettings;
}

/** Where the agent image keeps Node's compile cache (`/app` is the image's copy of the repository). */
export const agentCompileCache = '/app/.cache/node-compile-cache';

export function agentLabels(addon: Pick<AddonDefinition, 'name'>): Record<string, string> {
  return {
    'app.kubernetes.io/name': 'cluster-gateway-agent',
    'app.kubernetes.io/instance': addon.name,
    'app.kubernetes.io/part-of': 'cluster-gateway',
    'app.kubernetes.io/managed-by': 'cluster-gateway-addon-manager',
  };
}

/** The ServiceAccount whose tokens the hub holds in the hub-credential trust model. */
export function hubCredentialServiceAccount(addon: Pick<AddonDefinition, 'name'>): string {
  return `${addon.name}-hub-credential`;
}

/** ClusterRole (and ClusterRoleBinding) letting the agent impersonate, in the no-credential trust model. */
export function impersonationClusterRoleName(addon: Pick<AddonDefinition, 'name'>): string {
  return `open-cluster-management:${addon.name}:agent:impersonate`;
}

/** What the no-credential model needs: impersonating the hub caller's user, groups and uid. Nothing else. */
export const impersonationRules = [
  { apiGroups: [''], resources: ['users', 'groups'], verbs: ['impersonate'] },
  { apiGroups: ['authentication.k8s.io'], resources: ['uids'], verbs: ['impersonate'] },
];

export function agentManifests(
  addon: Pick<AddonDefinition, 'name' | 'agentName' | 'spokeLeaseName' | 'hubKubeconfigSecretName'> &
    AgentPodDefinition,
  cluster: string,
  values: AgentValues,
): KubeObject[] {
  const ns = values.installNamespace;
  const labels = agentLabels(addon);
  const meta = (name: string) => ({ name, namespace: ns, labels });
  const rbac = 'rbac.authorization.k8s.io';
  const agentSubject = { kind: 'ServiceAccount', name: addon.agentName, namespace: ns };
  const trustModel = values.tunnel?.trustModel;
  const objects: KubeObject[] = [
    {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: {
        name: ns,
        ...(kubernetesNamespaces.has(ns) ? {} : { labels: { [addonNamespaceLabel]: 'true' } }),
      },
    },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta(addon.agentName) },
    {
      apiVersion: `${rbac}/v1`,
      kind: 'Role',
      metadata: meta(addon.agentName),
      rules: [
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
        {
          apiGroups: ['coordination.k8s.io'],
          resources: ['leases'],
          resourceNames: [addon.spokeLeaseName],
          verbs: ['get', 'update', 'patch'],
        },
        ...(trustModel === 'hub-credential'
          ? [
              {
                apiGroups: [''],
                resources: ['serviceaccounts/token'],
                resourceNames: [hubCredentialServiceAccount(addon)],
                verbs: ['create'],
              },
            ]
          : []),
      ],
    },
    {
      apiVersion: `${rbac}/v1`,
      kind: 'RoleBinding',
      metadata: meta(addon.agentName),
      roleRef: { apiGroup: rbac, kind: 'Role', name: addon.agentName },
      subjects: [agentSubject],
    },
  ];
  if (trustModel === 'hub-credential') {
    const name = hubCredentialServiceAccount(addon);
    objects.push(
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta(name) },
      {
        apiVersion: `${rbac}/v1`,
        kind: 'ClusterRoleBinding',
        metadata: { name: `open-cluster-management:${addon.name}:hub-credential`, labels },
        roleRef: {
          apiGroup: rbac,
          kind: 'ClusterRole',
          name: values.tunnel?.hubCredentialClusterRole ?? 'cluster-admin',
        },
        subjects: [{ kind: 'ServiceAccount', name, namespace: ns }],
      },
    );
  } else if (trustModel === 'no-credential') {
    const name = impersonationClusterRoleName(addon);
    objects.push(
      {
        apiVersion: `${rbac}/v1`,
        kind: 'ClusterRole',
        metadata: { name, labels },
        rules: impersonationRules,
      },
      {
        apiVersion: `${rbac}/v1`,
        kind: 'ClusterRoleBinding',
        metadata: { name, labels },
        roleRef: { apiGroup: rbac, kind: 'ClusterRole', name },
        subjects: [agentSubject],
      },
    );
  }
  if (values.proxy.caBundle) {
    objects.push({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: meta(`${addon.agentName}-proxy-ca`),
      data: { 'ca.crt': values.proxy.caBundle },
    });
  }
  objects.push(agentDeployment(addon, cluster, values));
  return objects;
}

export function agentDeployment(
  addon: Pick<AddonDefinition, 'name' | 'agentName' | 'hubKubeconfigSecretName'> & AgentPodDefinition,
  cluster: string,
  values: AgentValues,
): KubeObject {
  const labels = agentLabels(addon);
  const selector = {
    'app.kubernetes.io/name': labels['app.kubernetes.io/name'],
    'app.kubernetes.io/instance': labels['app.kubernetes.io/instance'],
  };
  // Node keeps its TypeScript stripper (about 22 MB) resident unless the compiled modules come from a
  // warm compile cache, which the image ships (the local environment fills it): this keeps the agent
  // under its 80 MB idle budget (docs/benchmarks.md, idle footprint).
  const env: { name: string; value: string }[] = [{ name: 'NODE_COMPILE_CACHE', value: agentCompileCache }];
  // Node 24 honours these only with NODE_USE_ENV_PROXY; lower-case copies serve other tools.
  const proxyEnv: [string, string | undefined][] = [
    ['HTTP_PROXY', values.proxy.httpProxy],
    ['HTTPS_PROXY', values.proxy.httpsProxy],
    ['NO_PROXY', values.proxy.noProxy],
  ];
  for (const [name, value] of proxyEnv) {
    if (!value) continue;
    env.push({ name, value }, { name: name.toLowerCase(), value });
  }
  if (values.proxy.httpProxy || values.proxy.httpsProxy) env.push({ name: 'NODE_USE_ENV_PROXY', value: '1' });
  const volumeMounts = [{ name: 'hub-kubeconfig', mountPath: hubKubeconfigDir, readOnly: true }];
  const volumes: KubeObject[] = [
    { name: 'hub-kubeconfig', secret: { secretName: addon.hubKubeconfigSecretName } },
  ];
  if (values.proxy.caBundle) {
    env.push({ name: 'NODE_EXTRA_CA_CERTS', value: `${proxyCaDir}/ca.crt` });
    volumeMounts.push({ name: 'proxy-ca', mountPath: proxyCaDir, readOnly: true });
    volumes.push({ name: 'proxy-ca', configMap: { name: `${addon.agentName}-proxy-ca` } });
  }
  // The addon's pod settings around the agent's own labels and config hash (which win).
  const pod = applyPodSettings(addon.agentPod ?? noPodSettings, {
    labels,
    // Any config change rolls the agent out, including ones that show nowhere else in this template.
    annotations: { [configHashAnnotation]: valuesHash(values) },
  });
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: addon.agentName, namespace: values.installNamespace, labels },
    spec: {
      replicas: 1,
      revisionHistoryLimit: 3,
      selector: { matchLabels: selector },
      template: {
        metadata: pod.metadata,
        spec: {
          serviceAccountName: addon.agentName,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: 65532,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          ...pod.spec,
          imagePullSecrets: [{ name: ocmImagePullSecret }],
          ...(Object.keys(values.nodeSelector).length > 0 ? { nodeSelector: values.nodeSelector } : {}),
          ...(values.tolerations.length > 0 ? { tolerations: values.tolerations } : {}),
          containers: [
            {
              name: agentContainerName,
              image: values.image,
              imagePullPolicy: 'IfNotPresent',
              command: ['node', ...agentNodeFlags, '/app/agent/main.ts'],
              // Through the agent's own flag table (agent/options.ts): a flag it lacks does not compile.
              args: renderAgentArgs({
                'cluster-name': cluster,
                'addon-name': addon.name,
                'install-namespace': values.installNamespace,
                'hub-kubeconfig': `${hubKubeconfigDir}/kubeconfig`,
                port: agentPort,
                'log-level': values.logLevel,
                ...tunnelFlags(addon, values),
              }),
              ...(env.length > 0 ? { env } : {}),
              ports: [{ name: 'http', containerPort: agentPort }],
              readinessProbe: { httpGet: { path: '/readyz', port: 'http' }, periodSeconds: 5 },
              livenessProbe: {
                httpGet: { path: '/healthz', port: 'http' },
                periodSeconds: 10,
                failureThreshold: 6,
              },
              resources: values.resources,
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ['ALL'] },
              },
              volumeMounts,
            },
          ],
          volumes,
        },
      },
    },
  };
}

/**
 * Node flags of the agent process. Its budget is 80 MB of RSS idle in its container (`npm run bench:image`,
 * issue 33): 78.4 MiB before these flags, lazy impersonation and no pino (agent/main.ts, agent/log.ts).
 * - `--no-opt --no-maglev`: V8's optimizing compilers never run, so their machine code (part of the node
 *   binary) is never paged in: about 8 MB less RSS. The agent's JavaScript is lease renewals every 5 s
 *   and, per tunnelled chunk, Node's stream plumbing around native TLS and HTTP/2: a relay of the
 *   agent's shape spent 9.3 ms per MiB with them against 10.0 without (medians of 7 rounds, 100 MiB
 *   each, on the 2-core machine; within the noise), at the same throughput; for 1 KB echoed one at a
 *   time, 114 µs per round trip against 112 (medians of 7 rounds of 5,000).
 * - `--max-semi-space-size=1`: V8's young generation grows its semi-spaces to 8 MB while the agent loads
 *   its modules and keeps them; capped at 1 MB the idle agent is about 2 MiB smaller.
 * - `--v8-pool-size=1`: one V8 background thread instead of one per core: about 1 MiB less of thread
 *   stacks and malloc arenas. With the previous flag, the relay above spent 10.0 ms per MiB against
 *   16.2 with Node's defaults (fewer threads competing for 2 cores, smaller young generation).
 * The Dockerfile warms the compile cache with the same flags (they are part of its key).
 */
export const agentNodeFlags = ['--no-opt', '--no-maglev', '--max-semi-space-size=1', '--v8-pool-size=1'];

/** The agent's trust-model flags, when the config picks a model. */
function tunnelFlags(addon: Pick<AddonDefinition, 'name'>, values: AgentValues): AgentFlagValues {
  const tunnel = values.tunnel;
  if (!tunnel) return {};
  return {
    'trust-model': tunnel.trustModel,
    'hub-credential-namespace': tunnel.credentialNamespace,
    ...(tunnel.trustModel === 'hub-credential'
      ? { 'hub-credential-service-account': hubCredentialServiceAccount(addon) }
      : {}),
  };
}

/**
 * An addon agent process for the tunnel e2e tests, run outside the addon path (no manager, no
 * ManifestWork) so a test can pick the cluster name it serves, its identity and when it dies:
 *
 * - its hub identity is OCM's addon agent subject for `cluster`, a client certificate signed by
 *   the hub CA (what OCM's CSR flow produces, signed by the hub's kube-controller-manager);
 * - its hub permissions are exactly the manager's (manager/addon/registration/hub-permissions.ts),
 *   applied without owners (the ManagedClusterAddOn they would name does not exist here, and the
 *   garbage collector would delete them);
 * - it relays to the managed cluster `managedName` of the environment, through its admin kubeconfig.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../../hack/localenv/binaries.ts';
import { compileCacheEnv, warmCompileCache } from '../../hack/localenv/compile-cache.ts';
import { writeKubeconfig } from '../../hack/localenv/kubeconfig.ts';
import { ensureNamespace } from '../../hack/localenv/ocm.ts';
import { freePort } from '../../hack/localenv/ports.ts';
import type { ManagedProcess, Supervisor } from '../../hack/localenv/supervisor.ts';
import { defineAddon } from '../../manager/addon/core/addon.ts';
import { agentManifests } from '../../manager/addon/deploy/agent-manifests.ts';
import { agentValues } from '../../manager/addon/deploy/deployment-config.ts';
import { objectPath } from '../../manager/addon/gateway-deploy/names.ts';
import {
  agentAttachClusterRole,
  agentAttachClusterRoleBinding,
  agentCredentialRole,
  agentCredentialRoleBinding,
  agentHubLease,
  agentHubRole,
  agentHubRoleBinding,
} from '../../manager/addon/registration/hub-permissions.ts';
import { addonAgentSubject } from '../../manager/addon/registration/subject.ts';
import type { KubeClient, KubeObject } from '../../shared/kube/client.ts';
import { requestServiceAccountToken } from '../../shared/kube/service-account-token.ts';
import { type KeyPair, loadCertificateAuthority } from '../../shared/pki.ts';
import { credentialNamespace } from './credentials.ts';
import { environmentState } from './environment.ts';

export const tunnelAddon = 'cluster-gateway';

function hubFile(name: string): string {
  return readFileSync(path.join(environmentState().stateDir, 'hub', name), 'utf8');
}

/** A hub client certificate for the addon agent of `cluster` (or any CN/O), signed by the hub CA. */
export async function agentCertificate(
  cluster: string,
  options: { validForMs?: number; extraGroups?: string[] } = {},
): Promise<KeyPair> {
  const subject = addonAgentSubject(cluster, tunnelAddon);
  const ca = await loadCertificateAuthority({ cert: hubFile('ca.crt'), key: hubFile('ca.key') });
  return ca.issue({
    commonName: subject.user,
    organizations: [...subject.groups, ...(options.extraGroups ?? [])],
    usage: 'client',
    ...(options.validForMs !== undefined ? { validForMs: options.validForMs } : {}),
  });
}

/** A hub kubeconfig with `client` (the registration Secret's kubeconfig, as a file). */
export function agentHubKubeconfig(name: string, client: KeyPair): string {
  const env = environmentState();
  return writeKubeconfig(path.join(env.stateDir, `tunnel-agent-${name}.kubeconfig`), {
    name: 'hub',
    server: env.hub.server,
    caCert: hubFile('ca.crt'),
    client,
  });
}

/**
 * The manager's hub objects for the agent of `cluster`, owners stripped; returns their paths to delete.
 * `credentialSecret`: also its grant on the cluster's credential Secret (a tunnel trust model).
 */
export async function grantAgentOnHub(
  hub: KubeClient,
  cluster: string,
  options: { credentialSecret?: boolean } = {},
): Promise<string[]> {
  await ensureNamespace(hub, cluster);
  const owner = {
    apiVersion: 'addon.open-cluster-management.io/v1alpha1',
    name: tunnelAddon,
    namespace: cluster,
    uid: '',
  };
  const subject = addonAgentSubject(cluster, tunnelAddon);
  const rbac = '/apis/rbac.authorization.k8s.io/v1';
  const objects: [string, KubeObject][] = [
    [`${rbac}/namespaces/${cluster}/roles`, agentHubRole(owner)],
    [`${rbac}/namespaces/${cluster}/rolebindings`, agentHubRoleBinding(owner, subject)],
    [`/apis/coordination.k8s.io/v1/namespaces/${cluster}/leases`, agentHubLease(owner, subject, 10)],
    [`${rbac}/clusterroles`, agentAttachClusterRole(owner)],
    [`${rbac}/clusterrolebindings`, agentAttachClusterRoleBinding(owner, subject)],
    ...(options.credentialSecret
      ? ([
          [
            `${rbac}/namespaces/${credentialNamespace}/roles`,
            agentCredentialRole(owner, credentialNamespace),
          ],
          [
            `${rbac}/namespaces/${credentialNamespace}/rolebindings`,
            agentCredentialRoleBinding(owner, subject, credentialNamespace),
          ],
        ] as [string, KubeObject][])
      : []),
  ];
  const paths: string[] = [];
  for (const [collection, obj] of objects) {
    if (obj.metadata) delete obj.metadata.ownerReferences;
    const objectPath = `${collection}/${obj.metadata?.name}`;
    await hub.apply(objectPath, obj, 'e2e');
    paths.push(objectPath);
  }
  return paths;
}

export interface TunnelAgent {
  process: ManagedProcess;
  port: number;
  /** One value of the agent's /metrics, NaN when absent. */
  metric(series: string): Promise<number>;
}

/**
 * What the manager renders for an agent on its managed cluster (manager/addon/deploy/agent-manifests.ts)
 * for a tunnel trust model, less the Deployment, applied to `spoke` in `namespace`; then a kubeconfig
 * with a token of the agent's ServiceAccount: the agent runs with exactly the RBAC it is given in a
 * cluster. Returns the kubeconfig path and the paths of the cluster-scoped objects (to delete).
 */
export async function provisionAgentOnSpoke(
  spoke: KubeClient,
  managedName: string,
  options: {
    namespace: string;
    trustModel: 'HubCredential' | 'NoCredential';
    hubCredentialClusterRole?: string;
  },
): Promise<{ kubeconfig: string; clusterScoped: string[] }> {
  const addon = defineAddon({
    addonName: tunnelAddon,
    displayName: 'Cluster Gateway',
    description: 'e2e',
    agentImage: 'unused',
    agentInstallNamespace: options.namespace,
    namespace: 'unused',
    healthMode: 'Customized',
    installPlacements: [],
    credentialNamespace,
  });
  const values = agentValues(
    addon,
    { metadata: { name: tunnelAddon, namespace: managedName } },
    {
      agentInstallNamespace: options.namespace,
      customizedVariables: [
        { name: 'TUNNEL_TRUST_MODEL', value: options.trustModel },
        ...(options.hubCredentialClusterRole
          ? [{ name: 'HUB_CREDENTIAL_CLUSTER_ROLE', value: options.hubCredentialClusterRole }]
          : []),
      ],
    },
  );
  const clusterScoped: string[] = [];
  for (const obj of agentManifests(addon, managedName, values)) {
    if (obj.kind === 'Deployment') continue;
    if (obj.kind === 'Namespace') {
      await ensureNamespace(spoke, options.namespace);
      continue;
    }
    const objectUrl = objectPath(obj);
    await spoke.apply(objectUrl, obj, 'e2e');
    if (!obj.metadata?.namespace) clusterScoped.push(objectUrl);
  }
  const managed = environmentState().managed.find((m) => m.name === managedName);
  if (!managed) throw new Error(`no managed cluster "${managedName}"`);
  const token = await requestServiceAccountToken(spoke, options.namespace, addon.agentName, 3600);
  const kubeconfig = writeKubeconfig(
    path.join(environmentState().stateDir, `tunnel-agent-${managedName}-${options.namespace}.kubeconfig`),
    {
      name: managedName,
      server: managed.server,
      caCert: readFileSync(path.join(environmentState().stateDir, managedName, 'ca.crt'), 'utf8'),
      token,
    },
  );
  return { kubeconfig, clusterScoped };
}

/** Starts `node agent/main.ts` for `cluster`, relaying to the environment's managed cluster `managedName`. */
export async function startTunnelAgent(
  supervisor: Supervisor,
  options: {
    cluster: string;
    managedName: string;
    hubKubeconfig: string;
    name?: string;
    /** The agent's managed-cluster kubeconfig (default: the environment's admin one). */
    kubeconfig?: string;
    installNamespace?: string;
    args?: string[];
  },
): Promise<TunnelAgent> {
  const managed = environmentState().managed.find((m) => m.name === options.managedName);
  if (!managed) throw new Error(`no managed cluster "${options.managedName}"`);
  // Warmed as the agent image warms it, so RSS figures are the deployed agent's.
  warmCompileCache('agent/main.ts');
  const port = await freePort();
  const process_ = supervisor.start(options.name ?? `tunnel-agent-${options.cluster}`, process.execPath, {
    args: [
      path.join(repoRoot, 'agent', 'main.ts'),
      `--cluster-name=${options.cluster}`,
      `--addon-name=${tunnelAddon}`,
      `--hub-kubeconfig=${options.hubKubeconfig}`,
      `--kubeconfig=${options.kubeconfig ?? managed.kubeconfig}`,
      `--install-namespace=${options.installNamespace ?? 'default'}`,
      '--bind-address=127.0.0.1',
      `--port=${port}`,
      '--log-level=debug',
      ...(options.args ?? []),
    ],
    env: compileCacheEnv,
  });
  return {
    process: process_,
    port,
    async metric(series) {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const line = text.split('\n').find((l) => l.startsWith(`${series} `));
      return Number(line?.split(' ').at(-1) ?? Number.NaN);
    },
  };
}

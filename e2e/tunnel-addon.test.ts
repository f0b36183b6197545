/**
 * The tunnel's trust models through the addon's real path: a ManagedClusterAddOn whose
 * AddOnDeploymentConfig picks the model -> the manager renders the agent and its RBAC for it into the
 * ManifestWork and grants it its cluster's credential Secret on the hub -> OCM's work agent applies
 * it -> the kubelet of the cluster's node runs the agent pod (the project's image) as its ServiceAccount,
 * with the hub certificate OCM's registration issued -> the agent writes the Secret and attaches its
 * tunnel through the hub kube-apiserver. Disabling the addon takes everything away again, the agent pod
 * included.
 *
 * - HubCredential on cluster1: the hub's credential for cluster1 is a token of the ServiceAccount the
 *   manager rendered, provisioned by the agent; the gateway reaches cluster1 through the tunnel with it.
 * - NoCredential on cluster2, under an addon name the environment's gateway does not accept tunnels
 *   for (its --tunnel-addon-name is cluster-gateway): the agent runs and renews its heartbeat, but its
 *   tunnel is refused, so the cluster, reachable through the tunnel only, is down: Available says
 *   TunnelDisconnected, its own reason.
 *
 * Each phase moves the environment's own credential Secret of its cluster aside (the agent never takes
 * over a Secret it did not write) and puts it back after.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { waitFor } from '../hack/localenv/wait.ts';
import type { KubeClient, KubeObject } from '../shared/kube/client.ts';
import { type AddonManagerProcess, startAddonManager } from './support/addon-manager.ts';
import { agentPodsGone, readyAgentPod } from './support/agent-pod.ts';
import { credentialNamespace, secretPath } from './support/credentials.ts';
import { environmentState, hubClient, managedClient } from './support/environment.ts';
import { kubectl } from './support/kubectl.ts';
import { proxyKubeconfig, proxyPrefix } from './support/users.ts';

const addonApi = '/apis/addon.open-cluster-management.io/v1alpha1';
const configNamespace = 'open-cluster-management-hub';
const installNamespace = 'open-cluster-management-agent-addon';
const rbac = '/apis/rbac.authorization.k8s.io/v1';

type Secret = KubeObject & { data?: Record<string, string> };
type Addon = KubeObject & {
  status?: { conditions?: { type: string; status: string; reason: string; message: string }[] };
};
type Gateway = {
  spec: { access: { endpoint: { type: string }; credential?: { type: string } } };
  status: { tunnel?: { connected: boolean } };
};

/** One addon, one cluster, one trust model: manager, the ManagedClusterAddOn and its config. */
function phase(settings: { addon: string; cluster: string; trustModel: 'HubCredential' | 'NoCredential' }) {
  const { addon, cluster } = settings;
  const mcaPath = `${addonApi}/namespaces/${cluster}/managedclusteraddons/${addon}`;
  const configPath = `${addonApi}/namespaces/${configNamespace}/addondeploymentconfigs/${addon}-tunnel`;
  const state = {
    hub: undefined as unknown as KubeClient,
    spoke: undefined as unknown as KubeClient,
    manager: undefined as AddonManagerProcess | undefined,
    saved: undefined as Secret | undefined,
  };

  async function start(): Promise<void> {
    const image = environmentState().image;
    assert.ok(image, 'the e2e environment runs real nodes with the project image');
    state.hub = await hubClient();
    state.spoke = await managedClient(cluster);
    // The environment's Secret for the cluster (an admin's): moved aside for the agent to write its own.
    state.saved = await state.hub.getOptional<Secret>(secretPath(cluster));
    await state.hub.delete(secretPath(cluster));
    await state.hub.apply(
      configPath,
      {
        apiVersion: 'addon.open-cluster-management.io/v1alpha1',
        kind: 'AddOnDeploymentConfig',
        metadata: { name: `${addon}-tunnel`, namespace: configNamespace },
        spec: {
          customizedVariables: [
            { name: 'TUNNEL_TRUST_MODEL', value: settings.trustModel },
            { name: 'LOG_LEVEL', value: 'debug' },
          ],
        },
      },
      'e2e',
    );
    state.manager = await startAddonManager(`addon-manager-tunnel-${addon}`, [
      `--addon-name=${addon}`,
      `--agent-image=${image}`,
    ]);
    await waitFor('the ClusterManagementAddOn', () =>
      state.hub.getOptional(`${addonApi}/clustermanagementaddons/${addon}`),
    );
    // What `clusteradm addon enable` creates, with the config named from the start (one rollout).
    await state.hub.apply(
      mcaPath,
      {
        apiVersion: 'addon.open-cluster-management.io/v1alpha1',
        kind: 'ManagedClusterAddOn',
        metadata: { name: addon, namespace: cluster },
        spec: {
          installNamespace,
          configs: [
            {
              group: 'addon.open-cluster-management.io',
              resource: 'addondeploymentconfigs',
              namespace: configNamespace,
              name: `${addon}-tunnel`,
            },
          ],
        },
      },
      'e2e',
    );
  }

  async function stop(): Promise<void> {
    await state.hub?.delete(mcaPath).catch(() => {});
    // With the manager still running: the ManifestWork goes, the work agent deletes the Deployment and
    // the agent pod terminates before the environment's Secret comes back.
    await agentPodsGone(state.spoke, addon).catch(() => {});
    await state.manager?.stop();
    await state.hub?.delete(configPath).catch(() => {});
    if (state.saved) {
      const {
        resourceVersion: _rv,
        uid: _uid,
        managedFields: _mf,
        creationTimestamp: _ct,
        ...metadata
      } = state.saved.metadata ?? {};
      await state.hub.delete(secretPath(cluster)).catch(() => {});
      await state.hub.create(`/api/v1/namespaces/${credentialNamespace}/secrets`, {
        ...state.saved,
        metadata,
      });
    }
    state.hub?.close();
    state.spoke?.close();
  }

  const available = async () =>
    (await state.hub.getOptional<Addon>(mcaPath))?.status?.conditions?.find((c) => c.type === 'Available');
  const clusterGateway = async () =>
    JSON.parse(
      await kubectl(environmentState().hub.kubeconfig, 'get', '--raw', `${proxyPrefix}/${cluster}`),
    ) as Gateway;
  const agentWroteSecret = () =>
    waitFor(
      "the agent's credential Secret on the hub",
      async () => {
        const s = await state.hub.getOptional<Secret>(secretPath(cluster));
        return s?.metadata?.labels?.['app.kubernetes.io/managed-by'] === 'cluster-gateway-agent'
          ? s
          : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 500 },
    );
  return { state, start, stop, mcaPath, available, clusterGateway, agentWroteSecret };
}

describe('the tunnel trust models through the addon', { concurrency: false }, () => {
  describe('HubCredential on cluster1: the agent provisions the credential the hub holds', () => {
    const p = phase({ addon: 'cluster-gateway', cluster: 'cluster1', trustModel: 'HubCredential' });
    const credentialSa = `/api/v1/namespaces/${installNamespace}/serviceaccounts/cluster-gateway-hub-credential`;
    const credentialBinding = `${rbac}/clusterrolebindings/open-cluster-management:cluster-gateway:hub-credential`;
    const credentialGrant = `${rbac}/namespaces/${credentialNamespace}/roles/open-cluster-management:cluster-gateway:agent:cluster1:credential`;
    before(() => p.start());
    after(() => p.stop());

    test('the agent writes a token of the ServiceAccount the manager rendered; the gateway reaches cluster1 through the tunnel with it', async () => {
      const secret = await p.agentWroteSecret();
      assert.deepEqual(Object.keys(secret.data ?? {}).sort(), ['ca.crt', 'token']);
      const pod = await readyAgentPod(p.state.spoke, 'cluster-gateway');
      assert.equal(pod.spec?.nodeName, 'cluster1-node', "the agent runs on cluster1's node");
      const binding = await p.state.spoke.get<KubeObject & { roleRef: { name: string } }>(credentialBinding);
      assert.equal(binding.roleRef.name, 'cluster-admin', 'HUB_CREDENTIAL_CLUSTER_ROLE by default');
      await waitFor(
        'the tunnel of cluster1',
        async () => (await p.clusterGateway()).status.tunnel?.connected,
        {
          timeoutMs: 60_000,
        },
      );
      const gateway = await p.clusterGateway();
      assert.equal(gateway.spec.access.endpoint.type, 'ClusterProxy');
      const whoami = JSON.parse(
        await kubectl(await proxyKubeconfig('cluster1'), 'auth', 'whoami', '-o', 'json'),
      ) as { status: { userInfo: { username: string } } };
      assert.equal(
        whoami.status.userInfo.username,
        `system:serviceaccount:${installNamespace}:cluster-gateway-hub-credential`,
      );
      const condition = await waitFor(
        'Available True',
        async () => {
          const c = await p.available();
          return c?.status === 'True' ? c : undefined;
        },
        { timeoutMs: 60_000 },
      );
      assert.equal(condition.reason, 'AgentAvailable');
    });

    test('disabling the addon removes the hub Secret, its grant, the ServiceAccount and the agent pod on cluster1', async () => {
      await p.state.hub.delete(p.mcaPath);
      await waitFor(
        'the Secret, the grant, the ServiceAccount and its binding to go',
        async () =>
          !(await p.state.hub.getOptional(secretPath('cluster1'))) &&
          !(await p.state.hub.getOptional(credentialGrant)) &&
          !(await p.state.spoke.getOptional(credentialSa)) &&
          !(await p.state.spoke.getOptional(credentialBinding)),
        { timeoutMs: 120_000, intervalMs: 500 },
      );
      await agentPodsGone(p.state.spoke, 'cluster-gateway');
    });
  });

  describe('NoCredential on cluster2, its tunnel refused: Available says TunnelDisconnected', () => {
    const addon = 'cg-tunnel-e2e';
    const p = phase({ addon, cluster: 'cluster2', trustModel: 'NoCredential' });
    const impersonate = `${rbac}/clusterroles/open-cluster-management:${addon}:agent:impersonate`;
    before(() => p.start());
    after(() => p.stop());

    test('the agent writes a Secret without any credential and may only impersonate on cluster2', async () => {
      const secret = await p.agentWroteSecret();
      assert.equal(secret.data, undefined);
      const pod = await readyAgentPod(p.state.spoke, addon);
      assert.equal(pod.spec?.nodeName, 'cluster2-node', "the agent runs on cluster2's node");
      const role = await p.state.spoke.get<KubeObject & { rules: unknown[] }>(impersonate);
      assert.deepEqual(role.rules, [
        { apiGroups: [''], resources: ['users', 'groups'], verbs: ['impersonate'] },
        { apiGroups: ['authentication.k8s.io'], resources: ['uids'], verbs: ['impersonate'] },
      ]);
    });

    test('heartbeat fine, tunnel refused: False / TunnelDisconnected, and the ClusterGateway says Disconnected', async () => {
      const gateway = await p.clusterGateway();
      assert.equal(gateway.spec.access.endpoint.type, 'ClusterProxy');
      assert.equal(gateway.status.tunnel?.connected, false);
      const condition = await waitFor(
        'Available TunnelDisconnected',
        async () => {
          const c = await p.available();
          return c?.reason === 'TunnelDisconnected' ? c : undefined;
        },
        { timeoutMs: 120_000 },
      );
      assert.equal(condition.status, 'False');
      assert.match(condition.message, /its tunnel to the cluster gateway is not connected/);
      const gatewayLog = readFileSync(
        path.join(environmentState().stateDir, 'logs', 'hub-cluster-gateway.log'),
        'utf8',
      );
      assert.ok(
        gatewayLog
          .split('\n')
          .some(
            (l) =>
              l.includes('agent tunnel attach refused') &&
              l.includes(`is an agent of addon \\"${addon}\\", not \\"cluster-gateway\\"`),
          ),
        'the gateway logs why it refuses the agent',
      );
    });

    test('disabling the addon removes the Secret, the impersonation grant and the agent pod', async () => {
      await p.state.hub.delete(p.mcaPath);
      await waitFor(
        'the Secret and the ClusterRole to go',
        async () =>
          !(await p.state.hub.getOptional(secretPath('cluster2'))) &&
          !(await p.state.spoke.getOptional(impersonate)),
        { timeoutMs: 120_000, intervalMs: 500 },
      );
      await agentPodsGone(p.state.spoke, addon);
    });
  });
});

/**
 * A managed cluster may not steer its own gateway settings (issue 30, item 4). OCM v1.3.1 gives each
 * managed cluster's klusterlet (its registration agent's hub identity) `update` on its own
 * ManagedCluster and `patch`/`update` on managedclusteraddons/status in its namespace
 * (registration's ClusterRoles open-cluster-management:managedcluster:<name> and
 * open-cluster-management:managedcluster:registration), and OCM's ManagedCluster webhook does not look
 * at annotations. Everything here is written with that real credential, the one OCM's CSR flow gave
 * the environment's registration agent, and read back through the hub's aggregator:
 * - an inline proxy configuration on ManagedCluster cluster1 naming an external exchanger (an HTTPS
 *   listener started here) sends it no identity, and the ClusterGateway says why;
 * - a prober verdict forged on ManagedCluster cluster2 (made a tunnel-only cluster for the test: its
 *   credential Secret is set aside and an agent attaches its tunnel) is never shown;
 * - status.configReferences of cluster1's ManagedClusterAddOn pointed at an AddOnDeploymentConfig
 *   neither the addon nor the ClusterManagementAddOn configures is not rendered into the agent's work.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Supervisor } from '../hack/localenv/supervisor.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import { KubeClient, type KubeObject } from '../shared/kube/client.ts';
import { StatusError } from '../shared/kube/status.ts';
import { type AddonManagerProcess, startAddonManager } from './support/addon-manager.ts';
import { clusteradm } from './support/clusteradm.ts';
import { secretPath } from './support/credentials.ts';
import { e2eStateDir, environmentState, hubClient } from './support/environment.ts';
import { type IdentityExchangerService, startIdentityExchanger } from './support/identity-exchanger.ts';
import { rawRequest } from './support/raw-request.ts';
import { grantOnHub, hubUser, revokeOnHub } from './support/rbac.ts';
import {
  agentCertificate,
  agentHubKubeconfig,
  grantAgentOnHub,
  startTunnelAgent,
} from './support/tunnel-agent.ts';
import { hubUserCertificate, proxyPrefix } from './support/users.ts';
import { recordWatch } from './support/watch-recorder.ts';

const managedClusters = '/apis/cluster.open-cluster-management.io/v1/managedclusters';
const ignoredKey = 'gateway.cluster.core.oam.dev/ignored-managedcluster-settings';
const inlineKey = 'cluster.core.oam.dev/cluster-gateway-proxy-configuration';
const probedHealthy = 'status.cluster.core.oam.dev/probed-healthy';
const probedReason = 'status.cluster.core.oam.dev/probed-reason';
const nonceLabel = 'e2e-mc-settings';

interface ClusterGateway extends KubeObject {
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  status: { healthy: boolean; healthyReason?: string; tunnel?: { connected?: boolean } };
}

let hub: KubeClient;
const klusterlets: KubeClient[] = [];

/** The hub client of `cluster`'s registration agent: the kubeconfig OCM's CSR flow wrote for it. */
async function klusterlet(cluster: string): Promise<KubeClient> {
  const client = await KubeClient.fromKubeconfig(
    path.join(environmentState().stateDir, 'klusterlet', cluster, 'hub-kubeconfig', 'kubeconfig'),
  );
  klusterlets.push(client);
  return client;
}

/**
 * As `who`, sets annotations (null removes) and the nonce label on ManagedCluster `name` with GET and
 * PUT (the klusterlet may update, not patch), again on a conflict with its registration agent.
 * Returns the nonce: the ClusterGateway carries it once the gateway has merged this version.
 */
async function annotateManagedCluster(
  who: KubeClient,
  name: string,
  annotations: Record<string, string | null>,
): Promise<string> {
  const nonce = `n${Date.now()}`;
  await waitFor(`an update of ManagedCluster ${name}`, async () => {
    const current = await who.get<KubeObject>(`${managedClusters}/${name}`);
    const merged: Record<string, string> = { ...current.metadata?.annotations };
    for (const [key, value] of Object.entries(annotations)) {
      if (value === null) delete merged[key];
      else merged[key] = value;
    }
    const body = {
      ...current,
      metadata: {
        ...current.metadata,
        annotations: merged,
        labels: { ...current.metadata?.labels, [nonceLabel]: nonce },
      },
    };
    try {
      await who.request('PUT', `${managedClusters}/${name}`, { body });
      return true;
    } catch (err) {
      if (err instanceof StatusError && err.code === 409) return false;
      throw err;
    }
  });
  return nonce;
}

async function clearManagedCluster(name: string, keys: string[]): Promise<void> {
  const annotations = Object.fromEntries(keys.map((k) => [k, null]));
  await hub.mergePatch(`${managedClusters}/${name}`, {
    metadata: { annotations, labels: { [nonceLabel]: null } },
  });
}

function clusterGateway(name: string): Promise<ClusterGateway> {
  return hub.get<ClusterGateway>(`${proxyPrefix}/${name}`);
}

before(async () => {
  hub = await hubClient();
});

after(async () => {
  for (const client of klusterlets) client.close();
  hub?.close();
});

describe('an inline proxy configuration a klusterlet writes on its ManagedCluster', () => {
  const user = 'mcs-caller';
  let exchanger: IdentityExchangerService;
  let caller: { cert: string; key: string };

  before(async () => {
    exchanger = await startIdentityExchanger({ [user]: { username: 'mcs-mapped' } });
    caller = await hubUserCertificate(user, ['mcs-team']);
    await grantOnHub(
      hub,
      'mcs-proxy',
      [hubUser(user)],
      [{ apiGroups: ['cluster.core.oam.dev'], resources: ['clustergateways/proxy'], verbs: ['get'] }],
    );
  });

  after(async () => {
    await clearManagedCluster('cluster1', [inlineKey]);
    await revokeOnHub(hub, 'mcs-proxy');
    await exchanger?.stop();
  });

  test('sends no hub identity to the external exchanger it names, and the ClusterGateway says why', async () => {
    const agent = await klusterlet('cluster1');
    const configuration = {
      apiVersion: 'cluster.core.oam.dev/v1alpha1',
      kind: 'ClusterGatewayProxyConfiguration',
      spec: {
        clientIdentityExchanger: {
          rules: [
            {
              name: 'collect',
              type: 'ExternalIdentityExchanger',
              source: { userPattern: '.*' },
              url: exchanger.url,
              caBundle: exchanger.caBundle,
              timeoutSeconds: 2,
            },
          ],
        },
      },
    };
    const nonce = await annotateManagedCluster(agent, 'cluster1', {
      [inlineKey]: JSON.stringify(configuration),
    });
    const merged = await waitFor('the gateway to merge the ManagedCluster version', async () => {
      const gw = await clusterGateway('cluster1');
      return gw.metadata.labels?.[nonceLabel] === nonce ? gw : undefined;
    });
    // A hub caller through the aggregator, with identity penetration: the exchange would happen now.
    const res = await rawRequest(
      environmentState().hub.server,
      'GET',
      `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/default?impersonate=true`,
      { client: caller },
    );
    assert.deepEqual(
      exchanger.reviews.map((r) => r.spec.user),
      [],
      `no identity may reach the URL the klusterlet chose (the proxied request answered ${res.status})`,
    );
    assert.notEqual(res.status, 500, `the cluster keeps serving under the hub's own rules: ${res.body}`);
    assert.equal(merged.metadata.annotations?.[inlineKey], undefined, 'not shown as in force');
    assert.match(
      merged.metadata.annotations?.[ignoredKey] ?? '(no ignored-settings annotation)',
      /cluster-gateway-proxy-configuration on ManagedCluster "cluster1" is ignored: its rule "collect" is an ExternalIdentityExchanger, which sends hub callers' identities to a URL/,
    );
  });
});

describe('a prober verdict a klusterlet forges on its ManagedCluster (a cluster known by its tunnel)', () => {
  const cluster = 'cluster2';
  let supervisor: Supervisor;
  let savedSecret: KubeObject | undefined;
  let hubPaths: string[] = [];

  before(async () => {
    // cluster2 without its credential Secret, reached through an agent's tunnel: the prober's verdict
    // then has no hub object but the ManagedCluster.
    savedSecret = await hub.getOptional<KubeObject>(secretPath(cluster));
    await hub.delete(secretPath(cluster));
    hubPaths = await grantAgentOnHub(hub, cluster);
    supervisor = new Supervisor(path.join(e2eStateDir, 'security-managedcluster-settings'));
    const agent = await startTunnelAgent(supervisor, {
      cluster,
      managedName: cluster,
      hubKubeconfig: agentHubKubeconfig('mcs-cluster2', await agentCertificate(cluster)),
      name: 'tunnel-agent-mcs-cluster2',
      // No credential Secret: the agent serves the gateway's streams with its own credential.
      args: ['--trust-model=no-credential'],
    });
    await waitFor(
      'cluster2 to be reached through its tunnel and probed healthy',
      async () => {
        const gw = await hub.getOptional<ClusterGateway>(`${proxyPrefix}/${cluster}`);
        return gw?.status.tunnel?.connected && gw.status.healthy;
      },
      { timeoutMs: 60_000, failFast: () => agent.process.assertRunning() },
    );
  });

  after(async () => {
    await supervisor?.stop();
    await clearManagedCluster(cluster, [probedHealthy, probedReason]);
    for (const p of hubPaths) await hub.delete(p);
    if (savedSecret?.metadata) {
      const { name, namespace, labels, annotations } = savedSecret.metadata;
      await hub.create(`/api/v1/namespaces/${namespace}/secrets`, {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name, namespace, labels, annotations },
        type: savedSecret.type,
        data: savedSecret.data,
      });
    }
  });

  test('is never shown, not even at the version that carries it', async () => {
    const agent = await klusterlet(cluster);
    const recorder = recordWatch<ClusterGateway>(hub, proxyPrefix);
    await recorder.ready;
    const forged = 'e2e: forged by the klusterlet';
    try {
      const nonce = await annotateManagedCluster(agent, cluster, {
        [probedHealthy]: 'false',
        [probedReason]: forged,
      });
      const first = await waitFor('the gateway to merge the forged version', async () =>
        recorder.events.find(
          (e) => e.object.metadata.name === cluster && e.object.metadata.labels?.[nonceLabel] === nonce,
        ),
      );
      assert.equal(
        first.object.status.healthy,
        true,
        `the verdict shown at the forged version is the prober's own: ${JSON.stringify(first.object.status)}`,
      );
      const latest = await clusterGateway(cluster);
      assert.equal(latest.status.healthy, true);
      assert.equal(latest.metadata.annotations?.[probedReason], undefined, 'the forged reason is not shown');
      // Said at the forged version itself: the prober rewrites its signed verdict within a probe interval, after
      // which nothing is ignored any more (a fresh GET may already show that).
      assert.match(
        first.object.metadata.annotations?.[ignoredKey] ?? '(no ignored-settings annotation)',
        /probed-healthy and status\.cluster\.core\.oam\.dev\/probed-reason on ManagedCluster "cluster2" are ignored: they do not carry this gateway's signature/,
      );
      const seen = recorder.events.filter((e) => e.object.metadata.name === cluster);
      assert.ok(
        seen.every((e) => e.object.status.healthyReason !== forged),
        `no event showed the forged verdict: ${JSON.stringify(seen.map((e) => e.object.status))}`,
      );
    } finally {
      await recorder.stop();
    }
  });
});

describe('status.configReferences a klusterlet writes on its ManagedClusterAddOn', () => {
  const addon = 'cluster-gateway';
  const cluster = 'cluster1';
  const addonApi = '/apis/addon.open-cluster-management.io/v1alpha1';
  const configNamespace = 'open-cluster-management-hub';
  const defaultConfigPath = `${addonApi}/namespaces/${configNamespace}/addondeploymentconfigs/${addon}-default`;
  const forgedConfigPath = `${addonApi}/namespaces/${configNamespace}/addondeploymentconfigs/mcs-other-cluster`;
  const mcaStatusPath = `${addonApi}/namespaces/${cluster}/managedclusteraddons/${addon}/status`;
  const workPath = `/apis/work.open-cluster-management.io/v1/namespaces/${cluster}/manifestworks/addon-${addon}-deploy-0`;
  const forgedMirror = 'forged.example.com';
  type Work = KubeObject & {
    spec: {
      workload: {
        manifests: (KubeObject & {
          spec?: { template?: { spec?: { containers?: { image: string; args: string[] }[] } } };
        })[];
      };
    };
  };
  const agentContainer = (work: Work | undefined) =>
    work?.spec.workload.manifests.find((m) => m.kind === 'Deployment')?.spec?.template?.spec?.containers?.[0];
  let manager: AddonManagerProcess | undefined;

  before(async () => {
    manager = await startAddonManager('addon-manager-mc-settings', [
      `--namespace=${configNamespace}`,
      '--agent-image=registry.example.com/oam-dev/cluster-gateway-ts:e2e',
    ]);
    // An admin's config for some other use: what a klusterlet would like its agent to run with.
    await hub.apply(
      forgedConfigPath,
      {
        apiVersion: 'addon.open-cluster-management.io/v1alpha1',
        kind: 'AddOnDeploymentConfig',
        metadata: { name: 'mcs-other-cluster', namespace: configNamespace },
        spec: { registries: [{ source: 'registry.example.com', mirror: forgedMirror }] },
      },
      'e2e',
    );
    await clusteradm('addon', 'enable', '--names', addon, '--clusters', cluster);
    await waitFor(
      'the deploy ManifestWork',
      async () => agentContainer(await hub.getOptional<Work>(workPath)),
      {
        timeoutMs: 30_000,
      },
    );
  });

  after(async () => {
    await clusteradm('addon', 'disable', '--names', addon, '--clusters', cluster).catch(() => {});
    await manager?.stop();
    await hub.mergePatch(defaultConfigPath, {
      spec: { customizedVariables: [{ name: 'LOG_LEVEL', value: 'info' }] },
    });
    await hub.delete(forgedConfigPath);
  });

  test('does not choose the AddOnDeploymentConfig the agent is rendered from', async () => {
    const agent = await klusterlet(cluster);
    const imageBefore = agentContainer(await hub.get<Work>(workPath))?.image ?? '';
    // OCM's addon-manager writes the status back from the spec: the klusterlet keeps writing it.
    const forgedReference = {
      status: {
        configReferences: [
          {
            group: 'addon.open-cluster-management.io',
            resource: 'addondeploymentconfigs',
            name: 'mcs-other-cluster',
            namespace: configNamespace,
            desiredConfig: { name: 'mcs-other-cluster', namespace: configNamespace, specHash: 'forged' },
          },
        ],
      },
    };
    await agent.mergePatch(mcaStatusPath, forgedReference); // allowed: the klusterlet may write it
    let forging = true;
    const forger = (async () => {
      while (forging) {
        await agent.mergePatch(mcaStatusPath, forgedReference).catch(() => {});
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    try {
      // While the forged reference stands, a change of the configured default: the manager renders again.
      await hub.mergePatch(defaultConfigPath, {
        spec: { customizedVariables: [{ name: 'LOG_LEVEL', value: 'warn' }] },
      });
      const container = await waitFor(
        'the work to be rendered again (from the default config, or from the forged one)',
        async () => {
          const c = agentContainer(await hub.get<Work>(workPath));
          return c?.args.includes('--log-level=warn') || c?.image.includes(forgedMirror) ? c : undefined;
        },
        { timeoutMs: 30_000 },
      );
      assert.equal(
        container.image,
        imageBefore,
        'the image comes from the configured config, not the forged one',
      );
      assert.ok(container.args.includes('--log-level=warn'), JSON.stringify(container.args));
    } finally {
      forging = false;
      await forger;
    }
  });
});

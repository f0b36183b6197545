/**
 * An agent behind a corporate proxy, the addon's real way: an AddOnDeploymentConfig with
 * spec.proxyConfig for cluster1 -> the manager renders HTTPS_PROXY/NO_PROXY (and the caBundle) into the
 * agent's Deployment -> OCM's work agent applies it -> the kubelet of cluster1's node runs the agent pod,
 * whose direct route to the hub kube-apiserver is closed (hack/localenv/blocked-routes.ts). Everything
 * the agent says to the hub (its heartbeat Lease, the credential Secret, the tunnel's attach) must go
 * through the proxy, a plain-Node HTTP CONNECT proxy in this process on the host's bridge address that
 * counts what passes through it; the gateway then reaches cluster1 through that tunnel.
 *
 * 1. an http:// proxy: heartbeat renewing, Secret written, tunnel attached, a request proxied through
 *    the gateway, and the proxy counted CONNECTs to the hub's host:port;
 * 2. an https:// proxy with a CA of its own given as the ADC's caBundle (the pod is rendered anew);
 * 3. that proxy stopped: the agent fails visibly, its log naming the proxy.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type BlockedRoute, blockRoute, nodePodRange } from '../hack/localenv/blocked-routes.ts';
import { hostAddress, serviceNetwork } from '../hack/localenv/host-changes.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import type { KubeClient, KubeObject } from '../shared/kube/client.ts';
import { createCertificateAuthority } from '../shared/pki.ts';
import { type CountingProxy, startCountingProxy } from '../shared/transport/counting-proxy.ts';
import { type AddonManagerProcess, startAddonManager } from './support/addon-manager.ts';
import { agentPodsGone, readyAgentPod } from './support/agent-pod.ts';
import { credentialNamespace, secretPath } from './support/credentials.ts';
import { environmentState, hubClient, managedClient } from './support/environment.ts';
import { kubectl, kubectlResult } from './support/kubectl.ts';
import { proxyKubeconfig, proxyPrefix } from './support/users.ts';

const cluster = 'cluster1';
const clusterIndex = 1; // the environment's node 1 runs cluster1's pods
const addon = 'cluster-gateway'; // the addon whose tunnels the environment's gateway accepts
const addonApi = '/apis/addon.open-cluster-management.io/v1alpha1';
const configNamespace = 'open-cluster-management-hub';
const configName = `${addon}-proxy`;
const configPath = `${addonApi}/namespaces/${configNamespace}/addondeploymentconfigs/${configName}`;
const mcaPath = `${addonApi}/namespaces/${cluster}/managedclusteraddons/${addon}`;
const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${cluster}/leases/${addon}`;
const installNamespace = 'open-cluster-management-agent-addon';

type Secret = KubeObject & { data?: Record<string, string> };
type Lease = KubeObject & { spec?: { renewTime?: string } };
type Gateway = { status: { tunnel?: { connected: boolean } } };

describe('an agent behind an HTTP CONNECT proxy, its direct route to the hub closed', {
  concurrency: false,
}, () => {
  let hub: KubeClient;
  let spoke: KubeClient;
  let manager: AddonManagerProcess | undefined;
  let blocked: BlockedRoute | undefined;
  let saved: Secret | undefined;
  let plainProxy: CountingProxy;
  let tlsProxy: CountingProxy;
  let tlsProxyCa: string;
  const hubPort = () => Number(new URL(environmentState().hub.server).port);
  /** What the agent dials for the hub: its hub kubeconfig names the bridge address. */
  const hubTarget = () => `${hostAddress}:${hubPort()}`;
  // The pod's own apiserver (the kubernetes Service) and loopback stay direct, as in a real cluster.
  const noProxy = `${serviceNetwork},127.0.0.1,localhost,.svc,.cluster.local`;

  const applyConfig = (proxyConfig: Record<string, string>) =>
    hub.apply(
      configPath,
      {
        apiVersion: 'addon.open-cluster-management.io/v1alpha1',
        kind: 'AddOnDeploymentConfig',
        metadata: { name: configName, namespace: configNamespace },
        spec: { customizedVariables: [{ name: 'TUNNEL_TRUST_MODEL', value: 'HubCredential' }], proxyConfig },
      },
      'e2e',
    );
  const clusterGateway = async () =>
    JSON.parse(
      await kubectl(environmentState().hub.kubeconfig, 'get', '--raw', `${proxyPrefix}/${cluster}`),
    ) as Gateway;
  const renewTime = async () => (await hub.getOptional<Lease>(leasePath))?.spec?.renewTime;
  const podLog = async (name: string) => {
    const kubeconfig = environmentState().managed.find((m) => m.name === cluster)?.kubeconfig ?? '';
    return (await kubectlResult(kubeconfig, ['logs', '-n', installNamespace, name])).stdout;
  };
  /** The agent pod that runs with this proxy in its environment. */
  const agentWith = (proxyUrl: string) =>
    waitFor(
      `the agent pod with HTTPS_PROXY=${proxyUrl}`,
      async () => {
        const pod = await readyAgentPod(spoke, addon, { timeoutMs: 5_000 }).catch(() => undefined);
        const container = pod?.spec?.containers?.[0] as
          | { env?: { name: string; value?: string }[] }
          | undefined;
        const env = container?.env ?? [];
        return env.some((e) => e.name === 'HTTPS_PROXY' && e.value === proxyUrl) ? pod : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
  /** The hub Lease moves on: the heartbeat reaches the hub. */
  const heartbeatRenews = async () => {
    const first = await waitFor('the hub heartbeat Lease to be renewed', renewTime, { timeoutMs: 60_000 });
    await waitFor('a later renewal', async () => ((await renewTime()) ?? first) > first, {
      timeoutMs: 30_000,
      intervalMs: 500,
    });
  };

  before(async () => {
    const image = environmentState().image;
    assert.ok(image, 'the e2e environment runs real nodes with the project image');
    hub = await hubClient();
    spoke = await managedClient(cluster);
    plainProxy = await startCountingProxy({ host: hostAddress });
    const ca = await createCertificateAuthority('e2e proxy CA');
    tlsProxyCa = ca.cert;
    const serving = await ca.issue({ commonName: 'e2e proxy', ipAddresses: [hostAddress], usage: 'server' });
    tlsProxy = await startCountingProxy({ host: hostAddress, tls: serving });
    // The agent pod may not reach the hub kube-apiserver but through a proxy.
    blocked = blockRoute(nodePodRange(clusterIndex), hubPort());
    // The environment's Secret for cluster1 (an admin's): moved aside for the agent to write its own.
    saved = await hub.getOptional<Secret>(secretPath(cluster));
    await hub.delete(secretPath(cluster));
    await applyConfig({ httpsProxy: plainProxy.url, noProxy });
    manager = await startAddonManager('addon-manager-agent-proxy', [
      `--addon-name=${addon}`,
      `--agent-image=${image}`,
    ]);
    await waitFor('the ClusterManagementAddOn', () =>
      hub.getOptional(`${addonApi}/clustermanagementaddons/${addon}`),
    );
    await hub.apply(
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
              name: configName,
            },
          ],
        },
      },
      'e2e',
    );
  });

  after(async () => {
    await hub?.delete(mcaPath).catch(() => {});
    if (spoke) await agentPodsGone(spoke, addon).catch(() => {});
    await manager?.stop();
    blocked?.undo();
    await hub?.delete(configPath).catch(() => {});
    if (hub && saved) {
      const {
        resourceVersion: _rv,
        uid: _uid,
        managedFields: _mf,
        creationTimestamp: _ct,
        ...metadata
      } = saved.metadata ?? {};
      await hub.delete(secretPath(cluster)).catch(() => {});
      await hub.create(`/api/v1/namespaces/${credentialNamespace}/secrets`, { ...saved, metadata });
    }
    await plainProxy?.close();
    await tlsProxy?.close();
    hub?.close();
    spoke?.close();
  });

  test('http:// proxy: heartbeat, credential Secret and tunnel go through CONNECTs to the hub', async () => {
    const pod = await agentWith(plainProxy.url);
    assert.equal(pod.spec?.nodeName, `${cluster}-node`);
    const secret = await waitFor(
      "the agent's credential Secret on the hub",
      async () => {
        const s = await hub.getOptional<Secret>(secretPath(cluster));
        return s?.metadata?.labels?.['app.kubernetes.io/managed-by'] === 'cluster-gateway-agent'
          ? s
          : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    assert.deepEqual(Object.keys(secret.data ?? {}).sort(), ['ca.crt', 'token']);
    await heartbeatRenews();
    await waitFor('the tunnel of cluster1', async () => (await clusterGateway()).status.tunnel?.connected, {
      timeoutMs: 60_000,
      intervalMs: 500,
    });
    // gateway -> tunnel (through the proxy) -> agent -> cluster1's apiserver (direct: in NO_PROXY).
    const namespaces = await kubectl(await proxyKubeconfig(cluster), 'get', 'namespaces', '-o', 'name');
    assert.match(namespaces, new RegExp(`namespace/${installNamespace}\\b`));

    const count = plainProxy.counts.get(hubTarget());
    assert.ok(count, `the proxy saw CONNECT ${hubTarget()}: ${JSON.stringify([...plainProxy.counts])}`);
    assert.ok(count.connects >= 2, `the REST client and the tunnel each opened one (${count.connects})`);
    assert.ok(count.sent > 0 && count.received > 0);
    assert.deepEqual(plainProxy.refused, [], 'nothing sent a plain request to the proxy');
    const cluster1Api = new URL(environmentState().managed.find((m) => m.name === cluster)?.server ?? '')
      .port;
    assert.ok(
      ![...plainProxy.counts.keys()].some((k) => k.endsWith(`:${cluster1Api}`) || k.endsWith(':443')),
      `the agent's own apiserver is in NO_PROXY: ${[...plainProxy.counts.keys()]}`,
    );
    const started = (await podLog(pod.metadata.name ?? ''))
      .split('\n')
      .find((l) => l.includes('"agent started"'));
    assert.ok(started, 'the agent logged its start');
    assert.match(started, new RegExp(`"hubRoute":"through ${plainProxy.url} \\(HTTPS_PROXY\\)"`));
    assert.match(started, /"managedClusterRoute":"direct \(in NO_PROXY\)"/);
  });

  test('https:// proxy verified with the caBundle: the agent moves to it', async () => {
    await applyConfig({
      httpsProxy: tlsProxy.url,
      noProxy,
      caBundle: Buffer.from(tlsProxyCa).toString('base64'),
    });
    await agentWith(tlsProxy.url);
    await waitFor(
      'CONNECTs through the https:// proxy',
      () => (tlsProxy.counts.get(hubTarget())?.connects ?? 0) >= 2,
      {
        timeoutMs: 60_000,
        intervalMs: 500,
      },
    );
    await heartbeatRenews();
    await waitFor('the tunnel of cluster1', async () => (await clusterGateway()).status.tunnel?.connected, {
      timeoutMs: 60_000,
      intervalMs: 500,
    });
    const version = JSON.parse(await kubectl(await proxyKubeconfig(cluster), 'get', '--raw', '/version')) as {
      gitVersion?: string;
    };
    assert.ok(version.gitVersion, 'cluster1 answers through the tunnel held over the https:// proxy');
  });

  test('the proxy stopped, the direct route still closed: the agent says which proxy fails', async () => {
    const pod = await readyAgentPod(spoke, addon);
    await tlsProxy.close();
    const line = await waitFor(
      "the agent's log to name the proxy",
      async () =>
        (await podLog(pod.metadata.name ?? ''))
          .split('\n')
          .find((l) => l.includes(`egress proxy ${hostAddress}:${tlsProxy.port}`)),
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    assert.match(line, /ECONNREFUSED/);
    await waitFor(
      'the tunnel to be reported down',
      async () => (await clusterGateway()).status.tunnel?.connected === false,
      { timeoutMs: 30_000, intervalMs: 500 },
    );
  });
});

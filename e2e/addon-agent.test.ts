/**
 * The agent through the real path: `clusteradm addon enable` -> the manager
 * renders ManifestWork addon-cluster-gateway-deploy-0 with the project's image
 * -> OCM's work agent applies it on cluster1 -> the kubelet of cluster1's node
 * runs the agent pod, with the registration Secret OCM's registration agent
 * wrote mounted -> the agent renews the hub heartbeat Lease and its spoke Lease.
 * Then: a rotated hub credential is picked up without a restart (same container);
 * an agent stopped while its node is cordoned stops the heartbeat, and its
 * replacement, scheduled once the node is uncordoned, resumes it.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { waitFor } from '../hack/localenv/wait.ts';
import type { KubeClient, KubeObject } from '../shared/kube/client.ts';
import { type AddonManagerProcess, startAddonManager } from './support/addon-manager.ts';
import {
  agentHttpAddress,
  agentMetrics,
  agentPods,
  agentPodsGone,
  type Pod,
  readyAgentPod,
  seriesValue,
} from './support/agent-pod.ts';
import { clusteradm } from './support/clusteradm.ts';
import { environmentState, hubClient, managedClient } from './support/environment.ts';

const addon = 'cluster-gateway';
const cluster = 'cluster1';
const installNamespace = 'open-cluster-management-agent-addon';
const hubLeasePath = `/apis/coordination.k8s.io/v1/namespaces/${cluster}/leases/${addon}`;
const spokeLeasePath = `/apis/coordination.k8s.io/v1/namespaces/${installNamespace}/leases/${addon}`;
const secretPath = `/api/v1/namespaces/${installNamespace}/secrets/${addon}-hub-kubeconfig`;

type Lease = KubeObject & {
  metadata: { ownerReferences?: { kind: string; name: string }[] };
  spec?: { renewTime?: string; leaseDurationSeconds?: number; holderIdentity?: string };
};

describe('addon agent: real path', { concurrency: false }, () => {
  let hub: KubeClient;
  let spoke: KubeClient;
  let manager: AddonManagerProcess;
  /** The node cordoned by the last test, uncordoned in `after` if the test could not. */
  let cordoned: string | undefined;

  /** A metric series of the Ready agent pod, read inside it (it serves them on loopback only). */
  async function metric(series: string): Promise<number> {
    const kubeconfig = environmentState().managed.find((c) => c.name === cluster)?.kubeconfig ?? '';
    return seriesValue(await agentMetrics(await readyAgentPod(spoke, addon), kubeconfig), series);
  }

  const renewTime = async (client: KubeClient, p: string) =>
    (await client.getOptional<Lease>(p))?.spec?.renewTime;

  /** Waits until the Lease's renewTime moves past `since` (or exists, without it). */
  const renewedAfter = (
    client: KubeClient,
    p: string,
    since: string | undefined,
    timeoutMs = 20_000,
    intervalMs = 250,
  ) =>
    waitFor(
      `${p} renewed after ${since ?? 'nothing'}`,
      async () => {
        const t = await renewTime(client, p);
        return t !== undefined && (since === undefined || t > since) ? t : undefined;
      },
      { timeoutMs, intervalMs },
    );

  const setUnschedulable = (node: string, unschedulable: boolean) =>
    spoke.mergePatch(`/api/v1/nodes/${node}`, { spec: { unschedulable } });

  before(async () => {
    const image = environmentState().image;
    assert.ok(image, 'the e2e environment runs real nodes with the project image');
    hub = await hubClient();
    spoke = await managedClient(cluster);
    manager = await startAddonManager('addon-manager-agent', [`--agent-image=${image}`]);
    await clusteradm('addon', 'enable', '--names', addon, '--clusters', cluster);
  });

  after(async () => {
    if (cordoned) await setUnschedulable(cordoned, false).catch(() => {});
    await clusteradm('addon', 'disable', '--names', addon, '--clusters', cluster).catch(() => {});
    // The work agent deletes the Deployment: its pods terminate before the next file uses cluster1.
    await agentPodsGone(spoke, addon).catch(() => {});
    await manager?.stop();
    hub?.close();
    spoke?.close();
  });

  test('the agent renews the hub heartbeat and its spoke Lease (MicroTime, owned by its ServiceAccount)', async () => {
    // The first start pulls nothing (the image is in the node's containerd) but waits for OCM to
    // issue the registration Secret the pod mounts.
    const pod = await readyAgentPod(spoke, addon, { timeoutMs: 90_000 });
    assert.equal(pod.spec?.nodeName, `${cluster}-node`);
    const first = await renewedAfter(hub, hubLeasePath, undefined);
    assert.match(first, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/, 'renewTime is a MicroTime');
    await renewedAfter(hub, hubLeasePath, first);
    assert.equal(
      (await hub.get<Lease>(hubLeasePath)).spec?.holderIdentity,
      pod.metadata.name,
      'renewed by the pod (its hostname)',
    );
    const spokeFirst = await renewedAfter(spoke, spokeLeasePath, undefined);
    await renewedAfter(spoke, spokeLeasePath, spokeFirst);
    const lease = await spoke.get<Lease>(spokeLeasePath);
    assert.equal(lease.spec?.holderIdentity, pod.metadata.name);
    assert.deepEqual(
      lease.metadata.ownerReferences?.map((o) => `${o.kind}/${o.name}`),
      [`ServiceAccount/${addon}-agent`],
      'garbage-collected with the agent ServiceAccount when the addon is disabled',
    );
    assert.equal(await metric('cluster_gateway_agent_healthy'), 1);
  });

  test("the agent's /metrics answer only on its pod's loopback: from another host, refused or pointed there", async () => {
    const pod = await readyAgentPod(spoke, addon);
    const { ip, port } = agentHttpAddress(pod);
    // The probes' port answers from off the pod (the kubelet's probes use it), but not with metrics.
    assert.equal(
      (await fetch(`http://${ip}:${port}/healthz`, { signal: AbortSignal.timeout(5_000) })).status,
      200,
    );
    const metricsThere = await fetch(`http://${ip}:${port}/metrics`, { signal: AbortSignal.timeout(5_000) });
    assert.equal(metricsThere.status, 404);
    assert.match(await metricsThere.text(), /127\.0\.0\.1:8081/, 'says where they are served');
    // The metrics port is not bound on the pod's address at all.
    const refused = await fetch(`http://${ip}:8081/metrics`, { signal: AbortSignal.timeout(5_000) }).then(
      (r) => `HTTP ${r.status}`,
      (err: Error & { cause?: { code?: string } }) => err.cause?.code ?? err.message,
    );
    assert.equal(refused, 'ECONNREFUSED');
    assert.match(
      (await metric('cluster_gateway_agent_healthy')).toString(),
      /^1$/,
      'inside the pod they answer',
    );
  });

  test('a rotated hub credential is picked up without a restart', async (t) => {
    const before = await readyAgentPod(spoke, addon);
    const container = (p: Pod) => p.status?.containerStatuses?.[0];
    const oldCert = (await spoke.get<KubeObject & { data: Record<string, string> }>(secretPath)).data[
      'tls.crt'
    ];
    const reloads = await metric('cluster_gateway_agent_credential_reloads_total{lease="hub"}');
    // OCM's registration agent issues a new certificate (new key, new CSR, approved by the manager,
    // signed by kube-controller-manager) when its Secret goes: the same path as an expiry-driven rotation.
    await spoke.delete(secretPath);
    const newCert = await waitFor(
      'a new certificate in the registration Secret',
      async () => {
        const s = await spoke.getOptional<KubeObject & { data?: Record<string, string> }>(secretPath);
        const cert = s?.data?.['tls.crt'];
        return cert && cert !== oldCert ? new X509Certificate(Buffer.from(cert, 'base64')) : undefined;
      },
      { timeoutMs: 90_000 },
    );
    const newNotAfter = Math.floor(Date.parse(newCert.validTo) / 1000);
    const issuedAt = Date.now();
    // The kubelet refreshes the mounted Secret on its next sync of the pod (syncFrequency 10 s here,
    // hack/localenv/kubelet.ts, plus the kubelet's jitter of up to half of it), then the agent reads it
    // before its next renewal (every 5-6 s): at most about 21 s. Measured: 5.3 s and 10.4 s.
    await waitFor(
      'the agent to use the new hub certificate',
      async () =>
        (await metric('cluster_gateway_agent_client_certificate_not_after_seconds{lease="hub"}')) ===
        newNotAfter,
      { timeoutMs: 30_000 },
    );
    t.diagnostic(
      `new certificate in use ${((Date.now() - issuedAt) / 1000).toFixed(1)} s after it reached the Secret`,
    );
    assert.ok((await metric('cluster_gateway_agent_credential_reloads_total{lease="hub"}')) > reloads);
    const afterReload = await renewTime(hub, hubLeasePath);
    await renewedAfter(hub, hubLeasePath, afterReload);
    const now = await readyAgentPod(spoke, addon);
    assert.equal(now.metadata.uid, before.metadata.uid, 'same pod');
    assert.equal(container(now)?.containerID, container(before)?.containerID, 'same container');
    assert.equal(container(now)?.restartCount, container(before)?.restartCount, 'no restart');
    assert.equal(await metric('cluster_gateway_agent_healthy'), 1);
  });

  test('an agent stopped on a cordoned node stops the hub heartbeat; its replacement resumes it once uncordoned', async (t) => {
    const old = await readyAgentPod(spoke, addon);
    const node = old.spec?.nodeName;
    assert.ok(node);
    // Nothing may start a replacement: the scheduler skips an unschedulable node (the only one).
    cordoned = node;
    await setUnschedulable(node, true);
    const oldPath = `/api/v1/namespaces/${installNamespace}/pods/${old.metadata.name}`;
    await spoke.delete(oldPath);
    // The pod object goes once the kubelet has stopped its container: from then on, no agent runs.
    await waitFor('the stopped agent pod to be gone', async () => !(await spoke.getOptional(oldPath)), {
      timeoutMs: 60_000,
    });
    const replacement = await waitFor(
      'the replacement pod, Pending: unschedulable',
      async () =>
        (await agentPods(spoke, addon)).find(
          (p) =>
            p.status?.phase === 'Pending' &&
            p.status.conditions?.some(
              (c) => c.type === 'PodScheduled' && c.status === 'False' && c.reason === 'Unschedulable',
            ),
        ),
      { timeoutMs: 30_000 },
    );
    const last = await renewTime(hub, hubLeasePath);
    assert.ok(last);
    await new Promise((r) => setTimeout(r, 15_000)); // three renewal intervals
    assert.equal(await renewTime(hub, hubLeasePath), last, 'no renewal while no agent runs');
    const pods = await agentPods(spoke, addon);
    assert.deepEqual(
      pods.map((p) => [p.metadata.name, p.spec?.nodeName, p.status?.phase]),
      [[replacement.metadata.name, undefined, 'Pending']],
      'only the replacement, still unscheduled',
    );

    const uncordonedAt = Date.now();
    await setUnschedulable(node, false);
    cordoned = undefined;
    await renewedAfter(hub, hubLeasePath, last, 60_000, 100);
    const seconds = (Date.now() - uncordonedAt) / 1000;
    t.diagnostic(`heartbeat resumed ${seconds.toFixed(1)} s after the uncordon`);
    // Measured: 1.3 s from the uncordon to the first renewal (scheduling, sandbox, container start,
    // Node's start with the image's compile cache, the first round); the bound is unchanged (10 s).
    assert.ok(seconds < 10, `heartbeat resumed ${seconds.toFixed(1)} s after the uncordon`);
    assert.equal(
      (await hub.get<Lease>(hubLeasePath)).spec?.holderIdentity,
      replacement.metadata.name,
      'renewed by the replacement',
    );
  });
});

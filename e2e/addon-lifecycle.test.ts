/**
 * The addon's life through the real path, watched from before the first
 * enable: the manager from its Deployment on the hub (hack/localenv/addon.ts,
 * addon-manager.ts) and the agents from the ManifestWork that OCM's work agent
 * applies, both pods of the environment's image run by the real kubelets of
 * the hub and of each managed cluster; OCM's real registration and work agents.
 *
 * A recorder watches every ManagedClusterAddOn of ours through `clusteradm
 * addon enable` on both clusters, disable/enable cycles on cluster2, an
 * agent killed while its node is stopped and restarted by its kubelet, the
 * manager's container killed and restarted by the hub's kubelet, a stop and
 * start of cluster1's kube-apiserver, a switch to OCM's Lease health mode and back
 * (a rollout of the manager's Deployment each), and install strategy
 * Placements (OCM's placement scheduler and addon manager); then asserts on
 * every status it saw and prints the timeline.
 *
 * The managed kube-apiserver and kubelet are the shared environment's (owned
 * by the global setup's supervisor, in another process): they are stopped
 * with SIGSTOP and started with SIGCONT, so the same process, ports and
 * supervision stay in place for the test files that follow. A frozen
 * apiserver accepts no request, like a stopped one (clients time out rather
 * than being refused); a frozen kubelet neither restarts a container nor
 * reports one dead, like a node that stopped. Containers are killed as the
 * host sees them: their processes, found through /proc.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type LocalAddon, managerSelector, startAddon } from '../hack/localenv/addon.ts';
import { managerNamespace, uninstallAddonManager } from '../hack/localenv/addon-manager.ts';
import { processes } from '../hack/localenv/host-changes.ts';
import { containerPids, type Pod, podReady, podsOf } from '../hack/localenv/pods.ts';
import { environmentPid } from '../hack/localenv/supervisor.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import { observeDeployment } from '../manager/addon/availability/observe.ts';
import { KubeClient, type KubeObject } from '../shared/kube/client.ts';
import { clusteradm } from './support/clusteradm.ts';
import { e2eStateDir, environmentState, hubClient } from './support/environment.ts';
import { kubectl } from './support/kubectl.ts';

const addon = 'cluster-gateway';
const clusters = ['cluster1', 'cluster2'] as const;
const api = '/apis/addon.open-cluster-management.io/v1alpha1';
const mcaPath = (c: string) => `${api}/namespaces/${c}/managedclusteraddons/${addon}`;
const workPath = (c: string) =>
  `/apis/work.open-cluster-management.io/v1/namespaces/${c}/manifestworks/addon-${addon}-deploy-0`;
const cmaPath = `${api}/clustermanagementaddons/${addon}`;
const webhookConfigPath = `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${addon}-addon-available`;
const agentNamespace = 'open-cluster-management-agent-addon';
const agentDeployment = `${agentNamespace}/${addon}-agent`;
const placementName = 'cluster-gateway-e2e';
const placementLabel = 'e2e.cluster-gateway.oam.dev/placement';
const placementPath = `/apis/cluster.open-cluster-management.io/v1beta1/namespaces/${managerNamespace}/placements/${placementName}`;

type Cond = { type: string; status: string; reason?: string; message?: string };
type Mca = {
  metadata: {
    name: string;
    namespace: string;
    resourceVersion?: string;
    ownerReferences?: { kind: string }[];
  };
  status?: { healthCheck?: { mode?: string }; conditions?: Cond[] };
};

interface Seen {
  at: number;
  cluster: string;
  event: 'ADDED' | 'MODIFIED' | 'DELETED';
  resourceVersion?: string;
  mode?: string;
  available?: Cond;
}

const started = Date.now();
const t = (at: number) => `${((at - started) / 1000).toFixed(1)}s`;
const seconds = (ms: number) => Number((ms / 1000).toFixed(1));

/**
 * Every ManagedClusterAddOn event of ours, from a watch opened before the first enable; a watch the
 * server ends is resumed from the last resourceVersion, so nothing between is missed.
 */
function record(client: KubeClient) {
  const seen: Seen[] = [];
  const marks: { at: number; label: string }[] = [];
  const stop = new AbortController();
  let resourceVersion = '';
  const done = (async () => {
    while (!stop.signal.aborted) {
      try {
        const rv = resourceVersion ? `&resourceVersion=${resourceVersion}` : '';
        for await (const ev of client.watch<Mca>(
          `${api}/managedclusteraddons?fieldSelector=metadata.name=${addon}${rv}`,
          stop.signal,
        )) {
          if (ev.object.metadata.resourceVersion) resourceVersion = ev.object.metadata.resourceVersion;
          if (ev.type !== 'ADDED' && ev.type !== 'MODIFIED' && ev.type !== 'DELETED') continue;
          const available = ev.object.status?.conditions?.find((c) => c.type === 'Available');
          seen.push({
            at: Date.now(),
            cluster: ev.object.metadata.namespace,
            event: ev.type,
            ...(ev.object.metadata.resourceVersion
              ? { resourceVersion: ev.object.metadata.resourceVersion }
              : {}),
            ...(ev.object.status?.healthCheck?.mode ? { mode: ev.object.status.healthCheck.mode } : {}),
            ...(available ? { available } : {}),
          });
        }
      } catch (err) {
        if (stop.signal.aborted) break;
        marks.push({ at: Date.now(), label: `watch resumed after: ${(err as Error).message}` });
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  })();
  const mark = (label: string) => {
    const at = Date.now();
    marks.push({ at, label });
    return at;
  };
  /**
   * Resolves once the recorder has seen `cluster`'s addon at `resourceVersion` (a state the test read
   * itself), and so every change before it: one watch delivers the changes of every namespace in order.
   */
  const waitSeen = (cluster: string, resourceVersion: string, timeoutMs = 10_000) =>
    waitFor(
      `the recorder to see ${cluster}'s addon at resourceVersion ${resourceVersion}`,
      () => seen.some((s) => s.cluster === cluster && s.resourceVersion === resourceVersion),
      { timeoutMs, intervalMs: 20 },
    );
  /** What `cluster` showed in [from, to): its events, in order. */
  const between = (cluster: string, from: number, to = Number.POSITIVE_INFINITY) =>
    seen.filter((s) => s.cluster === cluster && s.at >= from && s.at < to);
  /** A compact timeline: marks, and each change of a cluster's Available (or its deletion). */
  const timeline = () => {
    const rows: { at: number; line: string }[] = marks.map((m) => ({ at: m.at, line: `-- ${m.label}` }));
    const last = new Map<string, string>();
    for (const s of seen) {
      const state =
        s.event === 'DELETED'
          ? 'deleted'
          : s.available
            ? `${s.available.status}/${s.available.reason}${s.mode === 'Lease' ? ' (Lease mode)' : ''}`
            : 'no Available';
      if (last.get(s.cluster) === state) continue;
      last.set(s.cluster, state);
      rows.push({ at: s.at, line: `   ${s.cluster} ${state}` });
    }
    return rows
      .sort((a, b) => a.at - b.at)
      .map((r) => `${t(r.at).padStart(7)} ${r.line}`)
      .join('\n');
  };
  return {
    seen,
    mark,
    waitSeen,
    between,
    timeline,
    stop: async () => {
      stop.abort();
      await done;
    },
  };
}

describe('addon lifecycle: the Available a watcher sees, from enable to Lease mode', {
  concurrency: false,
}, () => {
  let hub: KubeClient;
  const spokes = new Map<string, KubeClient>();
  let local: LocalAddon;
  let recorder: ReturnType<typeof record>;
  let cmaExisted = false;
  let webhookExisted = false;
  /** Environment processes frozen by a test (SIGSTOP), to resume (SIGCONT) whatever happens. */
  const frozen = new Set<number>();
  const freeze = (pid: number) => {
    frozen.add(pid);
    process.kill(pid, 'SIGSTOP');
  };
  const thaw = (pid: number) => {
    process.kill(pid, 'SIGCONT');
    frozen.delete(pid);
  };

  const get = (c: string) => hub.getOptional<Mca>(mcaPath(c));
  const availableOf = (obj: Mca | undefined) => obj?.status?.conditions?.find((c) => c.type === 'Available');
  /**
   * Polls `c`'s addon until `want` holds, and returns when it was read so. It returns only once the
   * recorder has seen that same state too (its resourceVersion): a window of the recorder's events that
   * ends at a mark taken afterwards holds what this wait observed, however late the watch delivers it.
   */
  const waitAvailable = async (
    c: string,
    want: (a: Cond, obj: Mca) => boolean,
    what: string,
    timeoutMs = 30_000,
  ): Promise<number> => {
    let last: Cond | undefined;
    let observed: { at: number; resourceVersion: string };
    try {
      observed = await waitFor(
        `${c}: ${what}`,
        async () => {
          const obj = await get(c);
          const a = availableOf(obj);
          last = a;
          return obj && a && want(a, obj)
            ? { at: Date.now(), resourceVersion: obj.metadata.resourceVersion ?? '' }
            : undefined;
        },
        { timeoutMs, intervalMs: 100 },
      );
    } catch (err) {
      // What it showed instead is the first thing to know when this fails.
      const seen = last ? `${last.status}/${last.reason}: ${last.message}` : 'no Available';
      throw new Error(`${(err as Error).message}; it showed ${seen}`);
    }
    await recorder.waitSeen(c, observed.resourceVersion);
    return observed.at;
  };
  const agentAvailable = (a: Cond, obj: Mca) =>
    a.status === 'True' && a.reason === 'AgentAvailable' && obj.status?.healthCheck?.mode === 'Customized';
  const gone = (c: string, timeoutMs = 30_000) =>
    waitFor(
      `${c}: the ManagedClusterAddOn and its ManifestWork gone`,
      async () => {
        const [obj, work] = await Promise.all([get(c), hub.getOptional(workPath(c))]);
        return !obj && !work;
      },
      { timeoutMs, intervalMs: 100 },
    );
  const spoke = (c: string) => {
    const client = spokes.get(c);
    assert.ok(client, `a client of ${c}`);
    return client;
  };
  /** The agent pods of `c` (terminating ones included). */
  const agentPods = async (c: string) =>
    (await podsOf(spoke(c), agentNamespace)).filter((p) => p.metadata.name.startsWith(`${addon}-agent-`));
  /** The one Ready agent pod of `c`, and its container's id and host pids. */
  const runningAgent = async (c: string) => {
    const pods = (await agentPods(c)).filter(podReady);
    assert.equal(
      pods.length,
      1,
      `one Ready agent pod on ${c}: ${pods.map((p) => p.metadata.name).join(', ')}`,
    );
    return withContainer(pods[0] as Pod);
  };
  const withContainer = (pod: Pod) => {
    const status = pod.status?.containerStatuses?.[0];
    assert.ok(status?.containerID, `${pod.metadata.name} has a container`);
    const pids = containerPids(status.containerID);
    assert.ok(pids.length > 0, `the host sees the processes of ${pod.metadata.name}'s container`);
    return { pod, containerId: status.containerID, restartCount: status.restartCount, pids };
  };
  /** SIGKILL every process of a container, as the host sees them; returns once none is left. */
  const killContainer = async (containerId: string, pids: number[]) => {
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {} // gone with the container's init
    }
    await waitFor(
      'the killed container to have no process left',
      () => containerPids(containerId).length === 0,
      {
        timeoutMs: 10_000,
        intervalMs: 50,
      },
    );
  };
  /** An environment process (the global setup's supervisor's), from its pid file. */
  const envPid = (what: string, match: (args: string[]) => boolean) =>
    environmentPid(e2eStateDir, what, match);

  /**
   * The kube-apiserver test starts from a settled state. The agent restarted by the test before renews its
   * heartbeat before its readiness probe passes, and the work agent copies the Deployment's status to the
   * hub from its own cache every 10 s (OCM's work agent, --status-sync-interval): a hub-side 'available' can
   * be the value from before that restart, with 'unavailable' still in the work agent's cache, ready to be
   * reported once that test has frozen the apiserver (it was, in one CI run). So: the Deployment available on
   * cluster1 itself, and its feedback available on the hub, both without a break through one whole sync
   * period. Watched in the background from the end of the agent test, through the manager test (which
   * leaves cluster1's agent alone), so that the wait mostly overlaps it.
   */
  let feedbackSettling: ReturnType<typeof settleFeedback> | undefined;
  function settleFeedback() {
    const [deployNamespace, deployName] = agentDeployment.split('/') as [string, string];
    const statusSyncMs = 10_000;
    let availableSince: number | undefined;
    let stopped = false;
    const availableOnCluster1 = async () => {
      const d = await spoke('cluster1').get<{
        metadata: { generation?: number };
        spec?: { replicas?: number };
        status?: { observedGeneration?: number; availableReplicas?: number; updatedReplicas?: number };
      }>(`/apis/apps/v1/namespaces/${deployNamespace}/deployments/${deployName}`);
      const want = d.spec?.replicas ?? 1;
      return (
        d.status?.observedGeneration === d.metadata.generation &&
        d.status?.availableReplicas === want &&
        d.status?.updatedReplicas === want
      );
    };
    const availableInFeedback = async () => {
      const work = await hub.getOptional<NonNullable<Parameters<typeof observeDeployment>[0]>>(
        workPath('cluster1'),
      );
      return observeDeployment(work, deployNamespace, deployName).state === 'available';
    };
    void (async () => {
      while (!stopped) {
        const both = await Promise.all([availableOnCluster1(), availableInFeedback()]).then(
          ([onCluster1, inFeedback]) => onCluster1 && inFeedback,
          () => false,
        );
        if (stopped) break;
        if (both) availableSince ??= Date.now();
        else availableSince = undefined;
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
    return {
      settled: () =>
        waitFor(
          "cluster1's agent Deployment available on cluster1 and in the ManifestWork's feedback for a whole status sync period",
          () => availableSince !== undefined && Date.now() - availableSince > statusSyncMs + 1_000,
          { timeoutMs: 60_000, intervalMs: 200 },
        ),
      /** Ends the polling (before cluster1's kube-apiserver is frozen: a request to it would hang). */
      stop: () => {
        stopped = true;
      },
    };
  }

  before(async () => {
    hub = await hubClient();
    const env = environmentState();
    const image = env.image;
    assert.ok(image, 'the e2e environment runs real nodes and their image (e2e/setup.ts: nodes: true)');
    for (const c of env.managed.filter((m) => clusters.includes(m.name as never))) {
      spokes.set(c.name, await KubeClient.fromKubeconfig(c.kubeconfig));
    }
    // From a clean start: no addon of ours on either cluster.
    for (const c of clusters) await hub.delete(mcaPath(c));
    for (const c of clusters) await gone(c, 60_000);
    cmaExisted = !!(await hub.getOptional(cmaPath));
    webhookExisted = !!(await hub.getOptional(webhookConfigPath));

    recorder = record(hub);
    recorder.mark(`recorder watching; installing the manager Deployment (image ${image})`);
    local = await startAddon(hub, { image });
    // The manager is ready once it has registered its LeaseNotFound webhook (Customized mode).
    await waitFor('the manager to register its webhook', () => hub.getOptional(webhookConfigPath), {
      timeoutMs: 60_000,
    });
  });

  after(async () => {
    feedbackSettling?.stop();
    for (const pid of frozen) thaw(pid);
    await recorder?.stop();
    // Leave the environment as found: no Placement deciding our addon (OCM would enable it again), the
    // addon disabled (agents removed by the work agents), no agent pod left on either node, the manager's
    // objects and pods gone from the hub. Every step runs whatever failed before it, and says what failed.
    const attempt = async (what: string, step: () => Promise<unknown>) =>
      step().catch((err: Error) => console.log(`[lifecycle] cleanup: ${what}: ${err.message}`));
    if (hub) {
      await attempt('the Placement', async () => {
        await hub.delete(placementPath);
        await hub.delete(
          `/apis/cluster.open-cluster-management.io/v1beta2/namespaces/${managerNamespace}/managedclustersetbindings/global`,
        );
        for (const c of clusters) {
          await hub.mergePatch(`/apis/cluster.open-cluster-management.io/v1/managedclusters/${c}`, {
            metadata: { labels: { [placementLabel]: null } },
          });
        }
      });
    }
    await attempt('addon disable', () =>
      clusteradm('addon', 'disable', '--names', addon, '--clusters', clusters.join(',')),
    );
    for (const c of clusters) await attempt(`${c} addon gone`, () => gone(c, 60_000));
    for (const c of clusters) {
      if (!spokes.has(c)) continue;
      await attempt(`${c} agent pods`, () =>
        waitFor(`${c}: no agent pod left`, async () => (await agentPods(c)).length === 0, {
          timeoutMs: 60_000,
        }),
      );
    }
    if (hub) await attempt('the manager', () => (local ? local.stop() : uninstallAddonManager(hub)));
    if (hub) {
      if (!webhookExisted) await hub.delete(webhookConfigPath);
      if (!cmaExisted) await hub.delete(cmaPath);
    }
    hub?.close();
    for (const c of spokes.values()) c.close();
  });

  test('clusteradm addon enable brings both ManagedClusterAddOns to Available True within 30 s', async () => {
    const enabledAt = recorder.mark(`clusteradm addon enable --clusters ${clusters.join(',')}`);
    await clusteradm('addon', 'enable', '--names', addon, '--clusters', clusters.join(','));
    const times = await Promise.all(clusters.map((c) => waitAvailable(c, agentAvailable, 'Available True')));
    const took = times.map((at) => seconds(at - enabledAt));
    console.log(
      `[lifecycle] enable -> Available True: ${clusters.map((c, i) => `${c} ${took[i]} s`).join(', ')}`,
    );
    assert.ok(Math.max(...took) < 30, `both Available True within 30 s (${took.join(', ')} s)`);
    const table = await kubectl(environmentState().hub.kubeconfig, 'get', 'managedclusteraddons', '-A');
    console.log(table.trimEnd());
    for (const c of clusters) assert.match(table, new RegExp(`^${c}\\s+${addon}\\s+True\\b`, 'm'));
  });

  // Every enable makes OCM's registration agent ask for a new certificate, and it stops asking while 10 CSRs
  // of the addon exist on the hub (the hub deletes issued ones after an hour): without the manager deleting the
  // CSRs of a disabled addon, the 10th cycle left the agent without a credential (ClusterCertificateRotated
  // "Stop creating csr since there are too many csr created already on hub").
  const cycles = 20;
  test(`${cycles} disable/enable cycles on cluster2: each back to Available True, each disable cleaned up`, async () => {
    const c = 'cluster2';
    const from = recorder.mark(`${cycles} disable/enable cycles on cluster2`);
    const durations: number[] = [];
    for (let i = 0; i < cycles; i++) {
      const cycleStart = Date.now();
      await clusteradm('addon', 'disable', '--names', addon, '--clusters', c);
      await gone(c);
      const enabledAt = Date.now();
      await clusteradm('addon', 'enable', '--names', addon, '--clusters', c);
      // 60 s, not 30: a cycle waits on OCM's 10 s status feedback and, once in about 60 cycles, took 33 s.
      await waitAvailable(c, agentAvailable, `Available True (cycle ${i + 1})`, 60_000);
      durations.push(seconds(Date.now() - cycleStart));
      if (i === 0) console.log(`[lifecycle] cycle 1: re-enable -> True ${seconds(Date.now() - enabledAt)} s`);
    }
    // The last cycle's wait returned once the recorder had seen its Available True: nothing asserted below
    // can arrive after this mark.
    const to = recorder.mark('cycles done');
    const csrs = await hub.list(
      `/apis/certificates.k8s.io/v1/certificatesigningrequests?labelSelector=${encodeURIComponent(
        `open-cluster-management.io/cluster-name=${c},open-cluster-management.io/addon-name=${addon}`,
      )}`,
    );
    console.log(
      `[lifecycle] CSRs of cluster2's addon on the hub after ${cycles} cycles: ${csrs.items.length}`,
    );
    assert.ok(csrs.items.length < 10, `the CSRs of disabled addons are deleted (${csrs.items.length} left)`);
    console.log(`[lifecycle] cycle durations (s): ${durations.join(' ')}`);
    const events = recorder.between(c, from, to);
    assert.equal(
      events.filter((s) => s.event === 'DELETED').length,
      cycles,
      'every disable seen as a deletion',
    );
    // After each deletion, the recreated addon reaches True again.
    let recovered = 0;
    let sinceDelete = false;
    for (const s of events) {
      if (s.event === 'DELETED') sinceDelete = true;
      else if (sinceDelete && s.available?.status === 'True' && s.available.reason === 'AgentAvailable') {
        recovered++;
        sinceDelete = false;
      }
    }
    assert.equal(recovered, cycles, 'every re-enable seen reaching Available True');
    // cluster1 was never touched by cluster2's cycles.
    assert.ok(recorder.between('cluster1', from, to).every((s) => s.available?.status === 'True'));
  });

  test("a dead agent (its node stopped, its process killed) is Available False naming it within 15 s; True within 10 s of the kubelet's restart", async () => {
    const c = 'cluster1';
    const agent = await runningAgent(c);
    // The node stops first (its kubelet frozen): nothing restarts the agent, and nothing reports it dead, so
    // its Deployment still counts it available and only the missing heartbeat can tell.
    const kubelet = envPid(
      `${c}'s kubelet`,
      (args) => !!args[0]?.endsWith('kubelet') && args.includes(`--hostname-override=${c}-node`),
    );
    freeze(kubelet);
    const killedAt = recorder.mark(
      `${c}'s kubelet stopped (SIGSTOP pid ${kubelet}); agent container killed (SIGKILL pids ${agent.pids.join(' ')})`,
    );
    let falseAt: number;
    try {
      await killContainer(agent.containerId, agent.pids);
      falseAt = await waitAvailable(
        c,
        (a) => a.status === 'False' && !!a.message?.includes(agentDeployment),
        'Available False naming the agent',
        20_000,
      );
    } finally {
      thaw(kubelet);
    }
    recorder.mark(`${c}'s kubelet started again (SIGCONT pid ${kubelet})`);
    // The kubelet restarts the dead container in the same pod: "its restart" is the moment the new agent
    // process runs on the host (its command line names the cluster), not the moment the node came back.
    const isAgent = (args: string[]) =>
      args.includes('/app/agent/main.ts') && args.includes(`--cluster-name=${c}`);
    const restarted = await waitFor(
      `the kubelet to restart the agent of ${c}`,
      () => processes().find((p) => isAgent(p.args) && !agent.pids.includes(p.pid)),
      { timeoutMs: 60_000, intervalMs: 50 },
    );
    const restartedAt = recorder.mark(`agent of ${c} restarted by its kubelet (pid ${restarted.pid})`);
    const trueAt = await waitAvailable(c, agentAvailable, 'Available True again', 20_000);
    const pod = await spoke(c).get<Pod>(
      `/api/v1/namespaces/${agentNamespace}/pods/${agent.pod.metadata.name}`,
    );
    assert.ok(
      (pod.status?.containerStatuses?.[0]?.restartCount ?? 0) > agent.restartCount,
      'the same pod, its container restarted',
    );
    const down = seconds(falseAt - killedAt);
    const up = seconds(trueAt - restartedAt);
    const reason = recorder
      .between(c, killedAt, restartedAt)
      .find((s) => s.available?.status === 'False')?.available;
    console.log(`[lifecycle] agent killed -> False (${reason?.reason}) ${down} s; restarted -> True ${up} s`);
    assert.ok(down <= 15, `False within 15 s of the kill (${down} s)`);
    assert.ok(up <= 10, `True within 10 s of the restart (${up} s)`);
    assert.equal(reason?.reason, 'HeartbeatStale');
    // The kube-apiserver test needs cluster1 settled after this restart: that runs meanwhile.
    feedbackSettling = settleFeedback();
  });

  test('the manager killed and restarted by its kubelet: no status flaps, and it manages again', async () => {
    const pods = (await podsOf(hub, managerNamespace, managerSelector)).filter(podReady);
    assert.equal(pods.length, 1, 'the manager runs from its Deployment, one pod');
    const manager = withContainer(pods[0] as Pod);
    const podPath = `/api/v1/namespaces/${managerNamespace}/pods/${manager.pod.metadata.name}`;
    const killedAt = recorder.mark(
      `manager container killed (SIGKILL pids ${manager.pids.join(' ')}); the hub's kubelet restarts it`,
    );
    await killContainer(manager.containerId, manager.pids);
    const restarted = await waitFor(
      "the hub's kubelet to restart the manager's container, Ready",
      async () => {
        const pod = await hub.get<Pod>(podPath);
        const status = pod.status?.containerStatuses?.[0];
        return status && status.restartCount > manager.restartCount && status.ready ? status : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    assert.notEqual(restarted.containerID, manager.containerId);
    recorder.mark(`manager restarted (container ${restarted.containerID?.slice(-12)}, ready)`);
    // It manages again: a new enable on cluster2 (after a disable it must clean up) reaches True.
    await clusteradm('addon', 'disable', '--names', addon, '--clusters', 'cluster2');
    await gone('cluster2', 40_000);
    await clusteradm('addon', 'enable', '--names', addon, '--clusters', 'cluster2');
    const trueAt = await waitAvailable('cluster2', agentAvailable, 'Available True (new manager)', 40_000);
    console.log(
      `[lifecycle] manager killed -> a fresh enable Available True ${seconds(trueAt - killedAt)} s later`,
    );
    const flaps = recorder.between('cluster1', killedAt).filter((s) => s.available?.status !== 'True');
    assert.deepEqual(flaps, [], "cluster1's Available never left True while the manager was down");
  });

  test("cluster1's kube-apiserver stopped: Available False with its cause; started: True again", async () => {
    // Start from a settled state (feedbackSettling): begun when the agent test before came back, it ran
    // while the manager test did.
    feedbackSettling ??= settleFeedback();
    await feedbackSettling.settled();
    feedbackSettling.stop();
    const pid = envPid(
      "cluster1's kube-apiserver",
      (args) => !!args[0]?.endsWith('kube-apiserver') && args.includes('--etcd-prefix=/cluster1'),
    );
    const stoppedAt = recorder.mark(`cluster1 kube-apiserver stopped (SIGSTOP pid ${pid})`);
    freeze(pid);
    let falseAt: number;
    try {
      falseAt = await waitAvailable('cluster1', (a) => a.status === 'False', 'Available False', 40_000);
    } finally {
      thaw(pid);
    }
    const startedAt = recorder.mark(`cluster1 kube-apiserver started (SIGCONT pid ${pid})`);
    await waitFor('cluster1 kube-apiserver /readyz', async () => {
      await spoke('cluster1').request('GET', '/readyz');
      return true;
    });
    const trueAt = await waitAvailable('cluster1', agentAvailable, 'Available True again', 40_000);
    const cause = recorder
      .between('cluster1', stoppedAt, startedAt)
      .find((s) => s.available?.status === 'False');
    console.log(
      `[lifecycle] apiserver stopped -> False (${cause?.available?.reason}: ${cause?.available?.message}) ${seconds(falseAt - stoppedAt)} s; started -> True ${seconds(trueAt - startedAt)} s`,
    );
    assert.ok(cause?.available?.message, 'the False names its cause');
    // Whichever is seen first: the gateway's probe failing, or the agent skipping its heartbeat while its
    // kube-apiserver's /readyz fails. Never a reason that blames the agent's Deployment or the work.
    assert.match(cause?.available?.reason ?? '', /^(ClusterUnreachableFromGateway|HeartbeatStale)$/);
  });

  test("Lease mode (--health-mode=Lease): the registration agent reports LeaseUpdated from the agent's spoke Lease", async () => {
    const switchedAt = recorder.mark('manager Deployment: --health-mode=Lease (a rollout)');
    await local.reinstall({ args: ['--health-mode=Lease'] });
    const times = await Promise.all(
      clusters.map((c) =>
        waitAvailable(
          c,
          (a, obj) =>
            obj.status?.healthCheck?.mode === 'Lease' &&
            a.status === 'True' &&
            a.reason === 'ManagedClusterAddOnLeaseUpdated',
          'Available True / ManagedClusterAddOnLeaseUpdated',
          90_000,
        ),
      ),
    );
    console.log(
      `[lifecycle] Lease mode -> LeaseUpdated: ${clusters.map((c, i) => `${c} ${seconds((times[i] ?? 0) - switchedAt)} s`).join(', ')}`,
    );
    // Until OCM's first Lease verdict, the manager's last verdict stays: never a status without Available.
    for (const c of clusters) {
      const bare = recorder.between(c, switchedAt).filter((s) => s.event !== 'DELETED' && !s.available);
      assert.deepEqual(bare, [], `${c}: an Available all along the switch to Lease mode`);
    }
    const restoredAt = recorder.mark('manager Deployment: Customized mode again (a rollout)');
    await local.reinstall();
    await Promise.all(
      clusters.map((c) => waitAvailable(c, agentAvailable, 'Customized, Available True', 60_000)),
    );
    console.log(`[lifecycle] back to Customized in ${seconds(Date.now() - restoredAt)} s`);
  });

  test('install strategy Placements: OCM adds and removes the addons its Placement decides, the manager follows', async () => {
    const clusterPath = (c: string) => `/apis/cluster.open-cluster-management.io/v1/managedclusters/${c}`;
    const label = (c: string, value: string | null) =>
      hub.mergePatch(clusterPath(c), { metadata: { labels: { [placementLabel]: value } } });
    await label('cluster2', 'in');
    await hub.apply(
      `/apis/cluster.open-cluster-management.io/v1beta2/namespaces/${managerNamespace}/managedclustersetbindings/global`,
      {
        apiVersion: 'cluster.open-cluster-management.io/v1beta2',
        kind: 'ManagedClusterSetBinding',
        metadata: { name: 'global', namespace: managerNamespace },
        spec: { clusterSet: 'global' },
      },
      'e2e',
    );
    await hub.apply(
      placementPath,
      {
        apiVersion: 'cluster.open-cluster-management.io/v1beta1',
        kind: 'Placement',
        metadata: { name: placementName, namespace: managerNamespace },
        spec: {
          clusterSets: ['global'],
          predicates: [
            { requiredClusterSelector: { labelSelector: { matchLabels: { [placementLabel]: 'in' } } } },
          ],
        },
      },
      'e2e',
    );
    const switchedAt = recorder.mark(
      `manager Deployment: --install-placements=${managerNamespace}/${placementName}`,
    );
    await local.reinstall({ args: [`--install-placements=${managerNamespace}/${placementName}`] });
    // cluster1 is not in the Placement: OCM deletes its addon, and the manager its ManifestWork.
    await gone('cluster1', 60_000);
    const removedAt = Date.now();
    const stayed = await get('cluster2');
    assert.ok(stayed, "cluster2's addon, in the Placement, stays");
    await waitAvailable('cluster2', agentAvailable, 'Available True (in the Placement)');
    // cluster1 joins the Placement: OCM creates its addon, and the manager deploys it as after an enable.
    const joinedAt = recorder.mark('cluster1 labelled into the Placement');
    await label('cluster1', 'in');
    const trueAt = await waitAvailable(
      'cluster1',
      agentAvailable,
      'Available True (joined the Placement)',
      60_000,
    );
    const created = await get('cluster1');
    assert.ok(
      created?.metadata.ownerReferences?.some((o) => o.kind === 'ClusterManagementAddOn'),
      "cluster1's addon was created by OCM's addon manager for the Placement",
    );
    console.log(
      `[lifecycle] Placements: cluster1 out -> addon removed ${seconds(removedAt - switchedAt)} s; in -> Available True ${seconds(trueAt - joinedAt)} s`,
    );
    recorder.mark('manager Deployment: installStrategy Manual again');
    await local.reinstall();
    // The rolled manager declares it: from then on OCM creates no addon for the Placement.
    await waitFor(
      'the ClusterManagementAddOn back to installStrategy Manual',
      async () =>
        (await hub.get<KubeObject & { spec?: { installStrategy?: { type?: string } } }>(cmaPath)).spec
          ?.installStrategy?.type === 'Manual',
      { timeoutMs: 60_000 },
    );
  });

  test('every status the recorder saw: never LeaseNotFound, always a reason and message; the timeline', () => {
    recorder.mark('end');
    console.log(`[lifecycle] timeline (${recorder.seen.length} events):\n${recorder.timeline()}`);
    assert.ok(recorder.seen.length > 0);
    const notFound = recorder.seen.filter((s) => s.available?.reason === 'ManagedClusterAddOnLeaseNotFound');
    assert.deepEqual(notFound, [], 'never ManagedClusterAddOnLeaseNotFound');
    const bare = recorder.seen.filter((s) => s.available && !(s.available.reason && s.available.message));
    assert.deepEqual(bare, [], 'every Available has a reason and a message');
  });
});

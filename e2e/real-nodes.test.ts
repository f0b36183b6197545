/**
 * What users install, run as they run it: an environment of its own whose hub and managed clusters each
 * have a real node (kubelet, containerd, runc; hack/localenv/node.ts), the project's image built from
 * the Dockerfile (hack/image/build.sh), `helm install` of the chart with nothing but the image and log
 * levels set, `clusteradm addon enable`. The manager, the gateway replicas and the agents are pods of
 * that image, started by kubelets with the chart's and the ManifestWork's securityContext and probes;
 * the APIService and the webhook reach them through their Services' endpoints.
 *
 * Then, as an operator would: a gateway pod and an agent pod deleted (their ReplicaSets replace them and
 * the addon stays Available), `kubectl logs -f` and `kubectl exec` through the gateway into real
 * containers on a cluster reached directly and on one reached only through its agent's tunnel, `helm
 * upgrade` to another image tag (a real rollout of every Deployment), `helm uninstall`, and the
 * environment stopped: nothing it started or changed remains on the machine.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { binaryPath } from '../hack/localenv/binaries.ts';
import {
  chartDir,
  defaultNamespace,
  defaultRelease,
  installChart,
  nodeChartValues,
} from '../hack/localenv/chart.ts';
import { type Environment, startEnvironment } from '../hack/localenv/environment.ts';
import { hostFootprint } from '../hack/localenv/host-changes.ts';
import { writeKubeconfig } from '../hack/localenv/kubeconfig.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import type { KubeClient, KubeObject } from '../shared/kube/client.ts';
import { e2eStateDir } from './support/environment.ts';
import { kubectl, kubectlResult } from './support/kubectl.ts';
import { recordWatch, type WatchRecorder } from './support/watch-recorder.ts';

const stateDir = `${e2eStateDir}-nodes`;
const addon = 'cluster-gateway';
const clusters = ['cluster1', 'cluster2'] as const;
/** cluster2 is served through its agent's tunnel only (no credential on the hub, NoCredential trust). */
const tunnelCluster = 'cluster2';
const agentNamespace = 'open-cluster-management-agent-addon';
const addonApi = '/apis/addon.open-cluster-management.io/v1alpha1';
const mcaPath = (c: string) => `${addonApi}/namespaces/${c}/managedclusteraddons/${addon}`;
const apiServicePath = '/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.cluster.core.oam.dev';
const proxyPrefix = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways';
const workspace = 'cg-real-nodes';

type Condition = { type: string; status: string; reason?: string; message?: string };
type Mca = KubeObject & { status?: { conditions?: Condition[] } };
type Pod = KubeObject & {
  metadata: { name: string; namespace: string; labels?: Record<string, string> };
  spec: {
    nodeName?: string;
    securityContext?: { runAsUser?: number; runAsNonRoot?: boolean };
    containers: {
      name: string;
      image: string;
      readinessProbe?: unknown;
      livenessProbe?: unknown;
      securityContext?: {
        readOnlyRootFilesystem?: boolean;
        runAsUser?: number;
        capabilities?: { drop?: string[] };
      };
    }[];
  };
  status?: {
    phase?: string;
    containerStatuses?: {
      name: string;
      ready: boolean;
      restartCount: number;
      imageID?: string;
      image?: string;
    }[];
  };
};
type List<T> = { items: T[] };

const availableOf = (obj: Mca | undefined) => obj?.status?.conditions?.find((c) => c.type === 'Available');

describe('real nodes: the image run by real kubelets, installed with helm as users do', {
  concurrency: false,
}, () => {
  let env: Environment;
  let hub: KubeClient;
  let recorder: WatchRecorder<Mca>;
  const footprintBefore = hostFootprint(stateDir);
  const client = (c: string) => (c === 'hub' ? env.hub : env.managed.find((m) => m.name === c)!).client;
  const kubeconfigOf = (c: string) =>
    (c === 'hub' ? env.hub : env.managed.find((m) => m.name === c)!).kubeconfig;
  const podsOf = async (c: string, namespace: string, selector = '') =>
    (
      await client(c).get<List<Pod>>(
        `/api/v1/namespaces/${namespace}/pods${selector ? `?labelSelector=${encodeURIComponent(selector)}` : ''}`,
      )
    ).items;
  const running = (p: Pod) =>
    p.status?.phase === 'Running' &&
    !p.metadata.deletionTimestamp &&
    (p.status.containerStatuses ?? []).every((s) => s.ready);
  const waitAvailable = (c: string, timeoutMs = 90_000) =>
    waitFor(
      `${c}: addon Available True`,
      async () => availableOf(await hub.getOptional<Mca>(mcaPath(c)))?.status === 'True',
      { timeoutMs, intervalMs: 250 },
    );
  /** A kubeconfig whose every request goes to `cluster` through the hub's aggregator and the gateway. */
  const proxyKubeconfig = (cluster: string) =>
    writeKubeconfig(path.join(stateDir, `proxy-${cluster}.kubeconfig`), {
      name: 'hub',
      server: `${env.hub.server}${proxyPrefix}/${cluster}/proxy`,
      caCert: env.hub.pki.ca.cert,
      client: env.hub.pki.admin,
    });

  before(async () => {
    env = await startEnvironment({
      stateDir,
      managedClusters: [...clusters],
      gateway: false,
      clusterCredentials: true,
      nodes: true,
      log: (line) => process.stderr.write(`[real-nodes env] ${line}\n`),
    });
    hub = env.hub.client;
    // cluster2 is reached through its tunnel only: no credential of the environment's for it, and its
    // agent configured for the no-credential trust model (the hub caller's identity, impersonated there).
    await hub.delete(`/api/v1/namespaces/open-cluster-management-credentials/secrets/${tunnelCluster}`);
    // Every Available the addons show from now on, with when it was seen.
    recorder = recordWatch<Mca>(hub, `${addonApi}/managedclusteraddons?fieldSelector=metadata.name=${addon}`);
    await recorder.ready;
  });

  after(async () => {
    await recorder?.stop();
    await env?.stop();
  });

  test('helm install: the manager and two gateway replicas run as pods of the image built here, their probes passing', async () => {
    const started = Date.now();
    await installChart({
      hub: env.hub,
      managed: env.managed,
      stateDir,
      images: env.images!,
      log: (line) => process.stderr.write(`[real-nodes] ${line}\n`),
    });
    const hubPods = await waitFor(
      'the manager and 2 gateway pods Running and Ready on the hub',
      async () => {
        const pods = (await podsOf('hub', defaultNamespace)).filter(running);
        return pods.length === 3 ? pods : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    console.log(
      `[real-nodes] helm install -> manager and gateways Ready in ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
    for (const pod of hubPods) {
      const container = pod.spec.containers[0]!;
      assert.equal(container.image, env.images!.image, `${pod.metadata.name} runs the image built here`);
      assert.equal(pod.spec.nodeName, 'hub-node');
      assert.ok(container.readinessProbe, `${pod.metadata.name} has a readiness probe, and it passes`);
      assert.equal(container.securityContext?.readOnlyRootFilesystem, true);
      assert.deepEqual(container.securityContext?.capabilities?.drop, ['ALL']);
      // The process really runs as 65532 in a read-only root filesystem.
      const out = await kubectl(
        kubeconfigOf('hub'),
        '-n',
        defaultNamespace,
        'exec',
        pod.metadata.name,
        '--',
        'node',
        '-e',
        "try{require('fs').writeFileSync('/app/x','')}catch(e){console.log(process.getuid(),e.code)}",
      );
      assert.equal(out.trim(), '65532 EROFS', `${pod.metadata.name}: uid and a read-only root`);
    }
    await waitFor(
      'the APIService Available through the gateway Service endpoints',
      async () =>
        (
          await hub.get<KubeObject & { status?: { conditions?: Condition[] } }>(apiServicePath)
        ).status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True'),
      { timeoutMs: 90_000, intervalMs: 500 },
    );
  });

  test('clusteradm addon enable: an agent pod on each cluster, Available True; cluster2 through its tunnel only', async () => {
    const clusteradm = (...args: string[]) =>
      execFileSync(binaryPath('clusteradm'), [...args, `--kubeconfig=${kubeconfigOf('hub')}`], {
        timeout: 60_000,
      });
    await hub.apply(
      `${addonApi}/namespaces/${defaultNamespace}/addondeploymentconfigs/${tunnelCluster}-tunnel`,
      {
        apiVersion: 'addon.open-cluster-management.io/v1alpha1',
        kind: 'AddOnDeploymentConfig',
        metadata: { name: `${tunnelCluster}-tunnel`, namespace: defaultNamespace },
        spec: { customizedVariables: [{ name: 'TUNNEL_TRUST_MODEL', value: 'NoCredential' }] },
      },
      'e2e',
    );
    clusteradm('addon', 'enable', '--names', addon, '--clusters', clusters.join(','));
    await hub.mergePatch(mcaPath(tunnelCluster), {
      spec: {
        configs: [
          {
            group: 'addon.open-cluster-management.io',
            resource: 'addondeploymentconfigs',
            namespace: defaultNamespace,
            name: `${tunnelCluster}-tunnel`,
          },
        ],
      },
    });
    for (const c of clusters) await waitAvailable(c);
    for (const c of clusters) {
      // Available may come first: a fresh heartbeat outranks a Deployment count that lags readiness.
      const agent = await waitFor(
        `${c}: an agent pod Running and Ready`,
        async () => (await podsOf(c, agentNamespace)).find(running),
        { timeoutMs: 60_000, intervalMs: 250 },
      );
      assert.equal(agent.spec.containers[0]!.image, env.images!.image);
      assert.equal(agent.spec.nodeName, `${c}-node`);
    }
    const gateway = await waitFor(
      `ClusterGateway ${tunnelCluster} served through its tunnel`,
      async () => {
        const cg = await hub.getOptional<
          KubeObject & { spec?: { access?: { endpoint?: { type?: string } } } }
        >(`${proxyPrefix}/${tunnelCluster}`);
        return cg?.spec?.access?.endpoint?.type === 'ClusterProxy' ? cg : undefined;
      },
      { timeoutMs: 60_000 },
    );
    assert.ok(gateway);
    for (const c of ['hub', ...clusters]) {
      const pods = await kubectl(kubeconfigOf(c), 'get', 'pods', '-A', '-o', 'wide');
      console.log(`$ kubectl get pods -A -o wide (${c})\n${pods.trimEnd()}`);
    }
  });

  test('kubectl logs -f and exec through the gateway reach real containers, directly and through the tunnel', async () => {
    for (const c of clusters) {
      await client(c).apply(
        `/api/v1/namespaces/${workspace}`,
        { apiVersion: 'v1', kind: 'Namespace', metadata: { name: workspace } },
        'e2e',
      );
      await waitFor(`${c}: the default ServiceAccount of ${workspace}`, () =>
        client(c).getOptional(`/api/v1/namespaces/${workspace}/serviceaccounts/default`),
      );
      await client(c).apply(
        `/api/v1/namespaces/${workspace}/pods/ticker`,
        {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: 'ticker', namespace: workspace },
          spec: {
            securityContext: { runAsUser: 65532, runAsNonRoot: true },
            containers: [
              {
                name: 'ticker',
                image: env.images!.image,
                imagePullPolicy: 'Never',
                command: ['node', '-e', "let n=0;setInterval(()=>console.log('tick '+(++n)),300)"],
                securityContext: {
                  readOnlyRootFilesystem: true,
                  allowPrivilegeEscalation: false,
                  capabilities: { drop: ['ALL'] },
                },
              },
            ],
          },
        },
        'e2e',
      );
    }
    for (const c of clusters) {
      await waitFor(`${c}: pod ticker Running`, async () => (await podsOf(c, workspace)).some(running), {
        timeoutMs: 60_000,
      });
      const proxied = proxyKubeconfig(c);
      // logs -f: lines keep arriving while it is held; kubectl is stopped after 3 s.
      const logs = await kubectlResult(proxied, ['-n', workspace, 'logs', '-f', 'ticker'], {
        timeoutMs: 3000,
      });
      const ticks = logs.stdout
        .split('\n')
        .filter((l) => l.startsWith('tick '))
        .map((l) => Number(l.slice(5)));
      assert.ok(
        ticks.length >= 5,
        `${c}: logs -f streamed ${ticks.length} lines in 3 s (${logs.stderr.trim()})`,
      );
      assert.deepEqual(
        ticks,
        ticks.map((_, i) => ticks[0]! + i),
        `${c}: in order, none missing`,
      );
      // exec with stdin, over the default protocol (WebSocket) and SPDY.
      for (const spdy of [false, true]) {
        const out = await kubectlResult(
          proxied,
          [
            '-n',
            workspace,
            'exec',
            '-i',
            'ticker',
            '--',
            'node',
            '-e',
            "process.stdin.on('data',d=>process.stdout.write('echo:'+d))",
          ],
          { input: `hello ${c}\n`, ...(spdy ? { env: { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'false' } } : {}) },
        );
        assert.equal(out.code, 0, `${c} exec (${spdy ? 'SPDY' : 'WebSocket'}): ${out.stderr}`);
        assert.equal(out.stdout, `echo:hello ${c}\n`);
      }
    }
  });

  test('a gateway pod deleted: its ReplicaSet replaces it and the addon never leaves Available', async () => {
    const [victim] = (await podsOf('hub', defaultNamespace, 'app.kubernetes.io/component=gateway')).filter(
      running,
    );
    assert.ok(victim, 'a running gateway pod');
    const from = Date.now();
    await kubectl(
      kubeconfigOf('hub'),
      '-n',
      defaultNamespace,
      'delete',
      'pod',
      victim.metadata.name,
      '--wait=false',
    );
    const replacement = await waitFor(
      'a new gateway pod Running and Ready',
      async () => {
        const pods = (await podsOf('hub', defaultNamespace, 'app.kubernetes.io/component=gateway')).filter(
          running,
        );
        return pods.length === 2 && pods.every((p) => p.metadata.name !== victim.metadata.name)
          ? pods
          : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    console.log(
      `[real-nodes] gateway pod deleted -> 2 Ready again in ${((Date.now() - from) / 1000).toFixed(1)} s`,
    );
    assert.equal(replacement.length, 2);
    // Requests through the aggregator still succeed on every cluster.
    for (const c of clusters) await hub.get(`${proxyPrefix}/${c}/proxy/api/v1/namespaces/${workspace}`);
    const notAvailable = recorder.events.filter(
      (e) => e.at >= from && availableOf(e.object)?.status !== 'True',
    );
    assert.deepEqual(
      notAvailable.map((e) => `${e.object.metadata?.namespace}: ${availableOf(e.object)?.reason}`),
      [],
      'no Available other than True while a gateway replica was replaced',
    );
  });

  test('an agent pod deleted: replaced on its cluster, Available True again', async () => {
    const c = 'cluster1';
    const [victim] = (await podsOf(c, agentNamespace)).filter(running);
    assert.ok(victim);
    const from = Date.now();
    await kubectl(
      kubeconfigOf(c),
      '-n',
      agentNamespace,
      'delete',
      'pod',
      victim.metadata.name,
      '--wait=false',
    );
    await waitFor(
      `${c}: a new agent pod Running`,
      async () =>
        (await podsOf(c, agentNamespace)).some((p) => running(p) && p.metadata.name !== victim.metadata.name),
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    await waitAvailable(c, 30_000);
    const seen = recorder.events
      .filter((e) => e.at >= from && e.object.metadata?.namespace === c)
      .map((e) => `${availableOf(e.object)?.status}/${availableOf(e.object)?.reason}`);
    console.log(
      `[real-nodes] agent pod deleted -> replaced, Available True ${((Date.now() - from) / 1000).toFixed(1)} s later; seen: ${seen.join(', ') || 'no change'}`,
    );
    // A replaced pod is not a dead agent: the heartbeat never goes stale (12 s) in the few seconds it takes.
    assert.ok(!seen.some((s) => s.startsWith('False/HeartbeatStale')), seen.join(', '));
  });

  test('helm upgrade to another image tag: every Deployment rolls to it, the addon Available again', async () => {
    const retagged = `${env.images!.image.replace(/:[^:]+$/, '')}:upgrade`;
    for (const node of env.nodes!)
      await node.containerd.ctr('images', 'tag', '--force', env.images!.image, retagged);
    const tag = retagged.split(':').pop()!;
    const from = Date.now();
    execFileSync(
      binaryPath('helm'),
      [
        'upgrade',
        defaultRelease,
        chartDir,
        '--namespace',
        defaultNamespace,
        ...nodeChartValues({ image: retagged }),
        `--kubeconfig=${kubeconfigOf('hub')}`,
      ],
      { timeout: 120_000 },
    );
    const image = (pods: Pod[]) => pods.every((p) => p.spec.containers[0]!.image.endsWith(`:${tag}`));
    await waitFor(
      'the manager and both gateway replicas rolled to the new tag',
      async () => {
        const pods = (await podsOf('hub', defaultNamespace)).filter(running);
        return pods.length === 3 && image(pods);
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    for (const c of clusters) {
      await waitFor(
        `${c}: the agent rolled to the new tag`,
        async () => {
          const pods = (await podsOf(c, agentNamespace)).filter(running);
          return pods.length === 1 && image(pods);
        },
        { timeoutMs: 120_000, intervalMs: 500 },
      );
      await waitAvailable(c);
    }
    console.log(
      `[real-nodes] helm upgrade -> every pod on :${tag} and Available in ${((Date.now() - from) / 1000).toFixed(1)} s`,
    );
  });

  test('helm uninstall: the release pods and the APIService go', async () => {
    for (const c of clusters) {
      execFileSync(binaryPath('clusteradm'), [
        'addon',
        'disable',
        '--names',
        addon,
        '--clusters',
        c,
        `--kubeconfig=${kubeconfigOf('hub')}`,
      ]);
    }
    for (const c of clusters) {
      await waitFor(`${c}: the agent pod gone`, async () => (await podsOf(c, agentNamespace)).length === 0, {
        timeoutMs: 90_000,
        intervalMs: 500,
      });
    }
    execFileSync(
      binaryPath('helm'),
      [
        'uninstall',
        defaultRelease,
        '--namespace',
        defaultNamespace,
        '--wait',
        `--kubeconfig=${kubeconfigOf('hub')}`,
      ],
      {
        timeout: 180_000,
      },
    );
    await waitFor(
      'no pod of the release left',
      async () => (await podsOf('hub', defaultNamespace)).length === 0,
      {
        timeoutMs: 90_000,
        intervalMs: 500,
      },
    );
    assert.equal(await hub.getOptional(apiServicePath), undefined);
  });

  test('the environment stopped: no process, mount, iptables chain, bridge, cgroup or sysctl of it remains', async () => {
    await recorder?.stop();
    await env?.stop();
    const now = hostFootprint(stateDir);
    assert.deepEqual(now.processes, [], 'processes');
    assert.deepEqual(now.mounts, footprintBefore.mounts, 'mounts');
    assert.deepEqual(now.chains, footprintBefore.chains, 'iptables chains');
    assert.equal(now.bridge, footprintBefore.bridge, 'the pods bridge');
    assert.deepEqual(now.cgroups, footprintBefore.cgroups, 'cgroups');
    assert.deepEqual(now.sysctls, footprintBefore.sysctls, 'sysctls');
    assert.deepEqual(now.paths, footprintBefore.paths, 'fixed paths');
  });
});

/**
 * What users install, run as they run it: `npm start` itself (hack/local-up.ts), in a state folder of its own,
 * whose hub and managed clusters each have a real node (kubelet, containerd, runc; hack/localenv/node.ts), the
 * project's image built from the Dockerfile (hack/image/build.sh), `helm install` of the chart with nothing but the
 * image and log levels set, `clusteradm addon enable`. The manager, the gateway replicas and the agents are pods of
 * that image, started by kubelets with the chart's and the ManifestWork's securityContext and probes; the APIService
 * and the webhook reach them through their Services' endpoints.
 *
 * npm start installs by running docs/install.md's own steps (hack/localenv/install-steps.ts), one way in per
 * cluster: cluster1 by its admin's credential Secret (dialled directly), cluster2 by its agent's hub credential,
 * cluster3 with no credential on the hub and no route from the hub's pods to its apiserver (a cluster behind NAT).
 * Checked here: each way as the gateway sees it, the route really closed, a user acting as themselves on cluster3;
 * then, as an operator would: a gateway pod and an agent pod deleted (their ReplicaSets replace them and the addon
 * stays Available), `kubectl logs -f` and `kubectl exec` through the gateway into real containers on all three,
 * `helm upgrade` to another image tag (a real rollout of every Deployment) and `helm uninstall`. npm start itself
 * runs in e2e/npm-start/setup.ts, for all files here; this one ends with the uninstall, so it runs last (the files
 * run in the order of their names), and setup.ts's teardown stops npm start with Ctrl-C and fails the suite if
 * anything it started or changed remains on the machine.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { binaryPath } from '../../hack/localenv/binaries.ts';
import { chartDir, defaultNamespace, defaultRelease } from '../../hack/localenv/chart.ts';
import type { EnvironmentState } from '../../hack/localenv/environment.ts';
import { waitFor } from '../../hack/localenv/wait.ts';
import { KubeClient, type KubeObject } from '../../shared/kube/client.ts';
import { kubectl, kubectlResult } from '../support/kubectl.ts';
import { recordWatch, type WatchRecorder } from '../support/watch-recorder.ts';
import { describeRun, doctor, firstFails, firstFailure, scale } from './doctor-run.ts';
import { npmStartOutput, npmStartState, npmStartStateDir } from './environment.ts';

const run = promisify(execFile);
const stateDir = npmStartStateDir;
const addon = 'cluster-gateway';
const clusters = ['cluster1', 'cluster2', 'cluster3'] as const;
/** docs/install.md's (c): served through its agent's tunnel only, no credential on the hub, not dialable from it. */
const tunnelCluster = 'cluster3';
const credentialNamespace = 'open-cluster-management-credentials';
const managedBy = 'app.kubernetes.io/managed-by';
const credentialTypeLabel = 'cluster.core.oam.dev/cluster-credential-type';
const endpointTypeLabel = 'cluster.core.oam.dev/cluster-endpoint-type';
const agentNamespace = 'open-cluster-management-agent-addon';
const addonApi = '/apis/addon.open-cluster-management.io/v1alpha1';
const mcaPath = (c: string) => `${addonApi}/namespaces/${c}/managedclusteraddons/${addon}`;
const apiServicePath = '/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.cluster.core.oam.dev';
const proxyPrefix = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways';
const workspace = 'cg-real-nodes';
const gatewaySelector = 'app.kubernetes.io/component=gateway';
const managerSelector = 'app.kubernetes.io/component=addon-manager';

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
type Secret = KubeObject & { data?: Record<string, string> };
type Gateway = KubeObject & {
  spec?: { access?: { endpoint?: { type?: string }; credential?: { type?: string } } };
  status?: { healthy?: boolean };
};

const availableOf = (obj: Mca | undefined) => obj?.status?.conditions?.find((c) => c.type === 'Available');

describe('real nodes: npm start runs the image on real kubelets, installed with helm as users do', {
  concurrency: false,
}, () => {
  let upOutput = '';
  let state: EnvironmentState;
  const clients = new Map<string, KubeClient>();
  let hub: KubeClient;
  let recorder: WatchRecorder<Mca> | undefined;
  const client = (c: string) => clients.get(c)!;
  const kubeconfigOf = (c: string) =>
    (c === 'hub' ? state.hub : state.managed.find((m) => m.name === c)!).kubeconfig;
  const image = () => state.image!;
  const recorded = () => {
    if (!recorder) throw new Error('the Available recorder did not start');
    return recorder.events;
  };
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
  /** The hub's admin kubeconfig, but every request goes to `cluster` through the aggregator and the gateway. */
  const proxyKubeconfig = (cluster: string) => {
    const file = path.join(stateDir, `proxy-${cluster}.kubeconfig`);
    const hubConfig = readFileSync(state.hub.kubeconfig, 'utf8');
    writeFileSync(
      file,
      hubConfig.replace(
        `server: ${state.hub.server}`,
        `server: ${state.hub.server}${proxyPrefix}/${cluster}/proxy`,
      ),
      {
        mode: 0o600,
      },
    );
    return file;
  };
  const ctr = (c: string, ...args: string[]) =>
    run('ctr', [
      '--address',
      path.join(stateDir, 'nodes', c, 'containerd', 'containerd.sock'),
      '--namespace',
      'k8s.io',
      ...args,
    ]);

  before(async () => {
    // npm start itself runs in the global setup (setup.ts), for every file of e2e/npm-start/.
    upOutput = npmStartOutput();
    state = npmStartState();
    for (const c of [state.hub, ...state.managed])
      clients.set(c.name, await KubeClient.fromKubeconfig(c.kubeconfig));
    hub = client('hub');
    // Every Available the addons show from now on, with when it was seen.
    recorder = recordWatch<Mca>(hub, `${addonApi}/managedclusteraddons?fieldSelector=metadata.name=${addon}`);
    await recorder.ready;
  });

  after(async () => {
    await recorder?.stop();
    for (const c of clients.values()) c.close();
  });

  test('npm start: the manager, two gateway replicas and an agent per cluster run as pods of the image built here, their probes passing', async () => {
    for (const c of clusters) {
      assert.match(
        upOutput,
        new RegExp(`docs/install.md step \\S+ for ${c}`),
        `npm start ran install steps for ${c}`,
      );
      assert.match(
        upOutput,
        new RegExp(`\\$ kubectl get managedclusteraddons -A\\n[^$]*\\n${c}\\s+cluster-gateway\\s+True`),
      );
      assert.match(upOutput, new RegExp(`\\$ kubectl get clustergateways\\n[^$]*\\n${c}\\s.*\\btrue\\b`));
    }
    const hubPods = await waitFor(
      'the manager and 2 gateway pods Running and Ready on the hub',
      async () => {
        const pods = (await podsOf('hub', defaultNamespace)).filter(running);
        return pods.length === 3 ? pods : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    for (const pod of hubPods) {
      const container = pod.spec.containers[0]!;
      assert.equal(container.image, image(), `${pod.metadata.name} runs the image built here`);
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
    for (const c of clusters) {
      const agent = await waitFor(
        `${c}: an agent pod Running and Ready`,
        async () => (await podsOf(c, agentNamespace)).find(running),
        { timeoutMs: 60_000, intervalMs: 250 },
      );
      assert.equal(agent.spec.containers[0]!.image, image());
      assert.equal(agent.spec.nodeName, `${c}-node`);
    }
    const apiService = await hub.get<KubeObject & { status?: { conditions?: Condition[] } }>(apiServicePath);
    assert.ok(apiService.status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True'));
    for (const c of ['hub', ...clusters]) {
      const pods = await kubectl(kubeconfigOf(c), 'get', 'pods', '-A', '-o', 'wide');
      console.log(`$ kubectl get pods -A -o wide (${c})\n${pods.trimEnd()}`);
    }
  });

  test("docs/install.md's three ways in: cluster1 by its admin's Secret, cluster2 by its agent's hub credential, cluster3 by no credential and no route from the hub", async () => {
    const secret = (c: string) => hub.get<Secret>(`/api/v1/namespaces/${credentialNamespace}/secrets/${c}`);
    const gateway = (c: string) => hub.get<Gateway>(`${proxyPrefix}/${c}`);
    // (a) the admin's Secret: endpoint, CA and token of the ServiceAccount made on cluster1; dialled directly.
    const admin = await secret('cluster1');
    assert.equal(admin.metadata?.labels?.[managedBy], undefined, 'cluster1: not written by an agent');
    assert.equal(admin.metadata?.labels?.[credentialTypeLabel], 'ServiceAccountToken');
    assert.deepEqual(Object.keys(admin.data ?? {}).sort(), ['ca.crt', 'endpoint', 'token']);
    assert.equal(
      Buffer.from(admin.data!.endpoint!, 'base64').toString(),
      state.managed.find((m) => m.name === 'cluster1')!.reachableServer,
    );
    const g1 = await gateway('cluster1');
    assert.equal(g1.spec?.access?.endpoint?.type, 'Const');
    assert.equal(g1.spec?.access?.credential?.type, 'ServiceAccountToken');
    // (b) the agent's Secret: a token it requested, through its tunnel.
    const agentWritten = await secret('cluster2');
    assert.equal(agentWritten.metadata?.labels?.[managedBy], 'cluster-gateway-agent');
    assert.equal(agentWritten.metadata?.labels?.[endpointTypeLabel], 'ClusterProxy');
    assert.equal(agentWritten.metadata?.labels?.[credentialTypeLabel], 'ServiceAccountToken');
    assert.ok(agentWritten.data?.token, 'cluster2: the hub holds a token');
    assert.equal((await gateway('cluster2')).spec?.access?.endpoint?.type, 'ClusterProxy');
    // (c) nothing on the hub: a ClusterProxy Secret without a credential.
    const none = await secret(tunnelCluster);
    assert.equal(none.metadata?.labels?.[endpointTypeLabel], 'ClusterProxy');
    assert.equal(none.metadata?.labels?.[credentialTypeLabel], undefined);
    assert.deepEqual(
      Object.keys(none.data ?? {}).filter((k) => /token|key|cert/i.test(k)),
      [],
      `${tunnelCluster}: no credential in the Secret`,
    );
    const g3 = await gateway(tunnelCluster);
    assert.equal(g3.spec?.access?.endpoint?.type, 'ClusterProxy');
    assert.equal(g3.spec?.access?.credential, undefined, `${tunnelCluster}: no credential`);
    assert.equal(g3.status?.healthy, true);
    // The hub's pods cannot dial cluster3's apiserver (refused), while cluster1's answers: from a gateway pod.
    const [gatewayPod] = (await podsOf('hub', defaultNamespace, gatewaySelector)).filter(running);
    assert.ok(gatewayPod, 'a running gateway pod');
    const dial = (c: string) => {
      const url = new URL(state.managed.find((m) => m.name === c)!.reachableServer);
      return `require('net').connect(${Number(url.port)},'${url.hostname}').on('connect',function(){console.log('${c} connected');this.destroy()}).on('error',e=>console.log('${c} '+e.code))`;
    };
    const dials = await kubectl(
      kubeconfigOf('hub'),
      '-n',
      defaultNamespace,
      'exec',
      gatewayPod.metadata.name,
      '--',
      'node',
      '-e',
      `${dial('cluster1')};${dial(tunnelCluster)}`,
    );
    assert.deepEqual(dials.trim().split('\n').sort(), [
      'cluster1 connected',
      `${tunnelCluster} ECONNREFUSED`,
    ]);
    // Each answers through the hub.
    for (const c of clusters) {
      const ns = await hub.get<KubeObject>(`${proxyPrefix}/${c}/proxy/api/v1/namespaces/default`);
      assert.equal(ns.metadata?.name, 'default', `${c}: a GET through the gateway`);
    }
    // On cluster3 a hub user is themselves (docs/install.md: view for the group platform-team there, the proxy
    // on the hub): a namespace is readable, Secrets are not, and the refusal is cluster3's.
    const asUser = ['--as=pat', '--as-group=platform-team'];
    const readable = await kubectlResult(kubeconfigOf('hub'), [
      ...asUser,
      'get',
      '--raw',
      `${proxyPrefix}/${tunnelCluster}/proxy/api/v1/namespaces/default`,
    ]);
    assert.equal(readable.code, 0, readable.stderr);
    const refused = await kubectlResult(kubeconfigOf('hub'), [
      ...asUser,
      'get',
      '--raw',
      `${proxyPrefix}/${tunnelCluster}/proxy/api/v1/namespaces/kube-system/secrets`,
    ]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /forbidden/i);
    assert.match(refused.stderr, /"pat"/, `refused as pat on ${tunnelCluster}: ${refused.stderr}`);
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
                image: image(),
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

  test("the gateway pod holding cluster3's tunnel deleted: replaced; cluster1 never leaves Available, cluster3 is back within 20 s", async () => {
    // The worst pod to lose: the replica that holds the tunnel of the cluster reached through it only.
    const wide = await kubectl(
      kubeconfigOf('hub'),
      'get',
      'clustergateway',
      tunnelCluster,
      '-o',
      'wide',
      '--no-headers',
    );
    const holder = wide.trim().split(/\s+/).at(-1) ?? '';
    const gateways = (await podsOf('hub', defaultNamespace, gatewaySelector)).filter(running);
    const victim = gateways.find((p) => p.metadata.name === holder);
    assert.ok(
      victim,
      `the replica holding ${tunnelCluster}'s tunnel (${wide.trim()}) is a running gateway pod`,
    );
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
        const pods = (await podsOf('hub', defaultNamespace, gatewaySelector)).filter(running);
        return pods.length === 2 && pods.every((p) => p.metadata.name !== victim.metadata.name)
          ? pods
          : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    assert.equal(replacement.length, 2);
    await waitFor(
      `${tunnelCluster} served again through a remaining replica`,
      async () => {
        await hub.get(`${proxyPrefix}/${tunnelCluster}/proxy/api/v1/namespaces/${workspace}`);
        return availableOf(await hub.getOptional<Mca>(mcaPath(tunnelCluster)))?.status === 'True';
      },
      { timeoutMs: 20_000, intervalMs: 250 },
    );
    const backIn = (Date.now() - from) / 1000;
    await hub.get(`${proxyPrefix}/cluster1/proxy/api/v1/namespaces/${workspace}`);
    const notTrue = (c: string) =>
      recorded()
        .filter(
          (e) =>
            e.at >= from && e.object.metadata?.namespace === c && availableOf(e.object)?.status !== 'True',
        )
        .map((e) => `${availableOf(e.object)?.status}/${availableOf(e.object)?.reason}`);
    console.log(
      `[real-nodes] gateway pod ${victim.metadata.name} deleted -> 2 Ready again; ${tunnelCluster} Available True and served ${backIn.toFixed(1)} s later; ${tunnelCluster} showed meanwhile: ${notTrue(tunnelCluster).join(', ') || 'nothing but True'}`,
    );
    assert.deepEqual(notTrue('cluster1'), [], 'cluster1 (reached directly) never leaves Available');
    // cluster3 is down while its agent moves its tunnel to another replica: said so, and why.
    for (const seen of notTrue(tunnelCluster)) {
      assert.match(seen, /^False\/(TunnelDisconnected|ClusterUnreachableFromGateway)$/);
    }
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
    const seen = recorded()
      .filter((e) => e.at >= from && e.object.metadata?.namespace === c)
      .map((e) => `${availableOf(e.object)?.status}/${availableOf(e.object)?.reason}`);
    console.log(
      `[real-nodes] agent pod deleted -> replaced, Available True ${((Date.now() - from) / 1000).toFixed(1)} s later; seen: ${seen.join(', ') || 'no change'}`,
    );
    // A replaced pod is not a dead agent: the heartbeat never goes stale (12 s) in the few seconds it takes.
    assert.ok(!seen.some((s) => s.startsWith('False/HeartbeatStale')), seen.join(', '));
  });

  test('helm upgrade to another image tag: every Deployment rolls to it, the addon Available again', async () => {
    // The same image under another tag in every node's store: what a release to a new version looks like.
    const retagged = `${image().replace(/:[^:]+$/, '')}:upgrade`;
    for (const c of ['hub', ...clusters]) await ctr(c, 'images', 'tag', '--force', image(), retagged);
    const tag = retagged.split(':').pop()!;
    const from = Date.now();
    await run(
      binaryPath('helm'),
      [
        'upgrade',
        defaultRelease,
        chartDir,
        '--namespace',
        defaultNamespace,
        '--reuse-values',
        '--set',
        `image.tag=${tag}`,
        `--kubeconfig=${kubeconfigOf('hub')}`,
      ],
      { timeout: 120_000 },
    );
    const onTag = (pods: Pod[]) => pods.every((p) => p.spec.containers[0]!.image.endsWith(`:${tag}`));
    await waitFor(
      'the manager and both gateway replicas rolled to the new tag',
      async () => {
        const pods = (await podsOf('hub', defaultNamespace)).filter(running);
        return pods.length === 3 && onTag(pods);
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    for (const c of clusters) {
      await waitFor(
        `${c}: the agent rolled to the new tag`,
        async () => {
          const pods = (await podsOf(c, agentNamespace)).filter(running);
          return pods.length === 1 && onTag(pods);
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
      await run(binaryPath('clusteradm'), [
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
    // On the way out, two faults `cluster-gateway doctor` must name first, at no cost of repair: the gateway stopped
    // (the manager stopped too, or it would scale the gateway back within a second), then, after the uninstall,
    // the APIService gone.
    await scale(hub, defaultNamespace, managerSelector, 0);
    await waitFor(
      'no manager pod left',
      async () => (await podsOf('hub', defaultNamespace, managerSelector)).length === 0,
      { timeoutMs: 40_000, intervalMs: 250 },
    );
    await scale(hub, defaultNamespace, 'cluster-gateway', 0);
    await waitFor(
      'no gateway pod running',
      async () => (await podsOf('hub', defaultNamespace, gatewaySelector)).filter(running).length === 0,
      { timeoutMs: 40_000, intervalMs: 250 },
    );
    const gatewayStopped = await doctor(['cluster1'], kubeconfigOf('hub'));
    assert.ok(firstFails('gateway-pods-ready')(gatewayStopped), describeRun(gatewayStopped));
    assert.match(firstFailure(gatewayStopped)?.message ?? '', /scaled to 0 replicas/);
    assert.equal(firstFailure(gatewayStopped)?.object, `deployment ${defaultNamespace}/cluster-gateway`);
    assert.equal(gatewayStopped.checks.find((c) => c.name === 'manager-leader')?.result, 'fail');
    await run(
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
    const apiServiceGone = await doctor(['cluster1'], kubeconfigOf('hub'));
    assert.ok(firstFails('apiservice-exists')(apiServiceGone), describeRun(apiServiceGone));
    assert.match(firstFailure(apiServiceGone)?.message ?? '', /does not exist/);
  });
});

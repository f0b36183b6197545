/**
 * The client library (client/, docs/client.md) as a program built on @kubernetes/client-node uses it, against
 * what `npm start` installed: the hub's own kubeconfig (the hub identity), the real aggregator, gateway pods,
 * agents and tunnels. cluster3 is reached only through its agent's tunnel, so everything done on it crosses
 * the aggregator, a gateway replica and the tunnel.
 *
 * Checked: typed APIs of kubeConfigForCluster() on all three clusters; one API from the hub with the cluster
 * chosen per call (onCluster); Log follow, Exec with stdin, Attach and PortForward (WebSockets through the
 * gateway) into a real container; an informer that sees a ConfigMap created on the cluster within a second
 * and keeps delivering, with no event lost, across a restart of the gateway replica its watch goes through
 * (the one holding cluster3's tunnel) and a crash of cluster3's agent, compared event by event with a direct
 * watch on cluster3's own kube-apiserver; the two examples, run as the docs say.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import net from 'node:net';
import { PassThrough, Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import {
  Attach,
  CoreV1Api,
  Exec,
  KubeConfig,
  Log,
  makeInformer,
  PortForward,
  type V1ConfigMap,
  type V1Status,
} from '@kubernetes/client-node';
import {
  type ClusterInformer,
  clusterInformer,
  kubeConfigForCluster,
  onCluster,
} from '../../client/index.ts';
import { repoRoot } from '../../hack/localenv/binaries.ts';
import type { EnvironmentState } from '../../hack/localenv/environment.ts';
import { type Pod, podReady } from '../../hack/localenv/pods.ts';
import { waitFor } from '../../hack/localenv/wait.ts';
import type { KubeClient, KubeList, KubeObject } from '../../shared/kube/client.ts';
import { type Recorded, recordWatch, type WatchRecorder } from '../support/watch-recorder.ts';
import { clientOf, kubeconfigOf, npmStartClusters, npmStartState, tunnelOnlyCluster } from './environment.ts';

const workspace = 'client-library-e2e';
const agentNamespace = 'open-cluster-management-agent-addon';
const gatewaySelector = 'app.kubernetes.io/component=gateway,app.kubernetes.io/part-of=cluster-gateway';
const proxyPrefix = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways';
const log = (line: string) => console.log(`[client-library] ${line}`);

/** Prints numbered lines (Log, Attach) and greets and echoes on 8080 (PortForward); has node for Exec. */
const program = `
let n = 0;
setInterval(() => console.log('line ' + ++n), 200);
require('node:net').createServer((s) => { s.on('error', () => {}); s.write('hello from the pod\\n'); s.pipe(s); }).listen(8080);
process.on('SIGTERM', () => process.exit(0));
`;

const readyPods = async (client: KubeClient, path: string) =>
  (await client.list<Pod & KubeObject>(path)).items.filter((p) => podReady(p as Pod));

describe('client library: client-node programs through the gateway', { concurrency: false }, () => {
  let state: EnvironmentState;
  let hub: KubeConfig;
  const direct = new Map<string, KubeClient>();
  let hubClient: KubeClient;
  let podReadyPromise: Promise<unknown>;
  const informers: ClusterInformer[] = [];
  const recorders: WatchRecorder<KubeObject>[] = [];
  const podName = 'library-workload';
  /** Runs a documented example to its end, whatever its exit code: its code and output, timed. */
  const runExample = (args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string; ms: number }>((resolve) => {
      const env = { ...process.env, KUBECONFIG: kubeconfigOf('hub', state), NO_COLOR: '1' };
      const from = Date.now();
      execFile(
        process.execPath,
        ['--conditions=cluster-gateway-source', ...args],
        { cwd: repoRoot, env, timeout: 60_000 },
        (err, stdout, stderr) =>
          resolve({
            code: err ? Number((err as { code?: unknown }).code ?? -1) : 0,
            stdout,
            stderr,
            ms: Date.now() - from,
          }),
      );
    });
  const runExamples = () => {
    return Promise.all([
      runExample(['examples/list-pods.ts']),
      runExample(['examples/cluster-informers.ts', '--namespace', workspace, '--duration', '2s']),
    ]);
  };
  /** Both examples, run as documented: started in the Log test, checked in the next one. */
  let examples: ReturnType<typeof runExamples> | undefined;

  before(async () => {
    state = npmStartState();
    hub = new KubeConfig();
    hub.loadFromFile(kubeconfigOf('hub', state));
    hubClient = await clientOf('hub', state);
    for (const c of npmStartClusters) direct.set(c, await clientOf(c, state));
    await Promise.all(
      npmStartClusters.map(async (c) => {
        const client = direct.get(c)!;
        // An earlier interrupted run may have left the namespace terminating: wait for it to go first.
        await waitFor(`${c}: no terminating ${workspace}`, async () => {
          const ns = await client.getOptional(`/api/v1/namespaces/${workspace}`);
          return !ns?.metadata?.deletionTimestamp;
        });
        await client.apply(
          `/api/v1/namespaces/${workspace}`,
          { apiVersion: 'v1', kind: 'Namespace', metadata: { name: workspace } },
          'client-library-e2e',
        );
      }),
    );
    // The workload on the tunnel-only cluster starts now; the first tests run while its kubelet starts it.
    const spoke = direct.get(tunnelOnlyCluster)!;
    podReadyPromise = (async () => {
      await waitFor(`${tunnelOnlyCluster}: the default ServiceAccount of ${workspace}`, () =>
        spoke.getOptional(`/api/v1/namespaces/${workspace}/serviceaccounts/default`),
      );
      await spoke.apply(
        `/api/v1/namespaces/${workspace}/pods/${podName}`,
        {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: podName, namespace: workspace },
          spec: {
            terminationGracePeriodSeconds: 1,
            automountServiceAccountToken: false,
            containers: [
              {
                name: 'main',
                image: state.image!,
                imagePullPolicy: 'Never',
                command: ['node', '-e', program],
                readinessProbe: { tcpSocket: { port: 8080 }, periodSeconds: 1 },
                securityContext: {
                  runAsUser: 65532,
                  runAsNonRoot: true,
                  readOnlyRootFilesystem: true,
                  allowPrivilegeEscalation: false,
                  capabilities: { drop: ['ALL'] },
                },
              },
            ],
          },
        },
        'client-library-e2e',
      );
      return waitFor(
        `${tunnelOnlyCluster}: pod ${podName} Ready`,
        async () => podReady((await spoke.get(`/api/v1/namespaces/${workspace}/pods/${podName}`)) as Pod),
        { timeoutMs: 60_000 },
      );
    })();
    podReadyPromise.catch(() => {});
  });

  after(async () => {
    await Promise.all(informers.map((i) => i.stop()));
    await Promise.all(recorders.map((r) => r.stop()));
    // Leave the environment as npm start left it: two gateway pods Ready, each agent Ready, every cluster
    // served through the gateway (a test that failed half-way may have left a restart in progress).
    await waitFor(
      'two gateway pods Ready and every cluster served through the gateway',
      async () => {
        if (
          (await readyPods(hubClient, `/api/v1/pods?labelSelector=${encodeURIComponent(gatewaySelector)}`))
            .length < 2
        )
          return false;
        for (const c of npmStartClusters) {
          if ((await readyPods(direct.get(c)!, `/api/v1/namespaces/${agentNamespace}/pods`)).length < 1)
            return false;
          await hubClient.get(`${proxyPrefix}/${c}/proxy/api/v1/namespaces/default`);
        }
        return true;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    // Not waited for: namespaces terminate in the background and nothing later depends on them.
    await Promise.all(npmStartClusters.map((c) => direct.get(c)!.delete(`/api/v1/namespaces/${workspace}`)));
    hubClient.close();
    for (const c of direct.values()) c.close();
  });

  test('typed APIs of kubeConfigForCluster() read each cluster, the tunnel-only one too, as its own apiserver says', async () => {
    await Promise.all(
      npmStartClusters.map(async (c) => {
        const core = kubeConfigForCluster(hub, c).makeApiClient(CoreV1Api);
        const through = (await core.listNamespace()).items.map((n) => n.metadata?.name).sort();
        const own = (await direct.get(c)!.list('/api/v1/namespaces')).items
          .map((n) => n.metadata?.name)
          .sort();
        assert.deepEqual(through, own, `${c}: the namespaces through the gateway are the cluster's`);
        assert.ok(through.includes(workspace));
        const agents = await core.listNamespacedPod({ namespace: agentNamespace });
        assert.ok(agents.items.length >= 1, `${c}: its agent pod, read through the gateway`);
        // client-node's own informer, on the same KubeConfig: lists and watches through the gateway.
        const namespaces = makeInformer(kubeConfigForCluster(hub, c), '/api/v1/namespaces', () =>
          core.listNamespace(),
        );
        await namespaces.start();
        try {
          assert.ok(
            namespaces.list().some((n) => n.metadata?.name === workspace),
            `${c}: makeInformer's cache`,
          );
        } finally {
          await namespaces.stop();
        }
      }),
    );
  });

  test('onCluster: one API made from the hub, the cluster chosen per call', async () => {
    const core = hub.makeApiClient(CoreV1Api);
    const marker = (c: string): V1ConfigMap => ({
      metadata: { name: 'which-cluster' },
      data: { cluster: c },
    });
    for (const c of npmStartClusters)
      await core.createNamespacedConfigMap({ namespace: workspace, body: marker(c) }, onCluster(c));
    for (const c of npmStartClusters) {
      const cm = await core.readNamespacedConfigMap(
        { namespace: workspace, name: 'which-cluster' },
        onCluster(c),
      );
      assert.equal(cm.data?.cluster, c, `read from ${c}`);
      // Written through the gateway, really on that cluster's apiserver.
      const own = await direct
        .get(c)!
        .get<KubeObject & { data?: Record<string, string> }>(
          `/api/v1/namespaces/${workspace}/configmaps/which-cluster`,
        );
      assert.equal(own.data?.cluster, c);
    }
    // Without the option the same API reads the hub, where the workspace does not exist.
    await assert.rejects(
      core.readNamespace({ name: workspace }),
      (err: { code?: number }) => err.code === 404,
    );
  });

  test('Log follow, Exec with stdin, Attach and PortForward into a real container on the tunnel-only cluster', async () => {
    await podReadyPromise;
    // The examples run alongside this test (loading client-node alone takes seconds): the workload pod
    // must be in list-pods' output, the which-cluster ConfigMaps in the informer example's.
    examples = runExamples();
    examples.catch(() => {});
    const kc = kubeConfigForCluster(hub, tunnelOnlyCluster);
    const started = Date.now();

    // Log, following: lines written after the request keep arriving, in order, until limitBytes ends the
    // stream on the server's side. (Aborting the follow instead would make client-node 2.0.1 emit an
    // unhandled AbortError: its Log pipes the body without an error listener.)
    const logStream = new PassThrough();
    let logText = '';
    logStream.on('data', (d) => {
      logText += d;
    });
    const logEnded = new Promise((resolve) => logStream.on('end', resolve));
    const logFrom = Date.now();
    await new Log(kc).log(workspace, podName, 'main', logStream, {
      follow: true,
      tailLines: 1,
      limitBytes: 40,
    });
    await logEnded;
    const followedMs = Date.now() - logFrom;
    const followed = logText
      .split('\n')
      .filter((l) => /^line \d+$/.test(l))
      .map((l) => Number(l.slice(5)));
    assert.ok(followed.length >= 4, `followed: ${JSON.stringify(logText)}`);
    assert.deepEqual(
      followed,
      followed.map((_, i) => followed[0]! + i),
      'in order, none missing',
    );
    // One line was there already (tailLines 1); the others were written one every 200 ms while following.
    assert.ok(followedMs >= 500, `the lines came live, over ${followedMs} ms`);

    // Exec with stdin over the WebSocket: the command's stdout and its exit status come back.
    let execOut = '';
    const stdout = new PassThrough().on('data', (d) => {
      execOut += d;
    });
    const status = await new Promise<V1Status>((resolve, reject) => {
      new Exec(kc)
        .exec(
          workspace,
          podName,
          'main',
          ['node', '-e', "process.stdin.on('data',d=>process.stdout.write('echo:'+d))"],
          stdout,
          process.stderr,
          Readable.from([`hello ${tunnelOnlyCluster}\n`]),
          false,
          resolve,
        )
        .catch(reject);
    });
    assert.equal(status.status, 'Success');
    assert.equal(execOut, `echo:hello ${tunnelOnlyCluster}\n`);

    // Attach to the running container's stdout.
    let attached = '';
    const attachOut = new PassThrough().on('data', (d) => {
      attached += d;
    });
    const ws = await new Attach(kc).attach(workspace, podName, 'main', attachOut, null, null, false);
    await waitFor('two lines through attach', () => (attached.match(/line \d+\n/g)?.length ?? 0) >= 2, {
      timeoutMs: 10_000,
      intervalMs: 50,
    });
    ws.close();

    // PortForward: a local port whose connections reach the pod's 8080.
    const forward = new PortForward(kc);
    const local = net.createServer((socket) => {
      socket.on('error', () => {});
      void forward
        .portForward(workspace, podName, [8080], socket, null, socket)
        .catch(() => socket.destroy());
    });
    await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
    try {
      const reply = await new Promise<string>((resolve, reject) => {
        const socket = net.connect((local.address() as net.AddressInfo).port, '127.0.0.1');
        let text = '';
        socket.on('data', (d) => {
          text += d;
          if (text === 'hello from the pod\n') socket.write('ping through the gateway\n');
          if (text.endsWith('ping through the gateway\n')) {
            socket.destroy();
            resolve(text);
          }
        });
        socket.on('error', reject);
        setTimeout(() => reject(new Error(`port-forward: only ${JSON.stringify(text)}`)), 10_000).unref();
      });
      assert.equal(reply, 'hello from the pod\nping through the gateway\n');
    } finally {
      local.close();
    }
    log(`Log follow, Exec, Attach and PortForward on ${tunnelOnlyCluster} in ${Date.now() - started} ms`);
  });

  test('the examples run from the repository as documented and print what they should', async () => {
    const [pods, events] = await examples!;
    log(`examples: list-pods ${pods.ms} ms, cluster-informers ${events.ms} ms`);
    assert.equal(pods.code, 0, `list-pods: ${pods.stdout}${pods.stderr}`);
    assert.equal(events.code, 0, `cluster-informers: ${events.stdout}${events.stderr}`);
    for (const c of npmStartClusters) assert.match(pods.stdout, new RegExp(`^${c}: \\d+ pods$`, 'm'));
    assert.match(
      pods.stdout,
      new RegExp(`^  ${workspace}/${podName} Running$`, 'm'),
      'the workload, listed on cluster3',
    );
    for (const c of npmStartClusters) {
      assert.match(events.stdout, new RegExp(`^${c}\\tADDED\\t${workspace}/which-cluster\\trv=\\d+$`, 'm'));
      assert.match(events.stderr, new RegExp(`^${c}\\twatching ${workspace}$`, 'm'));
    }
    assert.match(events.stderr, /stopping \(after 2s\)/);
  });
  test('an informer through the gateway: sees a ConfigMap within 1 s, and loses no event across a restart of the gateway replica it goes through and of the agent', async () => {
    const c = tunnelOnlyCluster;
    const spoke = direct.get(c)!;
    const cmPath = `/api/v1/namespaces/${workspace}/configmaps`;
    type Cm = KubeObject & { data?: Record<string, string> };
    const informer = clusterInformer<V1ConfigMap>(hub, c, cmPath, (kc) =>
      kc.makeApiClient(CoreV1Api).listNamespacedConfigMap({ namespace: workspace }),
    );
    informers.push(informer);
    const seen: { at: number; event: string }[] = [];
    let recording = false;
    const describeEvent = (type: string, cm: { metadata?: { name?: string; resourceVersion?: string } }) =>
      `${type} ${cm.metadata?.name} rv=${cm.metadata?.resourceVersion}`;
    for (const [verb, type] of [
      ['add', 'ADDED'],
      ['update', 'MODIFIED'],
      ['delete', 'DELETED'],
    ] as const) {
      informer.on(verb, (cm, cluster) => {
        assert.equal(cluster, c);
        if (recording) seen.push({ at: Date.now(), event: describeEvent(type, cm) });
      });
    }
    const errors: string[] = [];
    const connects: number[] = [];
    informer.on('connect', () => connects.push(Date.now()));
    informer.on('error', (err) =>
      errors.push(err instanceof Error ? err.message.split('\n')[0]! : String(err)),
    );
    // The reference: a watch on cluster3's own kube-apiserver, not through the gateway.
    const reference = recordWatch<Cm>(spoke, cmPath);
    recorders.push(reference);
    await Promise.all([informer.start(), reference.ready]);
    recording = true;

    // Within a second of the create on the cluster, the informer has it.
    const created = Date.now();
    await spoke.create(cmPath, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'latency' } });
    await waitFor('the informer to see the new ConfigMap', () => informer.get('latency', workspace), {
      timeoutMs: 5000,
      intervalMs: 5,
    });
    const latencyMs = Date.now() - created;
    log(`a ConfigMap created on ${c} seen by the informer ${latencyMs} ms later`);
    assert.ok(latencyMs < 1000, `seen ${latencyMs} ms after the create`);

    // Churn: ConfigMaps created, modified and deleted on the cluster, continuously, during both restarts.
    let churning = true;
    let writes = 0;
    const churn = (async () => {
      const present = new Map<string, number>();
      for (let i = 0; churning; i++) {
        const name = `churn-${i % 4}`;
        const n = present.get(name);
        if (n === undefined) {
          await spoke.create(cmPath, {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name },
            data: { n: '0' },
          } as Cm);
          present.set(name, 0);
        } else if (n % 5 === 4) {
          await spoke.delete(`${cmPath}/${name}`);
          present.delete(name);
        } else {
          await spoke.mergePatch(`${cmPath}/${name}`, { data: { n: String(n + 1) } });
          present.set(name, n + 1);
        }
        writes++;
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    // Recovered from a fault = reconnected after it, then delivered an event that came after that reconnect.
    const recovered = (what: string, since: number) =>
      waitFor(
        `the informer to reconnect and deliver again after ${what}`,
        () => {
          const reconnect = connects.find((t) => t > since);
          return reconnect !== undefined && seen.some((s) => s.at >= reconnect) ? reconnect : undefined;
        },
        { timeoutMs: 45_000, intervalMs: 20 },
      );
    try {
      // The gateway replica holding cluster3's tunnel deleted: every request to cluster3 passes through it,
      // so the informer's watch is cut (after the replica's drain) and the agent moves its tunnel to the other
      // replica, which keeps serving meanwhile (the addon stays available). Waited for: only the informer's
      // recovery; the replacement pod becomes Ready while the next steps run (the after hook waits for it).
      const holder = (
        await hubClient.get<KubeObject & { status?: { tunnel?: { replica?: string } } }>(
          `/apis/cluster.core.oam.dev/v1alpha1/clustergateways/${c}`,
        )
      ).status?.tunnel?.replica;
      const gatewayPods = await hubClient.list<Pod & KubeObject>(
        `/api/v1/pods?labelSelector=${encodeURIComponent(gatewaySelector)}`,
      );
      const victim = gatewayPods.items.find((p) => p.metadata.name === holder);
      assert.ok(victim, `the replica holding ${c}'s tunnel (${holder}) is a gateway pod, found on the hub`);
      const gwFrom = Date.now();
      await hubClient.delete(`/api/v1/namespaces/${victim.metadata.namespace}/pods/${victim.metadata.name}`);
      const gwBack = await recovered('the gateway restart', gwFrom);
      log(
        `gateway pod ${victim.metadata.name} deleted: the informer reconnected ${gwBack - gwFrom} ms later and delivers`,
      );

      // cluster3's agent killed (grace period 0: a crash, or its node lost): its tunnel, the only way to the
      // cluster, drops at once and stays down until the new agent attaches. A graceful delete would not cut
      // the watch for its 30 s grace period: the terminating agent keeps serving the streams it carries
      // while its replacement attaches a new tunnel for new requests.
      const [agent] = await readyPods(spoke, `/api/v1/namespaces/${agentNamespace}/pods`);
      assert.ok(agent, `${c}: its agent pod`);
      const agentFrom = Date.now();
      await spoke.delete(
        `/api/v1/namespaces/${agentNamespace}/pods/${agent.metadata.name}?gracePeriodSeconds=0`,
      );
      const agentBack = await recovered('the agent restart', agentFrom);
      log(`agent pod deleted: the informer reconnected ${agentBack - agentFrom} ms later and delivers`);
    } finally {
      churning = false;
      await churn;
    }

    // The last write seen by both: then the two sequences must be the same, event by event.
    const end = await spoke.create<Cm>(cmPath, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'end' },
    });
    const endEvent = `ADDED end rv=${end.metadata?.resourceVersion}`;
    await waitFor(
      'both watches to reach the last write',
      () =>
        seen.some((s) => s.event === endEvent) &&
        reference.events.some((e: Recorded<Cm>) => describeEvent(e.type, e.object) === endEvent),
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    const expected = reference.events.map((e: Recorded<Cm>) => describeEvent(e.type, e.object));
    const actual = seen.map((s) => s.event);
    log(
      `${writes} churn writes; ${actual.length} events through the gateway, ${expected.length} direct; relists ${informer.relists}; errors while recovering: ${errors.length} (${[...new Set(errors)].join('; ')})`,
    );
    // No relist happened (each reconnect resumed from its resourceVersion), so every intermediate state
    // arrived, in order, exactly once: the same sequence as the direct watch.
    assert.equal(informer.relists, 0);
    assert.deepEqual(actual, expected);
    // And the informer's cache is the cluster's collection now.
    const own = (await spoke.list<Cm>(cmPath)) as KubeList<Cm>;
    assert.deepEqual(
      informer
        .list()
        .map((o) => `${o.metadata?.name}@${o.metadata?.resourceVersion}`)
        .sort(),
      own.items.map((o) => `${o.metadata?.name}@${o.metadata?.resourceVersion}`).sort(),
    );
  });
});

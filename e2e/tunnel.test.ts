/**
 * The agent tunnel through the real path: agent -> hub kube-apiserver (authentication, RBAC,
 * priority and fairness) -> kube-aggregator -> gateway `clustergateways/<cluster>/attach`, HTTP/2
 * with roles reversed; then kubectl -> hub -> gateway -> tunnel -> agent -> managed apiserver.
 *
 * The tunnelled cluster is "tunnelled": cluster2 of the environment under another name, whose
 * credential Secret points at an address nobody can reach (TEST-NET-1) and asks for the tunnel
 * (cluster-endpoint-type ClusterProxy). So every answer below came through the agent.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { ClientRequest } from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadKubeconfig } from '../agent/connection/kubeconfig.ts';
import { AttachRefusedError, requestAttach } from '../agent/tunnel/attach-request.ts';
import { TunnelMetrics } from '../agent/tunnel/metrics.ts';
import { Relay } from '../agent/tunnel/relay.ts';
import { binaryPath } from '../hack/localenv/binaries.ts';
import { hubRequestTimeoutSeconds } from '../hack/localenv/environment.ts';
import { Supervisor } from '../hack/localenv/supervisor.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import { addonAgentSubject } from '../manager/addon/registration/subject.ts';
import { KubeClient } from '../shared/kube/client.ts';
import { createCertificateAuthority } from '../shared/pki.ts';
import { applyClusterSecret, gatewayToken, secretPath } from './support/credentials.ts';
import { e2eStateDir, environmentState, hubClient, managedClient } from './support/environment.ts';
import { gatewayRequest } from './support/gateway-client.ts';
import { kubectl } from './support/kubectl.ts';
import { portForwardPing } from './support/port-forward.ts';
import { grantOnHub, hubGroup, hubUser, revokeOnHub } from './support/rbac.ts';
import {
  agentCertificate,
  agentHubKubeconfig,
  grantAgentOnHub,
  startTunnelAgent,
  type TunnelAgent,
} from './support/tunnel-agent.ts';
import { proxyKubeconfig, proxyPrefix } from './support/users.ts';
import { startWorkload, type Workload } from './support/workload.ts';

const cluster = 'tunnelled';
const behind = 'cluster2';
const quietLog = { debug() {}, info() {}, warn() {} };
const attachRule = {
  apiGroups: ['cluster.core.oam.dev'],
  resources: ['clustergateways/attach'],
  verbs: ['create'],
};

/** Sum of every series of a metric in Prometheus text. */
function sumSeries(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) sum += Number(line.split(' ').at(-1));
  }
  return sum;
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;

describe('agent tunnel through the hub kube-apiserver', { concurrency: false }, () => {
  let hub: KubeClient;
  let spoke: KubeClient;
  let hubKubeconfig: string;
  let supervisor: Supervisor;
  let agent: TunnelAgent;
  let agentKubeconfig: string;
  let workload: Workload | undefined;
  let firstConnectAt = 0;
  const cleanup: string[] = [];
  const gatewayLog = () => path.join(environmentState().stateDir, 'logs', 'hub-cluster-gateway.log');

  /** The environment gateway's metrics (read directly, as the aggregator's front proxy). */
  async function gatewayMetric(series: string): Promise<number> {
    const res = await gatewayRequest('GET', '/metrics', {
      frontProxy: { user: 'admin', groups: ['system:masters'] },
    });
    const line = res.body.split('\n').find((l) => l.startsWith(`${series} `));
    return Number(line?.split(' ').at(-1) ?? Number.NaN);
  }

  const rawGet = (p: string) => kubectl(hubKubeconfig, 'get', '--raw', `${proxyPrefix}/${cluster}/proxy${p}`);

  before(async () => {
    hub = await hubClient();
    spoke = await managedClient(behind);
    hubKubeconfig = environmentState().hub.kubeconfig;
    supervisor = new Supervisor(path.join(e2eStateDir, 'tunnel'));
    // The hub holds the credential (a token for cluster2) but no usable address for it.
    await applyClusterSecret(hub, cluster, 'ServiceAccountToken', {
      token: await gatewayToken(hub, behind),
      endpoint: 'https://192.0.2.1:6443',
      'ca.crt': readFileSync(path.join(environmentState().stateDir, behind, 'ca.crt'), 'utf8'),
    });
    await hub.mergePatch(secretPath(cluster), {
      metadata: { labels: { 'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy' } },
    });
    cleanup.push(...(await grantAgentOnHub(hub, cluster)));
    agentKubeconfig = agentHubKubeconfig(cluster, await agentCertificate(cluster));
    agent = await startTunnelAgent(supervisor, {
      cluster,
      managedName: behind,
      hubKubeconfig: agentKubeconfig,
    });
  });

  after(async () => {
    await workload?.stop();
    await supervisor?.stop();
    await revokeOnHub(hub, 'e2e-tunnel-too-broad');
    await revokeOnHub(hub, 'e2e-tunnel-apf');
    await hub?.delete(secretPath(cluster));
    for (const p of cleanup.filter((p) => !p.includes('/namespaces/'))) await hub?.delete(p);
    await hub?.delete(`/api/v1/namespaces/${cluster}`);
    hub?.close();
    spoke?.close();
  });

  test('the agent attaches and the gateway serves GET for the cluster through its tunnel only', async () => {
    await waitFor(
      'the tunnel to connect',
      async () => (await agent.metric('cluster_gateway_agent_tunnel_connected')) === 1,
      {
        timeoutMs: 30_000,
        failFast: () => agent.process.assertRunning(),
      },
    );
    firstConnectAt = (await agent.metric('cluster_gateway_agent_tunnel_connected_since_seconds')) * 1000;
    assert.equal(await gatewayMetric(`cluster_gateway_tunnel_connected{cluster="${cluster}"}`), 1);
    const marker = `tunnel-${Date.now()}`;
    await spoke.create('/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: marker },
    });
    try {
      const names = (
        JSON.parse(await rawGet('/api/v1/namespaces')) as { items: { metadata: { name: string } }[] }
      ).items.map((i) => i.metadata.name);
      assert.ok(names.includes(marker), `${behind}'s namespace seen through the tunnel`);
    } finally {
      await spoke.delete(`/api/v1/namespaces/${marker}`);
    }
    const clusterGateway = JSON.parse(
      await kubectl(hubKubeconfig, 'get', '--raw', `${proxyPrefix}/${cluster}`),
    ) as { spec: { access: { endpoint: { type: string } } } };
    assert.equal(clusterGateway.spec.access.endpoint.type, 'ClusterProxy');
    assert.ok(
      (await agent.metric('cluster_gateway_agent_tunnel_streams_total')) >= 1,
      'the agent relayed the stream',
    );
    const rss = await agent.metric('process_resident_memory_bytes');
    process.stderr.write(`[tunnel e2e] agent RSS with its tunnel up: ${(rss / 2 ** 20).toFixed(1)} MiB\n`);
  });

  test('a watch through the tunnel delivers events as they happen', async () => {
    const client = await KubeClient.fromKubeconfig(await proxyKubeconfig(cluster));
    const abort = new AbortController();
    const seen: string[] = [];
    const watching = (async () => {
      for await (const e of client.watch<{ metadata: { name: string } }>(
        '/api/v1/namespaces/default/configmaps?resourceVersion=0',
        abort.signal,
      )) {
        seen.push(`${e.type}:${e.object.metadata.name}`);
      }
    })().catch(() => {});
    try {
      await waitFor('initial events', () => seen.some((x) => x.startsWith('ADDED:kube-root-ca.crt')));
      const started = Date.now();
      await spoke.create('/api/v1/namespaces/default/configmaps', {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'through-the-tunnel' },
      });
      await waitFor('the ADDED event', () => seen.includes('ADDED:through-the-tunnel'), { intervalMs: 20 });
      assert.ok(Date.now() - started < 2000, 'the event came without buffering delay');
    } finally {
      abort.abort();
      await watching;
      client.close();
      await spoke.delete('/api/v1/namespaces/default/configmaps/through-the-tunnel');
    }
  });

  test('kubectl exec through the tunnel, over WebSocket and SPDY', async () => {
    workload = await startWorkload(spoke);
    const kc = await proxyKubeconfig(cluster);
    for (const websockets of ['true', 'false']) {
      const out = await new Promise<string>((resolve, reject) => {
        const child = spawn(
          binaryPath('kubectl'),
          [`--kubeconfig=${kc}`, 'exec', workload!.pod.name, '--', 'echo', 'through', 'the', 'tunnel'],
          { env: { ...process.env, KUBECTL_REMOTE_COMMAND_WEBSOCKETS: websockets } },
        );
        let stdout = '';
        let stderr = '';
        child.stdout.setEncoding('utf8').on('data', (c: string) => {
          stdout += c;
        });
        child.stderr.setEncoding('utf8').on('data', (c: string) => {
          stderr += c;
        });
        child.once('exit', (code) =>
          code === 0 ? resolve(stdout) : reject(new Error(`kubectl exec: ${stderr}`)),
        );
      });
      assert.equal(out, 'through the tunnel\n', `exec with KUBECTL_REMOTE_COMMAND_WEBSOCKETS=${websockets}`);
    }
  });

  test('kubectl port-forward through the tunnel, over WebSocket and SPDY', async () => {
    assert.ok(workload, 'the exec test started the workload pod');
    const kc = await proxyKubeconfig(cluster);
    for (const websockets of ['true', 'false']) {
      const reply = await portForwardPing(kc, workload.pod.name, websockets === 'true');
      assert.match(
        reply,
        /hello from the pod/,
        `port-forward, KUBECTL_PORT_FORWARD_WEBSOCKETS=${websockets}`,
      );
      assert.match(reply, /ping/);
    }
  });

  test("an agent identity for one cluster cannot attach as another: the hub's RBAC, then the gateway's binding", async () => {
    const credential = loadKubeconfig(agentKubeconfig);
    // 1. The manager grants attach on the agent's own name only: the hub refuses.
    await assert.rejects(requestAttach(credential, behind, { timeoutMs: 10_000 }), (err: unknown) => {
      assert.ok(err instanceof AttachRefusedError);
      assert.equal(err.code, 403);
      assert.match(err.message, /cannot create resource "clustergateways\/attach"/);
      return true;
    });
    // 2. A grant too wide by mistake: the hub lets it through, the gateway refuses on the identity.
    const user = `system:open-cluster-management:cluster:${cluster}:addon:cluster-gateway:agent:addon-agent`;
    await grantOnHub(hub, 'e2e-tunnel-too-broad', [hubUser(user)], [attachRule]);
    await waitFor(
      'the gateway to refuse the identity (after the hub allowed it)',
      async () => {
        try {
          await requestAttach(credential, behind, { timeoutMs: 10_000 });
          assert.fail('attached as another cluster');
        } catch (err) {
          assert.ok(err instanceof AttachRefusedError, String(err));
          return /is the agent of cluster "tunnelled" and may only attach as "tunnelled"/.test(err.message);
        }
      },
      { timeoutMs: 15_000 },
    );
    await revokeOnHub(hub, 'e2e-tunnel-too-broad');
    const log = readFileSync(gatewayLog(), 'utf8');
    assert.ok(
      log
        .split('\n')
        .some((l) => l.includes('agent tunnel attach refused') && l.includes(`"cluster":"${behind}"`)),
      'the refusal is in the gateway log',
    );
    assert.ok(Number.isNaN(await gatewayMetric(`cluster_gateway_tunnel_connected{cluster="${behind}"}`)));
  });

  test('a certificate from an unknown CA, or an expired one, is refused by the hub and the agent logs why', async () => {
    const rogueCa = await createCertificateAuthority('rogue-ca');
    // The agent's very subject, signed by a CA the hub does not trust.
    const subject = addonAgentSubject(cluster, 'cluster-gateway');
    const rogue = await rogueCa.issue({
      commonName: subject.user,
      organizations: subject.groups,
      usage: 'client',
    });
    const rogueAgent = await startTunnelAgent(supervisor, {
      cluster,
      managedName: behind,
      hubKubeconfig: agentHubKubeconfig('rogue', rogue),
      name: 'tunnel-agent-rogue',
    });
    try {
      await waitFor(
        'the rogue agent to be refused',
        async () =>
          (await rogueAgent.metric(
            'cluster_gateway_agent_tunnel_attach_failures_total{reason="unauthorized"}',
          )) >= 1,
        { timeoutMs: 30_000 },
      );
      const refused = readFileSync(rogueAgent.process.logPath, 'utf8')
        .split('\n')
        .find((l) => l.includes('cannot attach the tunnel to the gateway'));
      assert.match(
        refused ?? '',
        /"reason":"unauthorized","err":"401: Unauthorized"/,
        'the agent logs the refusal',
      );
    } finally {
      await rogueAgent.process.stop();
    }
    const expired = await agentCertificate(cluster, { validForMs: -60_000 });
    await assert.rejects(
      requestAttach(loadKubeconfig(agentHubKubeconfig('expired', expired)), cluster, { timeoutMs: 10_000 }),
      (err: unknown) => err instanceof AttachRefusedError && err.code === 401,
    );
    // The real agent's tunnel was never disturbed.
    assert.equal(await agent.metric('cluster_gateway_agent_tunnel_connects_total'), 1);
  });

  test("20 held tunnels of a non-exempt identity leave the hub's executing-requests gauge unchanged (5 held PUTs do not)", async () => {
    const names = Array.from({ length: 20 }, (_, i) => `tunnel-apf-${i}`);
    await grantOnHub(
      hub,
      'e2e-tunnel-apf',
      [hubGroup('e2e-tunnel-apf')],
      [
        { ...attachRule, resourceNames: names },
        // For the control below: a request the hub does not consider long-running.
        { apiGroups: ['cluster.core.oam.dev'], resources: ['clustergateways/health'], verbs: ['update'] },
      ],
    );
    const executing = async () => {
      const samples: number[] = [];
      for (let i = 0; i < 7; i++) {
        samples.push(
          sumSeries(
            await hub.request<string>('GET', '/metrics'),
            'apiserver_flowcontrol_current_executing_requests',
          ),
        );
        await new Promise((r) => setTimeout(r, 200));
      }
      return samples;
    };
    const before = await executing();
    const relays: Relay[] = [];
    const held: ClientRequest[] = [];
    try {
      const target = new URL(environmentState().managed.find((m) => m.name === behind)!.server);
      for (const name of names) {
        const cert = await agentCertificate(name, { extraGroups: ['e2e-tunnel-apf'] });
        const connection = loadKubeconfig(agentHubKubeconfig(name, cert));
        const attached = await waitFor(`${name} to attach`, async () => {
          try {
            return await requestAttach(connection, name, { timeoutMs: 10_000 });
          } catch (err) {
            if (err instanceof AttachRefusedError && err.code === 403) return undefined; // RBAC cache
            throw err;
          }
        });
        relays.push(
          new Relay(attached.socket, attached.head, {
            target: { host: target.hostname, port: Number(target.port) },
            metrics: new TunnelMetrics(),
            log: quietLog,
          }),
        );
      }
      for (const name of names) {
        assert.equal(await gatewayMetric(`cluster_gateway_tunnel_connected{cluster="${name}"}`), 1, name);
      }
      const during = await executing();
      process.stderr.write(
        `[tunnel e2e] apiserver_flowcontrol_current_executing_requests: before ${before.join(',')} with 20 tunnels ${during.join(',')}\n`,
      );
      // Were attach not long-running, every tunnel would hold a seat: +20.
      assert.ok(
        median(during) - median(before) < 5,
        `executing requests rose from ${median(before)} to ${median(during)}`,
      );
      // The control: the gauge does see held requests of the same identity that are not long-running
      // (a PUT whose body never finishes stays executing), so the figures above can fail.
      const env = environmentState();
      const hubUrl = new URL(env.hub.server);
      const hubCa = readFileSync(path.join(env.stateDir, 'hub', 'ca.crt'), 'utf8');
      const cert = await agentCertificate(names[0]!, { extraGroups: ['e2e-tunnel-apf'] });
      for (let i = 0; i < 5; i++) {
        const req = https.request({
          host: hubUrl.hostname,
          port: hubUrl.port,
          method: 'PUT',
          path: `${proxyPrefix}/${cluster}/health`,
          headers: { 'content-type': 'application/json', 'content-length': '1000' },
          ca: hubCa,
          cert: cert.cert,
          key: cert.key,
          agent: false,
        });
        req.on('error', () => {});
        req.write('{');
        held.push(req);
      }
      await new Promise((r) => setTimeout(r, 1000));
      const control = await executing();
      process.stderr.write(`[tunnel e2e] with 5 held non-long-running PUTs: ${control.join(',')}\n`);
      assert.ok(median(control) - median(before) >= 4, `held PUTs counted: ${control.join(',')}`);
    } finally {
      for (const req of held) req.destroy();
      for (const relay of relays) relay.destroy();
      await revokeOnHub(hub, 'e2e-tunnel-apf');
    }
  });

  // The environment's hub runs with a shorter --request-timeout than kube-apiserver's 60 s default
  // (hack/localenv/environment.ts): the tunnel must outlive twice the timeout in force, which the control
  // below measures while the tunnel is held.
  test(`the tunnel outlives twice the hub request timeout (${hubRequestTimeoutSeconds} s) with traffic before and after`, async () => {
    const timeoutMs = hubRequestTimeoutSeconds * 1000;
    // The control: a request that is not long-running (a PUT whose body never finishes, as above) is cut
    // by the hub at its request timeout, so the figure the tunnel outlives is the one in force.
    const admin = loadKubeconfig(hubKubeconfig);
    const hubUrl = new URL(admin.server);
    const heldAt = Date.now();
    let held: ClientRequest | undefined;
    const cut = new Promise<{ status: number; afterMs: number }>((resolve, reject) => {
      held = https.request({
        ...admin.options,
        host: hubUrl.hostname,
        port: hubUrl.port,
        method: 'PUT',
        path: `${proxyPrefix}/${cluster}/health`,
        headers: { ...admin.options.headers, 'content-type': 'application/json', 'content-length': '1000' },
        agent: false,
      });
      held.on('response', (res) => {
        res.resume();
        resolve({ status: res.statusCode ?? 0, afterMs: Date.now() - heldAt });
      });
      held.on('error', reject);
      held.write('{');
    });
    cut.catch(() => {}); // awaited below; an early error must not count as unhandled meanwhile
    try {
      const heldFor = 2 * timeoutMs + 5_000;
      const wait = firstConnectAt + heldFor - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      assert.equal(await agent.metric('cluster_gateway_agent_tunnel_connects_total'), 1, 'never reconnected');
      assert.equal(
        (await agent.metric('cluster_gateway_agent_tunnel_connected_since_seconds')) * 1000,
        firstConnectAt,
      );
      const version = JSON.parse(await rawGet('/version')) as { gitVersion?: string };
      assert.ok(
        version.gitVersion,
        `a request through the same tunnel after more than ${2 * hubRequestTimeoutSeconds} s`,
      );
      let timer: NodeJS.Timeout | undefined;
      const control = await Promise.race([
        cut,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error('the hub did not answer the held PUT')),
            heldAt + timeoutMs + 15_000 - Date.now(),
          );
        }),
      ]).finally(() => clearTimeout(timer));
      process.stderr.write(
        `[tunnel e2e] a held PUT was answered ${control.status} after ${(control.afterMs / 1000).toFixed(1)} s\n`,
      );
      assert.equal(control.status, 504, 'the hub cut the held PUT with its request timeout');
      assert.ok(
        control.afterMs >= timeoutMs - 1_000 && control.afterMs < timeoutMs + 10_000,
        `the held PUT cut after ${control.afterMs} ms, the request timeout being ${timeoutMs} ms`,
      );
    } finally {
      held?.destroy();
    }
  });

  test('a frozen agent is noticed within 10 s (a fast 503), and a restarted one serves again at once', async () => {
    process.kill(agent.process.pid, 'SIGSTOP');
    const frozenAt = Date.now();
    try {
      await waitFor(
        'the gateway to drop the tunnel',
        async () =>
          Number.isNaN(await gatewayMetric(`cluster_gateway_tunnel_connected{cluster="${cluster}"}`)),
        { timeoutMs: 15_000, intervalMs: 100 },
      );
      const detectedS = (Date.now() - frozenAt) / 1000;
      process.stderr.write(`[tunnel e2e] frozen agent detected after ${detectedS.toFixed(1)} s\n`);
      assert.ok(detectedS < 10, `detected after ${detectedS} s`);
      const started = Date.now();
      await assert.rejects(rawGet('/version'), /no agent tunnel is connected/);
      assert.ok(Date.now() - started < 3000, 'the 503 came at once');
    } finally {
      process.kill(agent.process.pid, 'SIGCONT');
    }
    await agent.process.stop();
    const restartedAt = Date.now();
    agent = await startTunnelAgent(supervisor, {
      cluster,
      managedName: behind,
      hubKubeconfig: agentKubeconfig,
      name: 'tunnel-agent-restarted',
    });
    await waitFor(
      'a GET through the new tunnel',
      async () => {
        try {
          return Boolean(JSON.parse(await rawGet('/version')).gitVersion);
        } catch {
          return false;
        }
      },
      { timeoutMs: 20_000, intervalMs: 100, failFast: () => agent.process.assertRunning() },
    );
    const backS = (Date.now() - restartedAt) / 1000;
    process.stderr.write(`[tunnel e2e] service back ${backS.toFixed(1)} s after the agent process started\n`);
    assert.ok(backS < 5, `back after ${backS} s`);
  });
});

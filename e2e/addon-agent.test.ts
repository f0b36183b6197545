/**
 * The agent through the real path: `clusteradm addon enable` -> the manager
 * renders ManifestWork addon-cluster-gateway-deploy-0 -> OCM's work agent
 * applies it on cluster1 -> the process runner (the kubelet here) runs the
 * agent Deployment with the registration Secret OCM's registration agent
 * wrote -> the agent renews the hub heartbeat Lease and its spoke Lease.
 * Then: a rotated hub credential is picked up without a restart; a killed
 * agent stops the heartbeat and a restarted one resumes it.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { repoRoot } from '../hack/localenv/binaries.ts';
import { Supervisor } from '../hack/localenv/supervisor.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import { DeploymentRunner } from '../hack/runner/deployment-runner.ts';
import type { KubeClient, KubeObject } from '../shared/kube/client.ts';
import { type AddonManagerProcess, startAddonManager } from './support/addon-manager.ts';
import { clusteradm } from './support/clusteradm.ts';
import { e2eStateDir, environmentState, hubClient, managedClient } from './support/environment.ts';

const addon = 'cluster-gateway';
const cluster = 'cluster1';
const installNamespace = 'open-cluster-management-agent-addon';
const agentImage = 'localhost/cluster-gateway-ts:e2e-agent';
const hubLeasePath = `/apis/coordination.k8s.io/v1/namespaces/${cluster}/leases/${addon}`;
const spokeLeasePath = `/apis/coordination.k8s.io/v1/namespaces/${installNamespace}/leases/${addon}`;
const secretPath = `/api/v1/namespaces/${installNamespace}/secrets/${addon}-hub-kubeconfig`;

type Lease = KubeObject & {
  metadata: { ownerReferences?: { kind: string; name: string }[] };
  spec?: { renewTime?: string; leaseDurationSeconds?: number };
};

describe('addon agent: real path', { concurrency: false }, () => {
  let hub: KubeClient;
  let spoke: KubeClient;
  let manager: AddonManagerProcess;
  let supervisor: Supervisor;
  let runner: DeploymentRunner;

  function startRunner(): DeploymentRunner {
    const env = environmentState();
    const c = env.managed.find((m) => m.name === cluster);
    assert.ok(c);
    const r = new DeploymentRunner({
      clusterName: cluster,
      client: spoke,
      server: c.server,
      caCert: readFileSync(path.join(env.stateDir, cluster, 'ca.crt'), 'utf8'),
      supervisor,
      stateDir: path.join(e2eStateDir, 'addon-agent'),
      images: [agentImage],
      pathMap: { '/app': repoRoot },
      remapPorts: true,
      intervalMs: 300,
    });
    r.start();
    return r;
  }

  /** The running agent process of cluster1 and its remapped HTTP port. */
  function agent() {
    const p = supervisor.processes.find((x) => x.name.endsWith(`${addon}-agent`) && !x.exit);
    if (!p) return undefined;
    const port = Number(p.child.spawnargs.find((a) => a.startsWith('--port='))?.slice('--port='.length));
    return { pid: p.pid, port, process: p };
  }

  async function metric(name: string): Promise<number> {
    const a = agent();
    assert.ok(a, 'agent running');
    const text = await (await fetch(`http://127.0.0.1:${a.port}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(name));
    return Number(line?.split(' ').at(-1) ?? Number.NaN);
  }

  const renewTime = async (client: KubeClient, p: string) =>
    (await client.getOptional<Lease>(p))?.spec?.renewTime;

  /** Waits until the Lease's renewTime moves past `since` (or exists, without it). */
  const renewedAfter = (client: KubeClient, p: string, since: string | undefined, timeoutMs = 20_000) =>
    waitFor(
      `${p} renewed after ${since ?? 'nothing'}`,
      async () => {
        const t = await renewTime(client, p);
        return t !== undefined && (since === undefined || t > since) ? t : undefined;
      },
      { timeoutMs },
    );

  before(async () => {
    hub = await hubClient();
    spoke = await managedClient(cluster);
    supervisor = new Supervisor(path.join(e2eStateDir, 'addon-agent'));
    manager = await startAddonManager('addon-manager-agent', [`--agent-image=${agentImage}`]);
    runner = startRunner();
    await clusteradm('addon', 'enable', '--names', addon, '--clusters', cluster);
  });

  after(async () => {
    await clusteradm('addon', 'disable', '--names', addon, '--clusters', cluster).catch(() => {});
    await runner?.stop();
    await manager?.stop();
    await supervisor?.stop();
    hub?.close();
    spoke?.close();
  });

  test('the agent renews the hub heartbeat and its spoke Lease (MicroTime, owned by its ServiceAccount)', async () => {
    const first = await renewedAfter(hub, hubLeasePath, undefined, 90_000);
    assert.match(first, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/, 'renewTime is a MicroTime');
    await renewedAfter(hub, hubLeasePath, first);
    const spokeFirst = await renewedAfter(spoke, spokeLeasePath, undefined);
    await renewedAfter(spoke, spokeLeasePath, spokeFirst);
    const lease = await spoke.get<Lease>(spokeLeasePath);
    assert.deepEqual(
      lease.metadata.ownerReferences?.map((o) => `${o.kind}/${o.name}`),
      [`ServiceAccount/${addon}-agent`],
      'garbage-collected with the agent ServiceAccount when the addon is disabled',
    );
    assert.equal(await metric('cluster_gateway_agent_healthy'), 1);
  });

  test('a rotated hub credential is picked up without a restart', async () => {
    const before = agent();
    assert.ok(before);
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
    // The agent's client now carries the new certificate: the one whose expiry it reports.
    await waitFor(
      'the agent to use the new hub certificate',
      async () =>
        (await metric('cluster_gateway_agent_client_certificate_not_after_seconds{lease="hub"}')) ===
        newNotAfter,
      { timeoutMs: 30_000 },
    );
    assert.ok((await metric('cluster_gateway_agent_credential_reloads_total{lease="hub"}')) > reloads);
    const afterReload = await renewTime(hub, hubLeasePath);
    await renewedAfter(hub, hubLeasePath, afterReload);
    assert.equal(agent()?.pid, before.pid, 'same process: no restart');
    assert.equal(await metric('cluster_gateway_agent_healthy'), 1);
  });

  test('a killed agent stops the hub heartbeat; a restarted one resumes it', async () => {
    const a = agent();
    assert.ok(a);
    process.kill(a.pid, 'SIGKILL');
    await runner.stop(); // no kubelet: nothing restarts it
    const last = await renewTime(hub, hubLeasePath);
    await new Promise((r) => setTimeout(r, 15_000)); // three renewal intervals
    assert.equal(await renewTime(hub, hubLeasePath), last, 'no renewal while the agent is down');

    const restartedAt = Date.now();
    runner = startRunner();
    await renewedAfter(hub, hubLeasePath, last);
    const seconds = (Date.now() - restartedAt) / 1000;
    assert.ok(seconds < 10, `heartbeat resumed ${seconds.toFixed(1)} s after the restart`);
    assert.notEqual(agent()?.pid, a.pid);
  });
});

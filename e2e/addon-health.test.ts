/**
 * Health against the real hub and the real klusterlet registration agent:
 * - a status sent with the CREATE is dropped by the apiserver (so "create
 *   the addon already Customized" cannot close the LeaseNotFound window);
 * - how often OCM would win the race without the webhook: its LeaseNotFound
 *   delay after creation vs the manager's delay to write Customized;
 * - the manager registers its own webhook (CA in a Secret, the same after a
 *   restart; removed in Lease mode), which rewrites OCM's LeaseNotFound: a
 *   recorder watching from before the enable never sees LeaseNotFound;
 * - with the manager, Available always has a reason and message of ours.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { waitFor } from '../hack/localenv/wait.ts';
import { webhookPath } from '../manager/addon/availability/lease-not-found-webhook.ts';
import { KubeClient } from '../shared/kube/client.ts';
import { startAddonManager } from './support/addon-manager.ts';
import { environmentState, hubClient } from './support/environment.ts';

const addon = 'cluster-gateway';
const clusters = ['cluster1', 'cluster2'];
const api = '/apis/addon.open-cluster-management.io/v1alpha1';
const mcaPath = (c: string) => `${api}/namespaces/${c}/managedclusteraddons/${addon}`;
type Cond = { type: string; status: string; reason: string; message: string };
type Mca = {
  metadata: { name: string; namespace: string };
  status?: { healthCheck?: { mode?: string }; conditions?: Cond[] };
};

let hub: KubeClient;

/** Every Available condition any ManagedClusterAddOn of ours showed, from a watch opened now. */
function record(client: KubeClient) {
  const seen: { at: number; cluster: string; mode?: string; available?: Cond }[] = [];
  const stop = new AbortController();
  void (async () => {
    try {
      for await (const ev of client.watch<Mca>(
        `${api}/managedclusteraddons?fieldSelector=metadata.name=${addon}`,
        stop.signal,
      )) {
        if (ev.type === 'ADDED' || ev.type === 'MODIFIED') {
          const available = ev.object.status?.conditions?.find((c) => c.type === 'Available');
          seen.push({
            at: Date.now(),
            cluster: ev.object.metadata.namespace,
            mode: ev.object.status?.healthCheck?.mode,
            ...(available ? { available } : {}),
          });
        }
      }
    } catch {
      // stopped
    }
  })();
  return { seen, stop: () => stop.abort() };
}

async function enable(cluster: string, body: Record<string, unknown> = {}) {
  await hub.create(`${api}/namespaces/${cluster}/managedclusteraddons`, {
    apiVersion: 'addon.open-cluster-management.io/v1alpha1',
    kind: 'ManagedClusterAddOn',
    metadata: { name: addon, namespace: cluster },
    spec: { installNamespace: 'open-cluster-management-agent-addon' },
    ...body,
  });
}
async function disableAll() {
  for (const c of clusters) await hub.delete(mcaPath(c));
  await waitFor(
    'addons gone',
    async () => (await Promise.all(clusters.map((c) => hub.getOptional(mcaPath(c))))).every((o) => !o),
    {
      timeoutMs: 60_000,
    },
  );
}
const available = (obj: Mca | undefined) => obj?.status?.conditions?.find((c) => c.type === 'Available');

before(async () => {
  hub = await hubClient();
  await disableAll();
});
after(async () => {
  await disableAll().catch(() => {});
  hub?.close();
});

test('a status in the CREATE is dropped (status subresource): creating the addon already Customized is impossible', async () => {
  await enable('cluster1', { status: { healthCheck: { mode: 'Customized' } } });
  const obj = await hub.get<Mca>(mcaPath('cluster1'));
  assert.notEqual(obj.status?.healthCheck?.mode, 'Customized');
  await disableAll();
});

test('measured: OCM writes LeaseNotFound seconds after the enable; the manager writes Customized in well under a second', async () => {
  // Without any manager: when does the registration agent write LeaseNotFound?
  const ocmDelays: number[] = [];
  for (let round = 0; round < 2; round++) {
    const started = Date.now();
    for (const c of clusters) await enable(c);
    const pending = new Set(clusters);
    await waitFor(
      'LeaseNotFound from the registration agent on every cluster',
      async () => {
        for (const c of [...pending]) {
          const cond = available(await hub.getOptional<Mca>(mcaPath(c)));
          if (cond?.reason === 'ManagedClusterAddOnLeaseNotFound') {
            ocmDelays.push((Date.now() - started) / 1000);
            pending.delete(c);
          }
        }
        return pending.size === 0;
      },
      { timeoutMs: 70_000, intervalMs: 100 },
    );
    await disableAll();
  }
  // With the manager: the delay from the enable to healthCheck.mode Customized.
  const manager = await startAddonManager('addon-manager-health-race');
  const managerDelays: number[] = [];
  try {
    for (let round = 0; round < 5; round++) {
      const started = Date.now();
      for (const c of clusters) await enable(c);
      for (const c of clusters) {
        await waitFor(
          `Customized on ${c}`,
          async () => (await hub.get<Mca>(mcaPath(c))).status?.healthCheck?.mode === 'Customized',
          {
            intervalMs: 20,
            timeoutMs: 30_000,
          },
        );
        managerDelays.push((Date.now() - started) / 1000);
      }
      await disableAll();
    }
  } finally {
    await manager.stop();
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const resync = 30;
  console.log(
    `[measure] OCM LeaseNotFound after enable (s): ${ocmDelays.map((d) => d.toFixed(1)).join(', ')}; ` +
      `manager Customized after enable (s): ${managerDelays.map((d) => d.toFixed(2)).join(', ')}; ` +
      `estimated chance OCM wins without the webhook: ${((100 * mean(managerDelays)) / resync).toFixed(1)}% per enable (uniform phase of a ${resync}s resync)`,
  );
  assert.ok(ocmDelays.every((d) => d > 0));
  assert.ok(Math.max(...managerDelays) < 5, 'the manager writes Customized within seconds');
});

test("the manager registers its webhook (CA kept in a Secret, reused on restart): OCM's LeaseNotFound write is rewritten, never seen by a watcher", async () => {
  const webhookConfigPath = `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${addon}-addon-available`;
  type WebhookConfig = {
    webhooks: {
      failurePolicy: string;
      matchConditions: { expression: string }[];
      clientConfig: { url?: string; caBundle: string };
    }[];
  };
  const registered = (port: number) =>
    waitFor('the manager to register its webhook', async () => {
      const config = await hub.getOptional<WebhookConfig>(webhookConfigPath);
      return config?.webhooks[0]?.clientConfig.url === `https://127.0.0.1:${port}${webhookPath}`
        ? config
        : undefined;
    });
  let manager = await startAddonManager('addon-manager-webhook', [], { webhook: true });
  const first = await registered(manager.webhookPort);
  const webhook = first.webhooks[0];
  assert.equal(webhook?.failurePolicy, 'Ignore');
  assert.deepEqual(
    webhook?.matchConditions.map((c) => c.expression),
    [`object.metadata.name == '${addon}'`],
  );
  // The CA in the registration is the one kept in the manager's Secret, and a restart keeps it.
  const secret = await hub.get<{ data: Record<string, string> }>(
    `/api/v1/namespaces/open-cluster-management-hub/secrets/${addon}-addon-manager-webhook`,
  );
  assert.equal(
    Buffer.from(webhook?.clientConfig.caBundle ?? '', 'base64')
      .toString()
      .trim(),
    Buffer.from(secret.data['ca.crt'] ?? '', 'base64')
      .toString()
      .trim(),
  );
  await manager.stop();
  manager = await startAddonManager('addon-manager-webhook-restarted', [], { webhook: true });
  const again = await registered(manager.webhookPort);
  assert.equal(
    again.webhooks[0]?.clientConfig.caBundle,
    webhook?.clientConfig.caBundle,
    'same CA after a restart',
  );

  const recorder = record(hub);
  try {
    for (const c of clusters) await enable(c);
    for (const c of clusters) {
      await waitFor(`healthCheck.mode Customized on ${c}`, async () => {
        return (await hub.get<Mca>(mcaPath(c))).status?.healthCheck?.mode === 'Customized';
      });
    }
    // The registration agent's own kind of write, with its own identity: a merge patch of LeaseNotFound.
    const agent = await KubeClient.fromKubeconfig(
      path.join(environmentState().stateDir, 'klusterlet', 'cluster1', 'hub-kubeconfig', 'kubeconfig'),
    );
    const written = await agent.mergePatch<Mca>(
      `${mcaPath('cluster1').replace('/v1alpha1/', '/v1beta1/')}/status`,
      {
        status: {
          healthCheck: { mode: 'Lease' },
          conditions: [
            {
              type: 'Available',
              status: 'Unknown',
              reason: 'ManagedClusterAddOnLeaseNotFound',
              message: `The status of ${addon} add-on is unknown.`,
              lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
            },
          ],
        },
      },
    );
    agent.close();
    // Rewritten in admission: the object as stored never said LeaseNotFound.
    assert.ok(available(written)?.reason, 'an Available with a reason');
    assert.notEqual(available(written)?.reason, 'ManagedClusterAddOnLeaseNotFound');
    assert.equal(written.status?.healthCheck?.mode, 'Customized');
    // One full resync (30 s) of the real registration agent, then: nobody ever saw LeaseNotFound.
    await new Promise((r) => setTimeout(r, 35_000));
    const bad = recorder.seen.filter((s) => s.available?.reason === 'ManagedClusterAddOnLeaseNotFound');
    assert.deepEqual(bad, [], 'no watcher ever saw LeaseNotFound');
  } finally {
    recorder.stop();
    await manager.stop();
    await disableAll();
  }
  // Lease health mode: OCM's verdicts count, the manager removes its webhook.
  const leaseMode = await startAddonManager('addon-manager-webhook-lease', ['--health-mode=Lease'], {
    webhook: true,
  });
  try {
    await waitFor(
      'the webhook to be removed in Lease mode',
      async () => !(await hub.getOptional(webhookConfigPath)),
    );
  } finally {
    await leaseMode.stop();
  }
});

test('with the manager: every Available a watcher sees carries a reason and message, never LeaseNotFound', async () => {
  const recorder = record(hub);
  const manager = await startAddonManager('addon-manager-health', [], { webhook: true });
  try {
    for (const c of clusters) await enable(c);
    for (const c of clusters) {
      await waitFor(`Available on ${c}`, async () => available(await hub.get<Mca>(mcaPath(c))), {
        timeoutMs: 30_000,
      });
    }
    // Long enough for the registration agent's 30 s resync to have looked at least once.
    await new Promise((r) => setTimeout(r, 35_000));
    const reasons = recorder.seen
      .filter((s) => s.available)
      .map((s) => `${s.cluster}:${s.available?.status}/${s.available?.reason}`);
    console.log(`[health] Available as seen by a watcher: ${[...new Set(reasons)].join(', ')}`);
    for (const s of recorder.seen) {
      if (!s.available) continue;
      assert.notEqual(s.available.reason, 'ManagedClusterAddOnLeaseNotFound');
      assert.ok(s.available.reason && s.available.message, 'reason and message');
    }
  } finally {
    recorder.stop();
    await manager.stop();
  }
});

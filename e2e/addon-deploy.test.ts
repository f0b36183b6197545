/**
 * The addon manager's deployment path against the real OCM hub, work agent
 * and registration agent: `clusteradm addon enable` -> ManifestWork
 * addon-<addon>-deploy-0 -> the work agent applies the agent's manifests on
 * cluster1; an AddOnDeploymentConfig change updates them; `clusteradm addon
 * disable` removes the work and everything it made on cluster1; two
 * managers, the leader killed, the other takes over within 15 s.
 * (The agent never runs here: its image is on a registry this machine cannot reach. Files that run it
 * use the image built here: addon-agent, tunnel-addon, addon-lifecycle.)
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { waitFor } from '../hack/localenv/wait.ts';
import type { KubeClient, KubeObject } from '../shared/kube/client.ts';
import { type AddonManagerProcess, startAddonManager } from './support/addon-manager.ts';
import { clusteradm } from './support/clusteradm.ts';
import { hubClient, managedClient } from './support/environment.ts';

const addon = 'cluster-gateway';
const cluster = 'cluster1';
const addonApi = '/apis/addon.open-cluster-management.io/v1alpha1';
const workPath = `/apis/work.open-cluster-management.io/v1/namespaces/${cluster}/manifestworks/addon-${addon}-deploy-0`;
const mcaPath = `${addonApi}/namespaces/${cluster}/managedclusteraddons/${addon}`;
const configNamespace = 'open-cluster-management-hub';
const defaultConfigPath = `${addonApi}/namespaces/${configNamespace}/addondeploymentconfigs/${addon}-default`;
const sharedNamespace = 'open-cluster-management-agent-addon';
const dedicatedNamespace = 'cluster-gateway-e2e';
const agentImage = 'registry.example.com/oam-dev/cluster-gateway-ts:e2e';

type Work = KubeObject & {
  spec: { workload: { manifests: KubeObject[] }; manifestConfigs?: unknown[]; deleteOption?: unknown };
  status?: { conditions?: { type: string; status: string }[] };
};
type Addon = KubeObject & {
  status?: {
    conditions?: {
      type: string;
      status: string;
      reason: string;
      message: string;
      lastTransitionTime: string;
    }[];
  };
};
type Deployment = KubeObject & {
  spec: {
    template: {
      metadata: { annotations?: Record<string, string> };
      spec: Record<string, unknown> & {
        containers: {
          args: string[];
          image: string;
          env?: { name: string; value: string }[];
          resources?: unknown;
        }[];
      };
    };
  };
};

/** A manager with leader election on (the two-managers test), the hub admin kubeconfig, its own probe port. */
function startManager(logName: string): Promise<AddonManagerProcess> {
  return startAddonManager(logName, [
    '--leader-elect=true',
    `--namespace=${configNamespace}`,
    `--agent-image=${agentImage}`,
  ]);
}

function manifest(work: Work, kind: string): KubeObject & Record<string, unknown> {
  const found = work.spec.workload.manifests.find((m) => m.kind === kind);
  assert.ok(found, `the work has a ${kind}`);
  return found as KubeObject & Record<string, unknown>;
}

async function condition(hub: KubeClient, type: string) {
  const mca = await hub.getOptional<Addon>(mcaPath);
  return mca?.status?.conditions?.find((c) => c.type === type);
}

type ConfigSpecHash = { name: string; namespace?: string; specHash?: string };
type ConfigRef = {
  resource: string;
  desiredConfig?: ConfigSpecHash;
  lastAppliedConfig?: ConfigSpecHash;
};

/**
 * OCM's addon-manager reports the rollout done: Progressing False/Completed, which it says only when the
 * deploy work carries the spec hashes of the ManagedClusterAddOn's configs (written by our manager).
 */
async function progressingCompleted(hub: KubeClient, previousHash?: string) {
  const done = await waitFor(
    'Progressing False/Completed from OCM with the config spec hash applied',
    async () => {
      const mca = await hub.get<Addon & { status?: { configReferences?: ConfigRef[] } }>(mcaPath);
      const progressing = mca.status?.conditions?.find((c) => c.type === 'Progressing');
      const ref = mca.status?.configReferences?.find((r) => r.resource === 'addondeploymentconfigs');
      const hash = ref?.desiredConfig?.specHash;
      return progressing?.reason === 'Completed' &&
        hash &&
        hash !== previousHash &&
        ref?.lastAppliedConfig?.specHash === hash
        ? { progressing, hash }
        : undefined;
    },
    { timeoutMs: 30_000 },
  );
  assert.equal(done.progressing.status, 'False');
  assert.equal(done.progressing.message, 'completed with no errors.');
  assert.match(done.hash, /^[0-9a-f]{64}$/);
  const cma = await hub.get<KubeObject & { status?: { defaultconfigReferences?: ConfigRef[] } }>(
    `${addonApi}/clustermanagementaddons/${addon}`,
  );
  assert.equal(cma.status?.defaultconfigReferences?.[0]?.desiredConfig?.specHash, done.hash);
  const work = await hub.get<Work>(workPath);
  assert.match(
    work.metadata?.annotations?.['open-cluster-management.io/config-spec-hash'] ?? '',
    new RegExp(done.hash),
  );
  return done.hash;
}

function agentPaths(ns: string) {
  return {
    namespace: `/api/v1/namespaces/${ns}`,
    serviceAccount: `/api/v1/namespaces/${ns}/serviceaccounts/${addon}-agent`,
    role: `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles/${addon}-agent`,
    roleBinding: `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings/${addon}-agent`,
    deployment: `/apis/apps/v1/namespaces/${ns}/deployments/${addon}-agent`,
    lease: `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${addon}`,
  };
}

describe('addon manager: deploy path', { concurrency: false }, () => {
  let hub: KubeClient;
  let spoke: KubeClient;
  let manager: AddonManagerProcess | undefined;
  let httpPort = 0;
  let configHash: string | undefined;

  before(async () => {
    hub = await hubClient();
    spoke = await managedClient(cluster);
    manager = await startManager('addon-manager-deploy');
    httpPort = manager.httpPort;
  });

  after(async () => {
    await clusteradm('addon', 'disable', '--names', addon, '--clusters', 'cluster1,cluster2').catch(() => {});
    await manager?.stop();
    await hub?.delete(`${addonApi}/namespaces/${configNamespace}/addondeploymentconfigs/${addon}-e2e`);
    hub?.close();
    spoke?.close();
  });

  test('the manager declares the ClusterManagementAddOn and its default AddOnDeploymentConfig', async () => {
    const cma = await waitFor('the ClusterManagementAddOn', () =>
      hub.getOptional<KubeObject & { spec: Record<string, any> }>(
        `${addonApi}/clustermanagementaddons/${addon}`,
      ),
    );
    assert.equal(cma.spec.addOnMeta.displayName, 'Cluster Gateway');
    assert.ok(cma.spec.addOnMeta.description);
    assert.deepEqual(cma.spec.installStrategy, { type: 'Manual' });
    assert.deepEqual(cma.spec.supportedConfigs, [
      {
        group: 'addon.open-cluster-management.io',
        resource: 'addondeploymentconfigs',
        defaultConfig: { namespace: configNamespace, name: `${addon}-default` },
      },
    ]);
    // The v1beta1 view (what OCM v1.3 components read) through OCM's conversion webhook.
    const beta = await hub.get<KubeObject & { spec: Record<string, any> }>(
      `/apis/addon.open-cluster-management.io/v1beta1/clustermanagementaddons/${addon}`,
    );
    assert.deepEqual(beta.spec.defaultConfigs, [
      {
        group: 'addon.open-cluster-management.io',
        resource: 'addondeploymentconfigs',
        namespace: configNamespace,
        name: `${addon}-default`,
      },
    ]);
    const adc = await waitFor('the default AddOnDeploymentConfig', () =>
      hub.getOptional<KubeObject & { spec: Record<string, any> }>(defaultConfigPath),
    );
    assert.deepEqual(adc.spec.customizedVariables, [{ name: 'LOG_LEVEL', value: 'info' }]);
  });

  test('clusteradm addon enable: the deploy ManifestWork, applied by the real work agent on cluster1', async () => {
    await clusteradm('addon', 'enable', '--names', addon, '--clusters', cluster);
    const work = await waitFor('the deploy ManifestWork', () => hub.getOptional<Work>(workPath), {
      timeoutMs: 30_000,
    });
    assert.equal(work.metadata?.labels?.['open-cluster-management.io/addon-name'], addon);
    assert.deepEqual(
      work.spec.workload.manifests.map((m) => `${m.kind}/${m.metadata?.namespace ?? ''}/${m.metadata?.name}`),
      [
        `Namespace//${sharedNamespace}`,
        `ServiceAccount/${sharedNamespace}/${addon}-agent`,
        `Role/${sharedNamespace}/${addon}-agent`,
        `RoleBinding/${sharedNamespace}/${addon}-agent`,
        `Deployment/${sharedNamespace}/${addon}-agent`,
      ],
    );
    // Least RBAC: its own Lease, nothing else.
    assert.deepEqual(manifest(work, 'Role').rules, [
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        resourceNames: [addon],
        verbs: ['get', 'update', 'patch'],
      },
    ]);
    const deployment = manifest(work, 'Deployment') as unknown as Deployment;
    const pod = deployment.spec.template.spec;
    const container = pod.containers[0];
    assert.ok(container);
    assert.equal(container.image, agentImage);
    assert.deepEqual(container.args, [
      `--cluster-name=${cluster}`,
      `--addon-name=${addon}`,
      `--install-namespace=${sharedNamespace}`,
      '--hub-kubeconfig=/managed/hub-kubeconfig/kubeconfig',
      '--port=8080',
      '--log-level=info',
    ]);
    assert.deepEqual(pod.volumes, [
      { name: 'hub-kubeconfig', secret: { secretName: `${addon}-hub-kubeconfig` } },
    ]);
    // The shared namespace is orphaned, never deleted, on disable; status feedback on the agent Deployment.
    assert.deepEqual(work.spec.deleteOption, {
      propagationPolicy: 'SelectivelyOrphan',
      selectivelyOrphans: { orphaningRules: [{ group: '', resource: 'namespaces', name: sharedNamespace }] },
    });
    assert.match(JSON.stringify(work.spec.manifestConfigs), /WellKnownStatus/);

    // The real work agent applied it on cluster1.
    const paths = agentPaths(sharedNamespace);
    for (const [what, path] of Object.entries(paths)) {
      if (what === 'lease') continue;
      await waitFor(`${what} on cluster1`, () => spoke.getOptional(path), { timeoutMs: 30_000 });
    }
    const applied = await waitFor(
      'ManifestApplied True',
      async () => {
        const c = await condition(hub, 'ManifestApplied');
        return c?.status === 'True' ? c : undefined;
      },
      { timeoutMs: 30_000 },
    );
    assert.equal(applied.reason, 'AddonManifestApplied');
    assert.equal(applied.message, 'manifests of addon are applied successfully');
    configHash = await progressingCompleted(hub);
    // Status feedback from the agent Deployment, as cluster1's own controllers report it: its image is on
    // a registry this machine cannot reach, so the pod never starts and the Deployment stays unavailable.
    const feedback = await waitFor(
      'status feedback of the agent Deployment',
      async () => {
        const w = await hub.get<
          Work & {
            status?: {
              resourceStatus?: {
                manifests?: {
                  resourceMeta: { kind: string };
                  statusFeedback?: {
                    values?: { name: string; fieldValue: { integer?: number; string?: string } }[];
                  };
                }[];
              };
            };
          }
        >(workPath);
        const values = w.status?.resourceStatus?.manifests?.find((m) => m.resourceMeta.kind === 'Deployment')
          ?.statusFeedback?.values;
        return values?.some((v) => v.name === 'AvailableMessage') ? values : undefined;
      },
      { timeoutMs: 60_000 },
    );
    const value = (name: string) => feedback.find((v) => v.name === name)?.fieldValue;
    assert.equal(value('Replicas')?.integer, 1, 'WellKnownStatus');
    assert.equal(value('AvailableStatus')?.string, 'False');
    assert.equal(value('AvailableMessage')?.string, 'Deployment does not have minimum availability.');
  });

  test('an AddOnDeploymentConfig change rolls the agent out again, on the hub and on cluster1', async () => {
    const agentResources = { requests: { cpu: '20m', memory: '96Mi' }, limits: { memory: '192Mi' } };
    const before = await hub.get<Work>(workPath);
    const beforeHash = (manifest(before, 'Deployment') as unknown as Deployment).spec.template.metadata
      .annotations?.['addon.cluster-gateway.oam.dev/config-hash'];
    await hub.mergePatch(defaultConfigPath, {
      spec: {
        customizedVariables: [{ name: 'LOG_LEVEL', value: 'debug' }],
        nodePlacement: {
          nodeSelector: { 'kubernetes.io/os': 'linux' },
          tolerations: [{ key: 'edge', operator: 'Exists' }],
        },
        registries: [{ source: 'registry.example.com/oam-dev', mirror: 'mirror.example.org/cg' }],
        proxyConfig: { httpsProxy: 'http://proxy.example.com:3128', noProxy: '10.0.0.0/8' },
        resourceRequirements: [{ containerID: 'deployments:*:agent', resources: agentResources }],
      },
    });
    const work = await waitFor(
      'the work to carry the new config',
      async () => {
        const w = await hub.get<Work>(workPath);
        const d = manifest(w, 'Deployment') as unknown as Deployment;
        return d.spec.template.spec.containers[0]?.args.includes('--log-level=debug') ? w : undefined;
      },
      { timeoutMs: 30_000 },
    );
    const deployment = manifest(work, 'Deployment') as unknown as Deployment;
    const pod = deployment.spec.template.spec;
    assert.equal(pod.containers[0]?.image, 'mirror.example.org/cg/cluster-gateway-ts:e2e');
    assert.deepEqual(pod.nodeSelector, { 'kubernetes.io/os': 'linux' });
    assert.deepEqual(pod.tolerations, [{ key: 'edge', operator: 'Exists' }]);
    assert.deepEqual(pod.containers[0]?.resources, agentResources);
    assert.deepEqual(
      pod.containers[0]?.env?.filter(
        (e) => e.name === 'HTTPS_PROXY' || e.name === 'NO_PROXY' || e.name === 'NODE_USE_ENV_PROXY',
      ),
      [
        { name: 'HTTPS_PROXY', value: 'http://proxy.example.com:3128' },
        { name: 'NO_PROXY', value: '10.0.0.0/8' },
        { name: 'NODE_USE_ENV_PROXY', value: '1' },
      ],
    );
    assert.notEqual(
      deployment.spec.template.metadata.annotations?.['addon.cluster-gateway.oam.dev/config-hash'],
      beforeHash,
    );
    await waitFor(
      'the agent Deployment on cluster1 to be updated',
      async () => {
        const d = await spoke.get<Deployment>(agentPaths(sharedNamespace).deployment);
        const agent = d.spec.template.spec.containers[0];
        return (
          agent?.args.includes('--log-level=debug') && isDeepStrictEqual(agent.resources, agentResources)
        );
      },
      { timeoutMs: 30_000 },
    );
    configHash = await progressingCompleted(hub, configHash);
  });

  test('an invalid AddOnDeploymentConfig is reported in ManifestApplied and leaves the agent as it runs', async () => {
    const before = await hub.get<Work>(workPath);
    await hub.mergePatch(defaultConfigPath, {
      spec: { customizedVariables: [{ name: 'LOG_LEVEL', value: 'loud' }] },
    });
    const failed = await waitFor(
      'ManifestApplied False',
      async () => {
        const c = await condition(hub, 'ManifestApplied');
        return c?.status === 'False' ? c : undefined;
      },
      { timeoutMs: 30_000 },
    );
    assert.equal(failed.reason, 'ManifestWorkApplyFailed');
    assert.match(failed.message, /LOG_LEVEL "loud" is not one of/);
    const after = await hub.get<Work>(workPath);
    assert.deepEqual(after.spec, before.spec);
    await hub.mergePatch(defaultConfigPath, {
      spec: { customizedVariables: [{ name: 'LOG_LEVEL', value: 'info' }] },
    });
    await waitFor(
      'ManifestApplied True again',
      async () => (await condition(hub, 'ManifestApplied'))?.status === 'True',
      {
        timeoutMs: 30_000,
      },
    );
  });

  test('a dedicated install namespace; disable removes the work and everything on cluster1', async () => {
    await hub.apply(
      `${addonApi}/namespaces/${configNamespace}/addondeploymentconfigs/${addon}-e2e`,
      {
        apiVersion: 'addon.open-cluster-management.io/v1alpha1',
        kind: 'AddOnDeploymentConfig',
        metadata: { name: `${addon}-e2e`, namespace: configNamespace },
        spec: { agentInstallNamespace: dedicatedNamespace },
      },
      'e2e',
    );
    await hub.mergePatch(mcaPath, {
      spec: {
        configs: [
          {
            group: 'addon.open-cluster-management.io',
            resource: 'addondeploymentconfigs',
            namespace: configNamespace,
            name: `${addon}-e2e`,
          },
        ],
      },
    });
    const dedicated = agentPaths(dedicatedNamespace);
    const shared = agentPaths(sharedNamespace);
    await waitFor(
      'the agent Deployment in the dedicated namespace on cluster1',
      () => spoke.getOptional(dedicated.deployment),
      {
        timeoutMs: 30_000,
      },
    );
    // The work agent removes what left the work: nothing stays in the shared namespace.
    await waitFor(
      'the agent to leave the shared namespace',
      async () => {
        for (const what of ['serviceAccount', 'role', 'roleBinding', 'deployment'] as const) {
          if (await spoke.getOptional(shared[what])) return false;
        }
        return true;
      },
      { timeoutMs: 30_000 },
    );
    assert.ok(await spoke.getOptional(shared.namespace), 'the shared namespace stays');
    const work = await hub.get<Work>(workPath);
    assert.equal(work.spec.deleteOption, undefined, 'a dedicated namespace goes with the work');

    // The agent's Lease, as the agent creates it (owned by its ServiceAccount).
    const sa = await spoke.get(dedicated.serviceAccount);
    await spoke.create(`/apis/coordination.k8s.io/v1/namespaces/${dedicatedNamespace}/leases`, {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: addon,
        namespace: dedicatedNamespace,
        ownerReferences: [
          {
            apiVersion: 'v1',
            kind: 'ServiceAccount',
            name: `${addon}-agent`,
            uid: sa.metadata?.uid as string,
          },
        ],
      },
      spec: {
        holderIdentity: 'agent',
        leaseDurationSeconds: 60,
        renewTime: new Date().toISOString().replace(/\.(\d{3})Z$/, '.$1000Z'),
      },
    });

    await clusteradm('addon', 'disable', '--names', addon, '--clusters', cluster);
    await waitFor('the ManagedClusterAddOn to go', async () => !(await hub.getOptional(mcaPath)), {
      timeoutMs: 30_000,
    });
    await waitFor('the deploy ManifestWork to go', async () => !(await hub.getOptional(workPath)), {
      timeoutMs: 60_000,
    });
    await waitFor(
      'nothing of the agent left on cluster1',
      async () => {
        for (const path of [
          ...Object.values(dedicated),
          shared.serviceAccount,
          shared.role,
          shared.roleBinding,
          shared.deployment,
          shared.lease,
          `/api/v1/namespaces/${sharedNamespace}/secrets/${addon}-hub-kubeconfig`,
        ]) {
          if (await spoke.getOptional(path)) return false;
        }
        return true;
      },
      { timeoutMs: 90_000 },
    );
  });

  test('two managers: kill the leader, the other takes over within 15 s and keeps the status steady', async () => {
    await clusteradm('addon', 'enable', '--names', addon, '--clusters', cluster);
    await waitFor(
      'ManifestApplied True',
      async () => (await condition(hub, 'ManifestApplied'))?.status === 'True',
      {
        timeoutMs: 60_000,
      },
    );
    const steady = await condition(hub, 'ManifestApplied');
    const standby = await startManager('addon-manager-standby');
    const standbyPort = standby.httpPort;
    try {
      const leader = async (port: number) => {
        const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        return /^cluster_gateway_addon_manager_leader 1$/m.test(text);
      };
      assert.equal(await leader(httpPort), true, 'the first manager leads');
      await new Promise((r) => setTimeout(r, 3000));
      assert.equal(await leader(standbyPort), false, 'the second one waits');

      const killedAt = Date.now();
      manager?.process.kill('SIGKILL');
      await waitFor('the standby to lead', () => leader(standbyPort), { timeoutMs: 20_000, intervalMs: 100 });
      const takeoverMs = Date.now() - killedAt;
      process.stderr.write(`[addon-deploy] leader killed (SIGKILL): standby took over in ${takeoverMs} ms\n`);
      assert.ok(takeoverMs <= 15_000, `took over in ${takeoverMs} ms`);

      // The new leader reconciles: cluster2 gets its work; cluster1's status did not flap.
      await clusteradm('addon', 'enable', '--names', addon, '--clusters', 'cluster2');
      await waitFor(
        'the deploy work of cluster2',
        () =>
          hub.getOptional(
            `/apis/work.open-cluster-management.io/v1/namespaces/cluster2/manifestworks/addon-${addon}-deploy-0`,
          ),
        { timeoutMs: 30_000 },
      );
      const now = await condition(hub, 'ManifestApplied');
      assert.equal(now?.status, 'True');
      assert.equal(now?.lastTransitionTime, steady?.lastTransitionTime, 'no transition across the takeover');
    } finally {
      await clusteradm('addon', 'disable', '--names', addon, '--clusters', 'cluster1,cluster2').catch(
        () => {},
      );
      await waitFor(
        'the deploy works to go',
        async () =>
          !(await hub.getOptional(workPath)) &&
          !(await hub.getOptional(
            `/apis/work.open-cluster-management.io/v1/namespaces/cluster2/manifestworks/addon-${addon}-deploy-0`,
          )),
        { timeoutMs: 60_000 },
      ).catch(() => {});
      await standby.stop();
    }
  });
});

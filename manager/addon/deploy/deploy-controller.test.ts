import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pino from 'pino';
import type { Informer } from '../../../shared/kube/informer.ts';
import { defineAddon } from '../core/addon.ts';
import type { AddOnDeploymentConfig, ManagedClusterAddOn, ManifestWork } from '../core/resources.ts';
import { DeployController } from './deploy-controller.ts';

const addon = defineAddon({
  addonName: 'cluster-gateway',
  displayName: 'Cluster Gateway',
  description: 'd',
  agentImage: 'img:1',
  agentInstallNamespace: 'open-cluster-management-agent-addon',
  namespace: 'cg-system',
  healthMode: 'Customized',
  installPlacements: [],
});

/** The part of an Informer the controller reads, over a Map. */
function store<T extends { metadata: { name: string; namespace?: string } }>(items: T[] = []) {
  const map = new Map(
    items.map((i) => [
      i.metadata.namespace ? `${i.metadata.namespace}/${i.metadata.name}` : i.metadata.name,
      i,
    ]),
  );
  return {
    map,
    informer: {
      get: (k: string) => map.get(k),
      list: () => [...map.values()],
      on: () => () => {},
      synced: Promise.resolve(),
    } as unknown as Informer<T>,
  };
}

function setup(opts: { mca?: ManagedClusterAddOn; work?: ManifestWork; adcs?: AddOnDeploymentConfig[] }) {
  const calls: { verb: string; path: string; body?: any }[] = [];
  const hub = {
    apply: async (path: string, body: any) => {
      calls.push({ verb: 'apply', path, body });
      return body;
    },
    delete: async (path: string) => void calls.push({ verb: 'delete', path }),
  };
  const mcas = store(opts.mca ? [opts.mca] : []);
  const works = store(opts.work ? [opts.work] : []);
  const controller = new DeployController({
    hub: hub as never,
    addon,
    log: pino({ level: 'silent' }),
    informers: {
      managedClusterAddOns: mcas.informer,
      clusterManagementAddOns: store().informer as never,
      addOnDeploymentConfigs: store(opts.adcs ?? []).informer,
      manifestWorks: works.informer,
    },
  });
  return { controller, calls, works };
}

const registered = {
  type: 'RegistrationApplied',
  status: 'True' as const,
  reason: 'SetPermissionApplied',
  message: '',
};
/** An enabled addon whose registration the registration controller has configured. */
const mca = (extra: Partial<ManagedClusterAddOn> = {}): ManagedClusterAddOn => ({
  metadata: { name: 'cluster-gateway', namespace: 'cluster1', uid: 'u1' },
  ...extra,
  status: { ...extra.status, conditions: [registered, ...(extra.status?.conditions ?? [])] },
});
const workPath =
  '/apis/work.open-cluster-management.io/v1/namespaces/cluster1/manifestworks/addon-cluster-gateway-deploy-0';
const statusPath =
  '/apis/addon.open-cluster-management.io/v1alpha1/namespaces/cluster1/managedclusteraddons/cluster-gateway/status';

describe('DeployController.reconcile', () => {
  test('an enabled addon gets its work; the next reconcile writes nothing', async () => {
    const { controller, calls, works } = setup({ mca: mca() });
    await controller.reconcile('cluster1');
    assert.deepEqual(
      calls.map((c) => `${c.verb} ${c.path}`),
      [`apply ${workPath}`],
    );
    works.map.set('cluster1/addon-cluster-gateway-deploy-0', calls[0]?.body);
    calls.length = 0;
    await controller.reconcile('cluster1');
    assert.deepEqual(calls, [], 'idempotent: nothing to write');
  });

  test('no work before RegistrationApplied (as addon-framework): the agent needs what registration sets up', async () => {
    const unregistered = { ...mca(), status: {} };
    const { controller, calls } = setup({ mca: unregistered });
    await controller.reconcile('cluster1');
    assert.deepEqual(calls, []);
  });

  test('the applied work sets ManifestApplied with OCM strings, once', async () => {
    const first = setup({ mca: mca() });
    await first.controller.reconcile('cluster1');
    const work = {
      ...first.calls[0]?.body,
      status: { conditions: [{ type: 'Applied', status: 'True', reason: 'x', message: '' }] },
    };
    const { controller, calls } = setup({ mca: mca(), work });
    await controller.reconcile('cluster1');
    assert.deepEqual(
      calls.map((c) => `${c.verb} ${c.path}`),
      [`apply ${statusPath}`],
    );
    const [condition] = calls[0]?.body.status.conditions ?? [];
    assert.equal(condition.reason, 'AddonManifestApplied');
    assert.match(condition.lastTransitionTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const again = setup({ mca: mca({ status: { conditions: [condition] } }), work });
    await again.controller.reconcile('cluster1');
    assert.deepEqual(again.calls, []);
  });

  test('a disabled addon: its work is deleted (also when it is being deleted)', async () => {
    const work = {
      metadata: { name: 'addon-cluster-gateway-deploy-0', namespace: 'cluster1' },
    } as ManifestWork;
    const gone = setup({ work });
    await gone.controller.reconcile('cluster1');
    assert.deepEqual(
      gone.calls.map((c) => `${c.verb} ${c.path}`),
      [`delete ${workPath}`],
    );
    const deleting = setup({
      mca: mca({ metadata: { name: 'cluster-gateway', namespace: 'cluster1', deletionTimestamp: 'now' } }),
      work,
    });
    await deleting.controller.reconcile('cluster1');
    assert.deepEqual(
      deleting.calls.map((c) => c.verb),
      ['delete'],
    );
    const nothing = setup({});
    await nothing.controller.reconcile('cluster1');
    assert.deepEqual(nothing.calls, []);
  });

  test('a missing or invalid config is reported and the work left as it is', async () => {
    const ref = {
      spec: {
        configs: [
          {
            group: 'addon.open-cluster-management.io',
            resource: 'addondeploymentconfigs',
            namespace: 'cg-system',
            name: 'cfg',
          },
        ],
      },
    };
    const missing = setup({ mca: mca(ref) });
    await missing.controller.reconcile('cluster1');
    assert.deepEqual(
      missing.calls.map((c) => `${c.verb} ${c.path}`),
      [`apply ${statusPath}`],
    );
    const c1 = missing.calls[0]?.body.status.conditions[0];
    assert.equal(c1.reason, 'ManifestWorkApplyFailed');
    assert.match(
      c1.message,
      /AddOnDeploymentConfig cg-system\/cfg \(referenced by spec.configs\) does not exist/,
    );

    const invalid = setup({
      mca: mca(ref),
      adcs: [
        {
          metadata: { name: 'cfg', namespace: 'cg-system' },
          spec: { customizedVariables: [{ name: 'LOG_LEVEL', value: 'x' }] },
        },
      ],
    });
    await invalid.controller.reconcile('cluster1');
    assert.deepEqual(
      invalid.calls.map((c) => c.path),
      [statusPath],
    );
    assert.match(
      invalid.calls[0]?.body.status.conditions[0].message,
      /LOG_LEVEL "x".*keeps its previous configuration/,
    );
  });

  test('a failed apply is reported and retried (the error propagates to the queue)', async () => {
    const calls: string[] = [];
    const failing = new DeployController({
      hub: {
        apply: async (path: string) => {
          calls.push(path);
          if (path.endsWith('deploy-0')) throw new Error('admission denied');
          return {};
        },
        delete: async () => {},
      } as never,
      addon,
      log: pino({ level: 'silent' }),
      informers: {
        managedClusterAddOns: store([mca()]).informer,
        clusterManagementAddOns: store().informer as never,
        addOnDeploymentConfigs: store().informer as never,
        manifestWorks: store().informer as never,
      },
    });
    await assert.rejects(failing.reconcile('cluster1'), /admission denied/);
    assert.deepEqual(calls, [workPath, statusPath]);
  });
});

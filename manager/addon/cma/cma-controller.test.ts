import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import type { KubeObject } from '../../../shared/kube/client.ts';
import type { InformerHandlers } from '../../../shared/kube/informer.ts';
import { defineAddon } from '../core/addon.ts';
import type { AddOnDeploymentConfig, ClusterManagementAddOn } from '../core/resources.ts';
import { clusterManagementAddOn } from './cluster-management-addon.ts';
import { ClusterManagementAddOnController } from './cma-controller.ts';

const addon = defineAddon({
  addonName: 'cluster-gateway',
  displayName: 'Cluster Gateway',
  description: 'The gateway',
  agentImage: 'img:1',
  agentInstallNamespace: 'open-cluster-management-agent-addon',
  namespace: 'cg-system',
  healthMode: 'Customized',
  installPlacements: [],
});

/** A fake informer: its store, and the handlers the controller registered (to replay events). */
function fakeInformer<T extends KubeObject>(items: T[]) {
  const handlers: InformerHandlers<T>[] = [];
  return {
    items,
    handlers,
    get: (k: string) =>
      items.find(
        (i) => `${i.metadata?.namespace ? `${i.metadata.namespace}/` : ''}${i.metadata?.name}` === k,
      ),
    on: (h: InformerHandlers<T>) => {
      handlers.push(h);
      return () => {};
    },
    // Never synced: the controller's own queue never runs, the tests call reconcile() themselves.
    synced: new Promise(() => {}),
  };
}

function setup(cma: ClusterManagementAddOn | undefined) {
  const cmas = fakeInformer<ClusterManagementAddOn>(cma ? [cma] : []);
  const adc: AddOnDeploymentConfig = {
    apiVersion: 'addon.open-cluster-management.io/v1alpha1',
    kind: 'AddOnDeploymentConfig',
    metadata: { name: 'cluster-gateway-default', namespace: 'cg-system' },
  };
  const applied: KubeObject[] = [];
  const controller = new ClusterManagementAddOnController({
    addon,
    hub: {
      apply: async (_path: string, body: KubeObject) => {
        applied.push(body);
        return body as never;
      },
      create: async (_path: string, body: KubeObject) => body as never,
    },
    informers: {
      clusterManagementAddOns: cmas as never,
      addOnDeploymentConfigs: fakeInformer([adc]) as never,
    },
    log: pino({ level: 'silent' }),
  });
  // Started for its event handlers (the queue waits for a sync that never comes).
  const stop = new AbortController();
  controller.controller.start(stop.signal);
  return { controller, cmas, applied, stop };
}

const helmLabels = { 'app.kubernetes.io/managed-by': 'Helm', 'helm.sh/chart': 'cluster-gateway-0.1.0' };

test("a ClusterManagementAddOn declared by the chart (managed-by label) is not written, even when it differs from the manager's flags", async () => {
  const declared = clusterManagementAddOn(addon);
  declared.metadata.labels = helmLabels;
  declared.spec = {
    ...declared.spec,
    addOnMeta: { displayName: 'Changed by helm upgrade', description: '' },
  };
  const { controller, applied, stop } = setup(declared);
  await controller.reconcile();
  stop.abort();
  assert.deepEqual(applied, []);
});

test('without the label, the manager keeps it as its flags say (a manager run outside the chart)', async () => {
  const own = clusterManagementAddOn(addon);
  own.spec = { ...own.spec, addOnMeta: { displayName: 'edited by hand', description: '' } };
  const { controller, applied, stop } = setup(own);
  await controller.reconcile();
  stop.abort();
  assert.equal(applied.length, 1);
  assert.deepEqual(applied[0], clusterManagementAddOn(addon));
});

test('missing: created, unless the one it saw last was declared by the chart (helm uninstall deleted it)', async () => {
  const fresh = setup(undefined);
  await fresh.controller.reconcile();
  fresh.stop.abort();
  assert.deepEqual(fresh.applied, [clusterManagementAddOn(addon)], 'created when never seen');

  const declared = { ...clusterManagementAddOn(addon) };
  declared.metadata = { ...declared.metadata, labels: helmLabels };
  const uninstalled = setup(declared);
  for (const h of uninstalled.cmas.handlers) h.onAdd?.(declared);
  uninstalled.cmas.items.length = 0;
  for (const h of uninstalled.cmas.handlers) h.onDelete?.(declared);
  await uninstalled.controller.reconcile();
  uninstalled.stop.abort();
  assert.deepEqual(uninstalled.applied, [], 'not made again by this process');
});

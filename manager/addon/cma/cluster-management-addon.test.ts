import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { defineAddon } from '../core/addon.ts';
import { clusterManagementAddOn, defaultDeploymentConfig } from './cluster-management-addon.ts';

const settings = {
  addonName: 'cluster-gateway',
  displayName: 'Cluster Gateway',
  description: 'The gateway',
  agentImage: 'img:1',
  agentInstallNamespace: 'open-cluster-management-agent-addon',
  namespace: 'cg-system',
  healthMode: 'Customized' as const,
  installPlacements: [],
};

describe('ClusterManagementAddOn', () => {
  test('Manual by default: addOnMeta and the default AddOnDeploymentConfig, no lifecycle annotation', () => {
    const cma = clusterManagementAddOn(defineAddon(settings));
    assert.equal(cma.apiVersion, 'addon.open-cluster-management.io/v1alpha1');
    assert.equal(cma.metadata.name, 'cluster-gateway');
    assert.equal(cma.metadata.annotations, undefined, 'OCM addon-manager manages the lifecycle');
    assert.deepEqual(cma.spec, {
      addOnMeta: { displayName: 'Cluster Gateway', description: 'The gateway' },
      supportedConfigs: [
        {
          group: 'addon.open-cluster-management.io',
          resource: 'addondeploymentconfigs',
          defaultConfig: { namespace: 'cg-system', name: 'cluster-gateway-default' },
        },
      ],
      installStrategy: { type: 'Manual' },
    });
  });

  test('Placements when the flag names placements; the name is configurable', () => {
    const cma = clusterManagementAddOn(
      defineAddon({
        ...settings,
        addonName: 'gw',
        installPlacements: [{ namespace: 'default', name: 'all' }],
      }),
    );
    assert.equal(cma.metadata.name, 'gw');
    assert.deepEqual(cma.spec?.installStrategy, {
      type: 'Placements',
      placements: [{ namespace: 'default', name: 'all', rolloutStrategy: { type: 'All' } }],
    });
  });

  test('the default config defers the install namespace to the addon and sets LOG_LEVEL', () => {
    assert.deepEqual(defaultDeploymentConfig(defineAddon(settings)), {
      apiVersion: 'addon.open-cluster-management.io/v1alpha1',
      kind: 'AddOnDeploymentConfig',
      metadata: { name: 'cluster-gateway-default', namespace: 'cg-system' },
      spec: { agentInstallNamespace: '', customizedVariables: [{ name: 'LOG_LEVEL', value: 'info' }] },
    });
  });
});

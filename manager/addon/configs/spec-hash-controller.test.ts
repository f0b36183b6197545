import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ClusterManagementAddOn, ManagedClusterAddOn } from '../core/resources.ts';
import { addonConfigReferences, cmaStatusPatch } from './spec-hash-controller.ts';

const group = 'addon.open-cluster-management.io';
const resource = 'addondeploymentconfigs';
const hashes: Record<string, string> = { 'hub/default': 'h-default', 'hub/custom': 'h-custom' };
const hashOf = (namespace: string | undefined, name: string) => hashes[`${namespace}/${name}`];

describe('config spec hashes', () => {
  test('ClusterManagementAddOn: default and install-progression references get the current hash', () => {
    const cma: ClusterManagementAddOn = {
      metadata: { name: 'cluster-gateway', resourceVersion: '7' },
      status: {
        defaultconfigReferences: [{ group, resource, desiredConfig: { namespace: 'hub', name: 'default' } }],
        installProgressions: [
          {
            name: 'p',
            namespace: 'hub',
            configReferences: [
              { group, resource, desiredConfig: { namespace: 'hub', name: 'custom', specHash: 'old' } },
            ],
          },
        ],
      },
    };
    assert.deepEqual(cmaStatusPatch(cma, hashOf), {
      defaultconfigReferences: [
        { group, resource, desiredConfig: { namespace: 'hub', name: 'default', specHash: 'h-default' } },
      ],
      installProgressions: [
        {
          name: 'p',
          namespace: 'hub',
          configReferences: [
            { group, resource, desiredConfig: { namespace: 'hub', name: 'custom', specHash: 'h-custom' } },
          ],
        },
      ],
    });
    const done = cmaStatusPatch(cma, hashOf);
    assert.equal(cmaStatusPatch({ ...cma, status: done }, hashOf), undefined, 'up to date: no write');
  });

  test('a config that does not exist, or of another kind, is left alone', () => {
    const cma: ClusterManagementAddOn = {
      metadata: { name: 'cluster-gateway' },
      status: {
        defaultconfigReferences: [
          { group, resource, desiredConfig: { namespace: 'hub', name: 'missing' } },
          { group, resource: 'addontemplates', desiredConfig: { name: 'default' } },
        ],
      },
    };
    assert.equal(cmaStatusPatch(cma, hashOf), undefined);
  });

  test("ManagedClusterAddOn: only the configs of its own spec.configs (OCM copies the defaults' hashes)", () => {
    const mca: ManagedClusterAddOn = {
      metadata: { name: 'cluster-gateway', namespace: 'cluster1', resourceVersion: '3' },
      spec: { configs: [{ group, resource, namespace: 'hub', name: 'custom' }] },
      status: {
        configReferences: [
          {
            group,
            resource,
            name: 'custom',
            namespace: 'hub',
            desiredConfig: { namespace: 'hub', name: 'custom' },
          },
        ],
      },
    };
    assert.deepEqual(addonConfigReferences(mca, hashOf), [
      {
        group,
        resource,
        name: 'custom',
        namespace: 'hub',
        desiredConfig: { namespace: 'hub', name: 'custom', specHash: 'h-custom' },
      },
    ]);
    const defaulted: ManagedClusterAddOn = {
      ...mca,
      spec: {},
      status: {
        configReferences: [
          { group, resource, name: 'default', desiredConfig: { namespace: 'hub', name: 'default' } },
        ],
      },
    };
    assert.equal(addonConfigReferences(defaulted, hashOf), undefined);
  });
});

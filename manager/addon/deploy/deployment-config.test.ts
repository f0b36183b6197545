import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { defineAddon } from '../core/addon.ts';
import type { ClusterManagementAddOn, ManagedClusterAddOn } from '../core/resources.ts';
import {
  agentValues,
  containerResources,
  defaultAgentResources,
  deploymentConfigRef,
  InvalidConfigError,
  ignoredConfigReference,
  installNamespace,
  overrideImage,
  valuesHash,
} from './deployment-config.ts';

const addon = defineAddon({
  addonName: 'cluster-gateway',
  displayName: 'Cluster Gateway',
  description: 'd',
  agentImage: 'quay.io/oam/cluster-gateway-ts:1.0',
  agentInstallNamespace: 'open-cluster-management-agent-addon',
  namespace: 'cg-system',
  healthMode: 'Customized',
  installPlacements: [],
});
const group = 'addon.open-cluster-management.io';
const resource = 'addondeploymentconfigs';

function mca(extra: Partial<ManagedClusterAddOn> = {}): ManagedClusterAddOn {
  return { metadata: { name: 'cluster-gateway', namespace: 'cluster1', uid: 'u1' }, ...extra };
}
const cma: ClusterManagementAddOn = {
  metadata: { name: 'cluster-gateway' },
  spec: {
    supportedConfigs: [
      { group, resource, defaultConfig: { namespace: 'cg-system', name: 'cluster-gateway-default' } },
    ],
  },
};

describe('which AddOnDeploymentConfig applies', () => {
  test("OCM's resolved desiredConfig wins, with its spec hash, when the admins configured it", () => {
    const resolvedTo = (namespace: string, name: string) => ({
      configReferences: [
        { group, resource, name: 'old', desiredConfig: { namespace, name, specHash: 'abc' } },
      ],
    });
    // The addon's own spec.configs.
    assert.deepEqual(
      deploymentConfigRef(
        mca({
          spec: { configs: [{ group, resource, namespace: 'x', name: 'own' }] },
          status: resolvedTo('x', 'own'),
        }),
        cma,
      ),
      { namespace: 'x', name: 'own', specHash: 'abc', source: 'status.configReferences' },
    );
    // The CMA default, or a config of one of its placements.
    assert.equal(
      deploymentConfigRef(mca({ status: resolvedTo('cg-system', 'cluster-gateway-default') }), cma)?.specHash,
      'abc',
    );
    const withPlacement = {
      ...cma,
      spec: {
        ...cma.spec,
        installStrategy: {
          type: 'Placements' as const,
          placements: [
            { namespace: 'p', name: 'all', configs: [{ group, resource, namespace: 'p', name: 'placed' }] },
          ],
        },
      },
    } as unknown as ClusterManagementAddOn;
    assert.deepEqual(deploymentConfigRef(mca({ status: resolvedTo('p', 'placed') }), withPlacement), {
      namespace: 'p',
      name: 'placed',
      specHash: 'abc',
      source: 'status.configReferences',
    });
  });

  test('a status reference nobody configured (a klusterlet may write the status) is not used, and says so', () => {
    const forged = {
      configReferences: [
        { group, resource, name: 'x', desiredConfig: { namespace: 'cluster2', name: 'theirs' } },
      ],
    };
    // spec.configs names another: that one, as before OCM resolved it.
    const withSpec = mca({ spec: { configs: [{ group, resource, name: 'own' }] }, status: forged });
    assert.deepEqual(deploymentConfigRef(withSpec, cma), {
      namespace: 'cluster1',
      name: 'own',
      source: 'spec.configs',
    });
    assert.match(
      ignoredConfigReference(withSpec, cma) ?? '',
      /^status.configReferences names AddOnDeploymentConfig cluster2\/theirs, which neither the addon's spec.configs nor the ClusterManagementAddOn configures: it is not used/,
    );
    // Only the CMA default: that one; nothing configured: the defaults.
    assert.equal(deploymentConfigRef(mca({ status: forged }), cma)?.name, 'cluster-gateway-default');
    assert.equal(deploymentConfigRef(mca({ status: forged }), undefined), undefined);
    assert.equal(
      ignoredConfigReference(mca({ status: forged }), undefined)?.includes('cluster2/theirs'),
      true,
    );
    assert.equal(ignoredConfigReference(mca(), cma), undefined);
  });

  test('then the addon spec.configs (namespace defaults to the cluster), then the CMA default, else none', () => {
    assert.deepEqual(
      deploymentConfigRef(mca({ spec: { configs: [{ group, resource, name: 'own' }] } }), cma),
      {
        namespace: 'cluster1',
        name: 'own',
        source: 'spec.configs',
      },
    );
    assert.deepEqual(deploymentConfigRef(mca(), cma), {
      namespace: 'cg-system',
      name: 'cluster-gateway-default',
      source: 'ClusterManagementAddOn default',
    });
    assert.equal(deploymentConfigRef(mca(), undefined), undefined);
    // Another config kind is not ours.
    assert.equal(
      deploymentConfigRef(
        mca({ spec: { configs: [{ group, resource: 'addontemplates', name: 't' }] } }),
        undefined,
      ),
      undefined,
    );
  });
});

describe('install namespace', () => {
  test('config, then the addon spec (clusteradm --namespace), then the manager default', () => {
    assert.equal(
      installNamespace(addon, mca({ spec: { installNamespace: 'from-mca' } }), {
        agentInstallNamespace: 'from-config',
      }),
      'from-config',
    );
    // An empty agentInstallNamespace (our default config) defers to the addon.
    assert.equal(
      installNamespace(addon, mca({ spec: { installNamespace: 'from-mca' } }), { agentInstallNamespace: '' }),
      'from-mca',
    );
    assert.equal(installNamespace(addon, mca(), undefined), 'open-cluster-management-agent-addon');
  });
});

describe('image overrides (addon-framework rules)', () => {
  test('a matching source prefix becomes the mirror; the last match wins', () => {
    assert.equal(
      overrideImage([{ source: 'quay.io/oam', mirror: 'mirror.local/oam' }], 'quay.io/oam/cg:1'),
      'mirror.local/oam/cg:1',
    );
    assert.equal(
      overrideImage([{ source: 'docker.io', mirror: 'm' }], 'quay.io/oam/cg:1'),
      'quay.io/oam/cg:1',
    );
    assert.equal(
      overrideImage(
        [
          { source: 'quay.io', mirror: 'a.io' },
          { source: 'quay.io/oam', mirror: 'b.io/x' },
        ],
        'quay.io/oam/cg:1',
      ),
      'b.io/x/cg:1',
    );
  });
  test('an empty source re-homes the image name', () => {
    assert.equal(
      overrideImage([{ source: '', mirror: 'edge.local:5000/' }], 'quay.io/oam/cg:1'),
      'edge.local:5000/cg:1',
    );
  });
});

describe('agent values', () => {
  test('defaults without a config', () => {
    const v = agentValues(addon, mca(), undefined);
    assert.deepEqual(v, {
      installNamespace: 'open-cluster-management-agent-addon',
      image: 'quay.io/oam/cluster-gateway-ts:1.0',
      nodeSelector: {},
      tolerations: [],
      proxy: {},
      logLevel: 'info',
      resources: defaultAgentResources,
      ignoredVariables: [],
    });
  });

  test('every field of the config maps', () => {
    const ca = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
    const v = agentValues(addon, mca(), {
      agentInstallNamespace: 'edge-agents',
      customizedVariables: [
        { name: 'LOG_LEVEL', value: 'DEBUG' },
        { name: 'SOMETHING_ELSE', value: 'x' },
      ],
      nodePlacement: {
        nodeSelector: { zone: 'edge' },
        tolerations: [{ key: 'edge', operator: 'Exists', effect: 'NoSchedule' }],
      },
      registries: [{ source: 'quay.io/oam', mirror: 'mirror.local' }],
      proxyConfig: {
        httpProxy: 'http://p:3128',
        httpsProxy: 'http://p:3129',
        noProxy: '.svc',
        caBundle: Buffer.from(ca).toString('base64'),
      },
    });
    assert.equal(v.installNamespace, 'edge-agents');
    assert.equal(v.logLevel, 'debug');
    assert.deepEqual(v.ignoredVariables, ['SOMETHING_ELSE']);
    assert.deepEqual(v.nodeSelector, { zone: 'edge' });
    assert.deepEqual(v.tolerations, [{ key: 'edge', operator: 'Exists', effect: 'NoSchedule' }]);
    assert.equal(v.image, 'mirror.local/cluster-gateway-ts:1.0');
    assert.deepEqual(v.proxy, {
      httpProxy: 'http://p:3128',
      httpsProxy: 'http://p:3129',
      noProxy: '.svc',
      caBundle: ca,
    });
  });

  test('invalid values are errors that say what to fix', () => {
    assert.throws(
      () =>
        agentValues(
          addon,
          mca(),
          { customizedVariables: [{ name: 'LOG_LEVEL', value: 'loud' }] },
          'AddOnDeploymentConfig a/b',
        ),
      (err: Error) =>
        err instanceof InvalidConfigError &&
        /AddOnDeploymentConfig a\/b: customizedVariables LOG_LEVEL "loud" is not one of/.test(err.message),
    );
    assert.throws(
      () => agentValues(addon, mca(), { proxyConfig: { caBundle: Buffer.from('nope').toString('base64') } }),
      /caBundle/,
    );
    assert.throws(
      () => agentValues(addon, mca({ spec: { installNamespace: 'Bad_NS' } }), undefined),
      /not a namespace name/,
    );
  });

  test('the values hash is stable and moves with any change', () => {
    const a = agentValues(addon, mca(), { customizedVariables: [{ name: 'LOG_LEVEL', value: 'info' }] });
    const b = agentValues(addon, mca(), { customizedVariables: [{ name: 'LOG_LEVEL', value: 'info' }] });
    const c = agentValues(addon, mca(), { customizedVariables: [{ name: 'LOG_LEVEL', value: 'warn' }] });
    assert.equal(valuesHash(a), valuesHash(b));
    assert.notEqual(valuesHash(a), valuesHash(c));
  });

  test('resourceRequirements: wildcards match the agent container, the last match wins', () => {
    const big = { requests: { cpu: '50m', memory: '128Mi' }, limits: { memory: '256Mi' } };
    const small = { requests: { memory: '32Mi' } };
    assert.deepEqual(containerResources(undefined, 'cluster-gateway-agent', 'agent'), defaultAgentResources);
    assert.deepEqual(containerResources([{ containerID: '*:*:*', resources: big }], 'x-agent', 'agent'), big);
    assert.deepEqual(
      containerResources(
        [
          { containerID: 'deployments:*-agent:agent', resources: big },
          { containerID: 'deployments:cluster-gateway-agent:*', resources: small },
        ],
        'cluster-gateway-agent',
        'agent',
      ),
      small,
    );
    // Other kinds, names and containers are not ours; regex characters in an ID are literal.
    for (const containerID of [
      'daemonsets:*:*',
      'deployments:other:*',
      '*:*:sidecar',
      'deployments:cluster.gateway-agent:*',
    ]) {
      assert.deepEqual(
        containerResources([{ containerID, resources: big }], 'cluster-gateway-agent', 'agent'),
        defaultAgentResources,
        containerID,
      );
    }
    const v = agentValues(addon, mca(), { resourceRequirements: [{ containerID: '*:*:*', resources: big }] });
    assert.deepEqual(v.resources, big);
    assert.notEqual(valuesHash(v), valuesHash(agentValues(addon, mca(), undefined)));
  });
});

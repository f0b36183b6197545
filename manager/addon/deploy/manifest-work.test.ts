import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { defineAddon } from '../core/addon.ts';
import type { ManagedClusterAddOn, ManifestWork } from '../core/resources.ts';
import { agentCompileCache, agentNodeFlags } from './agent-manifests.ts';
import { agentValues } from './deployment-config.ts';
import {
  deployWork,
  manifestAppliedCondition,
  sameJson,
  workHashAnnotation,
  workUpToDate,
} from './manifest-work.ts';

const compileCache = { name: 'NODE_COMPILE_CACHE', value: agentCompileCache };

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
const mca: ManagedClusterAddOn = {
  metadata: { name: 'cluster-gateway', namespace: 'cluster1', uid: 'uid-1' },
};
const shared = agentValues(addon, mca, undefined);
const dedicated = agentValues(addon, mca, { agentInstallNamespace: 'cluster-gateway' });

type Obj = Record<string, any>;
const find = (work: ManifestWork, kind: string) =>
  work.spec?.workload?.manifests?.find((m) => m.kind === kind) as Obj;

describe('deploy ManifestWork', () => {
  test('name, label, owner, and the config-spec-hash OCM reads', () => {
    const work = deployWork(addon, mca, shared, {
      namespace: 'cg-system',
      name: 'cfg',
      specHash: 'h1',
      source: 'status.configReferences',
    });
    assert.equal(work.metadata.name, 'addon-cluster-gateway-deploy-0');
    assert.equal(work.metadata.namespace, 'cluster1');
    assert.deepEqual(work.metadata.labels, { 'open-cluster-management.io/addon-name': 'cluster-gateway' });
    assert.deepEqual(work.metadata.ownerReferences, [
      {
        apiVersion: 'addon.open-cluster-management.io/v1alpha1',
        kind: 'ManagedClusterAddOn',
        name: 'cluster-gateway',
        uid: 'uid-1',
        controller: true,
      },
    ]);
    assert.equal(
      work.metadata.annotations?.['open-cluster-management.io/config-spec-hash'],
      '{"addondeploymentconfigs.addon.open-cluster-management.io/cg-system/cfg":"h1"}',
    );
  });

  test('manifests: namespace, service account, least RBAC, the Deployment mounting the registration Secret', () => {
    const work = deployWork(addon, mca, shared, undefined);
    assert.deepEqual(
      work.spec?.workload?.manifests?.map((m) => m.kind),
      ['Namespace', 'ServiceAccount', 'Role', 'RoleBinding', 'Deployment'],
    );
    assert.deepEqual(find(work, 'Role').rules, [
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        resourceNames: ['cluster-gateway'],
        verbs: ['get', 'update', 'patch'],
      },
    ]);
    assert.deepEqual(find(work, 'RoleBinding').subjects, [
      {
        kind: 'ServiceAccount',
        name: 'cluster-gateway-agent',
        namespace: 'open-cluster-management-agent-addon',
      },
    ]);
    const pod = find(work, 'Deployment').spec.template.spec;
    assert.equal(pod.serviceAccountName, 'cluster-gateway-agent');
    assert.deepEqual(pod.volumes, [
      { name: 'hub-kubeconfig', secret: { secretName: 'cluster-gateway-hub-kubeconfig' } },
    ]);
    const c = pod.containers[0];
    assert.deepEqual(c.command, ['node', ...agentNodeFlags, '/app/agent/main.ts']);
    assert.deepEqual(c.args, [
      '--cluster-name=cluster1',
      '--addon-name=cluster-gateway',
      '--install-namespace=open-cluster-management-agent-addon',
      '--hub-kubeconfig=/managed/hub-kubeconfig/kubeconfig',
      '--port=8080',
      '--log-level=info',
    ]);
    assert.deepEqual(c.volumeMounts, [
      { name: 'hub-kubeconfig', mountPath: '/managed/hub-kubeconfig', readOnly: true },
    ]);
    assert.equal(c.securityContext.readOnlyRootFilesystem, true);
    assert.deepEqual(c.env, [compileCache], 'no proxy: only the compile cache');
  });

  test('status feedback on the agent Deployment', () => {
    const work = deployWork(addon, mca, shared, undefined);
    const [config] = (work.spec?.manifestConfigs ?? []) as Obj[];
    assert.deepEqual(config?.resourceIdentifier, {
      group: 'apps',
      resource: 'deployments',
      name: 'cluster-gateway-agent',
      namespace: 'open-cluster-management-agent-addon',
    });
    assert.equal(config?.feedbackRules[0].type, 'WellKnownStatus');
    assert.ok(config?.feedbackRules[1].jsonPaths.some((p: Obj) => p.name === 'AvailableMessage'));
  });

  test('a shared namespace is orphaned on delete; a dedicated one goes with the work', () => {
    assert.deepEqual(deployWork(addon, mca, shared, undefined).spec?.deleteOption, {
      propagationPolicy: 'SelectivelyOrphan',
      selectivelyOrphans: {
        orphaningRules: [{ group: '', resource: 'namespaces', name: 'open-cluster-management-agent-addon' }],
      },
    });
    const work = deployWork(addon, mca, dedicated, undefined);
    assert.equal(work.spec?.deleteOption, undefined);
    assert.equal(find(work, 'Namespace').metadata.name, 'cluster-gateway');
  });

  test('proxy settings and CA reach the container', () => {
    const ca = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
    const values = agentValues(addon, mca, {
      proxyConfig: { httpsProxy: 'http://p:3128', caBundle: Buffer.from(ca).toString('base64') },
    });
    const work = deployWork(addon, mca, values, undefined);
    assert.equal(find(work, 'ConfigMap').data['ca.crt'], ca);
    const c = find(work, 'Deployment').spec.template.spec.containers[0];
    assert.deepEqual(c.env, [
      compileCache,
      { name: 'HTTPS_PROXY', value: 'http://p:3128' },
      { name: 'https_proxy', value: 'http://p:3128' },
      { name: 'NODE_USE_ENV_PROXY', value: '1' },
      { name: 'NODE_EXTRA_CA_CERTS', value: '/etc/cluster-gateway/proxy-ca/ca.crt' },
    ]);
  });

  test('up to date: same hash and fields; a removed field or a hand edit means apply', () => {
    const desired = deployWork(addon, mca, shared, undefined);
    const stored: ManifestWork = structuredClone(desired);
    (stored.metadata as Obj).resourceVersion = '5';
    (stored.spec as Obj).executor = { subject: { type: 'ServiceAccount' } }; // a server-side default
    assert.equal(workUpToDate(stored, desired), true);
    assert.equal(workUpToDate(undefined, desired), false);
    const edited = structuredClone(stored);
    find(edited, 'Deployment').spec.replicas = 3;
    assert.equal(workUpToDate(edited, desired), false, 'a hand edit is undone');
    const withSelector = deployWork(addon, mca, { ...shared, nodeSelector: { a: 'b' } }, undefined);
    assert.equal(workUpToDate(withSelector, desired), false, 'a field we no longer write is removed');
    assert.notEqual(
      withSelector.metadata.annotations?.[workHashAnnotation],
      desired.metadata.annotations?.[workHashAnnotation],
    );
  });

  test('sameJson: wanted fields present in actual; arrays exactly', () => {
    assert.equal(sameJson({ a: 1 }, { a: 1, b: 2 }), true);
    assert.equal(sameJson({ a: [1, 2] }, { a: [1, 2, 3] }), false);
    assert.equal(sameJson({ a: { b: 1 } }, { a: null }), false);
  });
});

describe('ManifestApplied from the work (OCM reasons)', () => {
  const work = (conditions: Obj[], manifests: Obj[] = []): ManifestWork =>
    ({ metadata: { name: 'w' }, status: { conditions, resourceStatus: { manifests } } }) as ManifestWork;

  test('not reported yet: no opinion', () => {
    assert.equal(manifestAppliedCondition(undefined), undefined);
    assert.equal(manifestAppliedCondition(work([])), undefined);
  });

  test('applied', () => {
    assert.deepEqual(
      manifestAppliedCondition(
        work([{ type: 'Applied', status: 'True', reason: 'AppliedManifestWorkComplete', message: '' }]),
      ),
      {
        type: 'ManifestApplied',
        status: 'True',
        reason: 'AddonManifestApplied',
        message: 'manifests of addon are applied successfully',
      },
    );
  });

  test('failed: names each manifest that failed, with the work agent message', () => {
    const c = manifestAppliedCondition(
      work(
        [
          {
            type: 'Applied',
            status: 'False',
            reason: 'AppliedManifestWorkFailed',
            message: 'Failed to apply manifest work',
          },
        ],
        [
          {
            resourceMeta: { kind: 'Deployment', namespace: 'ns', name: 'cluster-gateway-agent' },
            conditions: [
              {
                type: 'Applied',
                status: 'False',
                reason: 'AppliedManifestFailed',
                message: 'admission webhook denied',
              },
            ],
          },
          {
            resourceMeta: { kind: 'Namespace', name: 'ns' },
            conditions: [{ type: 'Applied', status: 'True' }],
          },
        ],
      ),
    );
    assert.equal(c?.status, 'False');
    assert.equal(c?.reason, 'AddonManifestAppliedFailed');
    assert.equal(
      c?.message,
      'failed to apply the manifests of addon: Deployment ns/cluster-gateway-agent: admission webhook denied',
    );
  });
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseOptions as parseAgentOptions } from '../../../agent/options.ts';
import type { KubeObject } from '../../../shared/kube/client.ts';
import { defineAddon } from '../core/addon.ts';
import type { ManagedClusterAddOn } from '../core/resources.ts';
import {
  addonNamespaceLabel,
  agentManifests,
  configHashAnnotation,
  hubCredentialServiceAccount,
  impersonationClusterRoleName,
  impersonationRules,
  ocmImagePullSecret,
} from './agent-manifests.ts';
import { agentValues, InvalidConfigError, valuesHash } from './deployment-config.ts';
import { deployWork } from './manifest-work.ts';

const addon = defineAddon({
  addonName: 'cluster-gateway',
  displayName: 'Cluster Gateway',
  description: 'd',
  agentImage: 'quay.io/oam/cluster-gateway-ts:1.0',
  agentInstallNamespace: 'open-cluster-management-agent-addon',
  namespace: 'cg-system',
  healthMode: 'Customized',
  installPlacements: [],
  credentialNamespace: 'creds',
});
const mca: ManagedClusterAddOn = { metadata: { name: 'cluster-gateway', namespace: 'c1', uid: 'u' } };
const withModel = (value: string, extra: { name: string; value: string }[] = []) =>
  agentValues(addon, mca, { customizedVariables: [{ name: 'TUNNEL_TRUST_MODEL', value }, ...extra] });

// biome-ignore lint/suspicious/noExplicitAny: the test reads deep fields of rendered manifests
type Obj = KubeObject & Record<string, any>;
const byKind = (objects: KubeObject[], kind: string) => objects.filter((o) => o.kind === kind) as Obj[];
const args = (objects: KubeObject[]): string[] =>
  (byKind(objects, 'Deployment')[0]?.spec.template.spec.containers[0].args ?? []) as string[];

describe('tunnel trust model in the agent manifests', () => {
  test('no model: no ClusterRole, no second ServiceAccount, no trust flags, the same values hash as before', () => {
    const values = agentValues(addon, mca, undefined);
    assert.equal(values.tunnel, undefined);
    const objects = agentManifests(addon, 'c1', values);
    assert.deepEqual(byKind(objects, 'ClusterRole'), []);
    assert.deepEqual(byKind(objects, 'ClusterRoleBinding'), []);
    assert.equal(byKind(objects, 'ServiceAccount').length, 1);
    assert.ok(!args(objects).some((a) => a.startsWith('--trust-model')));
    assert.equal(valuesHash(values), valuesHash(agentValues(addon, mca, { customizedVariables: [] })));
  });

  test('NoCredential: the agent may impersonate users, groups and uids, and nothing else', () => {
    const objects = agentManifests(addon, 'c1', withModel('NoCredential'));
    const [role] = byKind(objects, 'ClusterRole');
    assert.equal(role?.metadata?.name, impersonationClusterRoleName(addon));
    assert.deepEqual(role?.rules, impersonationRules);
    assert.deepEqual(
      role?.rules.flatMap((r: { resources: string[] }) => r.resources),
      ['users', 'groups', 'uids'],
    );
    assert.ok(role?.rules.every((r: { verbs: string[] }) => r.verbs.join() === 'impersonate'));
    const [binding] = byKind(objects, 'ClusterRoleBinding');
    assert.deepEqual(binding?.subjects, [
      {
        kind: 'ServiceAccount',
        name: 'cluster-gateway-agent',
        namespace: 'open-cluster-management-agent-addon',
      },
    ]);
    assert.deepEqual(args(objects).slice(-2), [
      '--trust-model=no-credential',
      '--hub-credential-namespace=creds',
    ]);
    // Its namespaced Role is unchanged: the Lease only.
    assert.equal(byKind(objects, 'Role')[0]?.rules.length, 2);
  });

  test('HubCredential: a ServiceAccount bound to the configured ClusterRole; the agent may only request its tokens', () => {
    const objects = agentManifests(
      addon,
      'c1',
      withModel('HubCredential', [{ name: 'HUB_CREDENTIAL_CLUSTER_ROLE', value: 'view' }]),
    );
    const sa = hubCredentialServiceAccount(addon);
    assert.deepEqual(
      byKind(objects, 'ServiceAccount').map((o) => o.metadata?.name),
      ['cluster-gateway-agent', sa],
    );
    const [binding] = byKind(objects, 'ClusterRoleBinding');
    assert.deepEqual(binding?.roleRef, {
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: 'view',
    });
    assert.deepEqual(binding?.subjects, [
      { kind: 'ServiceAccount', name: sa, namespace: 'open-cluster-management-agent-addon' },
    ]);
    assert.deepEqual(byKind(objects, 'ClusterRole'), [], 'the agent itself gets no ClusterRole');
    assert.deepEqual(byKind(objects, 'Role')[0]?.rules.at(-1), {
      apiGroups: [''],
      resources: ['serviceaccounts/token'],
      resourceNames: [sa],
      verbs: ['create'],
    });
    assert.deepEqual(args(objects).slice(-3), [
      '--trust-model=hub-credential',
      '--hub-credential-namespace=creds',
      `--hub-credential-service-account=${sa}`,
    ]);
    const byDefault = agentManifests(addon, 'c1', withModel('HubCredential'));
    assert.equal(byKind(byDefault, 'ClusterRoleBinding')[0]?.roleRef.name, 'cluster-admin');
  });

  test('bad values say what to fix; a changed model changes the values hash (the agent rolls out)', () => {
    assert.throws(
      () => withModel('Impersonate'),
      (err: Error) =>
        err instanceof InvalidConfigError &&
        /TUNNEL_TRUST_MODEL "Impersonate" is not HubCredential or NoCredential/.test(err.message),
    );
    // Not a name the object inherits either.
    assert.throws(() => withModel('toString'), /TUNNEL_TRUST_MODEL "toString" is not HubCredential/);
    assert.throws(
      () => withModel('HubCredential', [{ name: 'HUB_CREDENTIAL_CLUSTER_ROLE', value: 'Not A Role' }]),
      /HUB_CREDENTIAL_CLUSTER_ROLE "Not A Role" is not a ClusterRole name/,
    );
    assert.notEqual(valuesHash(withModel('HubCredential')), valuesHash(withModel('NoCredential')));
    assert.deepEqual(withModel('NoCredential').ignoredVariables, []);
  });
});

test("the agent's own parser reads the args the manager writes, for every trust model", () => {
  const readFile = () => undefined;
  for (const values of [
    agentValues(addon, mca, undefined),
    withModel('NoCredential'),
    withModel('HubCredential'),
  ]) {
    const written = args(agentManifests(addon, 'c1', values));
    const o = parseAgentOptions(written, { env: {}, readFile });
    assert.ok(o !== 'help');
    assert.equal(o.clusterName, 'c1');
    assert.equal(o.addonName, 'cluster-gateway');
    assert.equal(o.installNamespace, 'open-cluster-management-agent-addon');
    assert.equal(o.hubKubeconfig, '/managed/hub-kubeconfig/kubeconfig');
    assert.equal(o.port, 8080);
    assert.equal(o.trustModel, values.tunnel?.trustModel ?? 'hub-credential');
    assert.equal(o.hubCredentialNamespace, values.tunnel ? 'creds' : '');
  }
});

describe("the agent pods: OCM's image pull Secret and the addon's pod settings", () => {
  test("the install namespace is labelled for the klusterlet's pull Secret copy, and the pod names that Secret", () => {
    const objects = agentManifests(addon, 'c1', agentValues(addon, mca, undefined));
    const [namespace] = byKind(objects, 'Namespace');
    assert.deepEqual(namespace?.metadata?.labels, { [addonNamespaceLabel]: 'true' });
    assert.equal(addonNamespaceLabel, 'addon.open-cluster-management.io/namespace');
    const [deployment] = byKind(objects, 'Deployment');
    assert.deepEqual(deployment?.spec.template.spec.imagePullSecrets, [
      { name: 'open-cluster-management-image-pull-credentials' },
    ]);
    assert.equal(ocmImagePullSecret, 'open-cluster-management-image-pull-credentials');
  });

  test("Kubernetes' own namespaces are not labelled (no credential copied into kube-system)", () => {
    const values = { ...agentValues(addon, mca, undefined), installNamespace: 'kube-system' };
    const [namespace] = byKind(agentManifests(addon, 'c1', values), 'Namespace');
    assert.equal(namespace?.metadata?.labels, undefined);
  });

  test('affinity, priorityClassName, pod annotations and labels from the addon; its own labels and config hash win', () => {
    const affinity = { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [] } };
    const values = agentValues(addon, mca, undefined);
    const withPod = {
      ...addon,
      agentPod: {
        affinity,
        priorityClassName: 'agent-critical',
        podAnnotations: { team: 'platform', [configHashAnnotation]: 'forged' },
        podLabels: { 'cost-center': 'c1', 'app.kubernetes.io/name': 'other' },
      },
    };
    const [deployment] = byKind(agentManifests(withPod, 'c1', values), 'Deployment');
    const pod = deployment?.spec.template;
    assert.deepEqual(pod.spec.affinity, affinity);
    assert.equal(pod.spec.priorityClassName, 'agent-critical');
    assert.equal(pod.metadata.annotations.team, 'platform');
    assert.equal(pod.metadata.annotations[configHashAnnotation], valuesHash(values));
    assert.equal(pod.metadata.labels['cost-center'], 'c1');
    assert.equal(pod.metadata.labels['app.kubernetes.io/name'], 'cluster-gateway-agent', 'the selector wins');
    // Without settings: none of them.
    const [plain] = byKind(agentManifests(addon, 'c1', values), 'Deployment');
    assert.equal(plain?.spec.template.spec.affinity, undefined);
    assert.equal(plain?.spec.template.spec.priorityClassName, undefined);
  });

  test("the addon's pod settings pass through the deploy ManifestWork (manager's addon object as main.ts makes it)", () => {
    const withPod = {
      ...addon,
      agentPod: { affinity: {}, priorityClassName: 'p', podAnnotations: {}, podLabels: { a: 'b' } },
    };
    const work = deployWork(withPod, mca, agentValues(addon, mca, undefined), undefined);
    const deployment = work.spec?.workload?.manifests?.find((m) => m.kind === 'Deployment') as Obj;
    assert.equal(deployment.spec.template.spec.priorityClassName, 'p');
    assert.equal(deployment.spec.template.metadata.labels.a, 'b');
  });
});

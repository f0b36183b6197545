import assert from 'node:assert/strict';
import { test } from 'node:test';
import { defineAddon } from '../core/addon.ts';
import {
  agentAttachClusterRole,
  agentAttachClusterRoleBinding,
  agentCredentialRole,
  agentCredentialRoleBinding,
  agentHubRole,
  agentHubRoleBinding,
} from './hub-permissions.ts';
import { addonAgentSubject } from './subject.ts';

const owner = {
  apiVersion: 'addon.open-cluster-management.io/v1alpha1',
  name: 'cluster-gateway',
  namespace: 'cluster1',
  uid: 'u',
};

test('the Role grants get/update/patch on the heartbeat Lease by name, nothing else', () => {
  const role = agentHubRole(owner) as { rules: unknown[]; metadata: { ownerReferences: { uid: string }[] } };
  assert.deepEqual(role.rules, [
    {
      apiGroups: ['coordination.k8s.io'],
      resources: ['leases'],
      resourceNames: ['cluster-gateway'],
      verbs: ['get', 'update', 'patch'],
    },
  ]);
  assert.equal(role.metadata.ownerReferences[0]?.uid, 'u');
});

test("the RoleBinding binds the cluster's agent only: never the all-clusters addon group", () => {
  const binding = agentHubRoleBinding(owner, addonAgentSubject('cluster1', 'cluster-gateway')) as {
    subjects: { name: string }[];
  };
  assert.deepEqual(
    binding.subjects.map((s) => s.name),
    [
      'system:open-cluster-management:cluster:cluster1:addon:cluster-gateway:agent:addon-agent',
      'system:open-cluster-management:cluster:cluster1:addon:cluster-gateway',
    ],
  );
});

test('subject.ts and addon.ts agree on the registration subject', () => {
  const addon = defineAddon({
    addonName: 'cluster-gateway',
    displayName: '',
    description: '',
    agentImage: '',
    agentInstallNamespace: 'x',
    namespace: 'y',
    healthMode: 'Customized',
    installPlacements: [],
  });
  assert.deepEqual(addon.registrationSubject('c1'), addonAgentSubject('c1', 'cluster-gateway'));
});

test("the tunnel grant: create clustergateways/attach on the cluster's own name, bound to its agent only", () => {
  const cma = {
    apiVersion: 'addon.open-cluster-management.io/v1alpha1',
    name: 'cluster-gateway',
    uid: 'cma-uid',
  };
  const role = agentAttachClusterRole(owner, cma) as {
    kind: string;
    rules: unknown[];
    metadata: { name: string; ownerReferences: { kind: string; uid: string }[] };
  };
  assert.equal(role.kind, 'ClusterRole');
  assert.equal(role.metadata.name, 'open-cluster-management:cluster-gateway:agent:cluster1:attach');
  assert.deepEqual(role.rules, [
    {
      apiGroups: ['cluster.core.oam.dev'],
      resources: ['clustergateways/attach'],
      resourceNames: ['cluster1'],
      verbs: ['create'],
    },
  ]);
  // Cluster-scoped: owned by the (cluster-scoped) ClusterManagementAddOn, never the namespaced ManagedClusterAddOn.
  assert.deepEqual(
    role.metadata.ownerReferences.map((o) => `${o.kind}/${o.uid}`),
    ['ClusterManagementAddOn/cma-uid'],
  );
  const binding = agentAttachClusterRoleBinding(owner, addonAgentSubject('cluster1', 'cluster-gateway')) as {
    roleRef: { kind: string; name: string };
    subjects: { name: string }[];
    metadata: { ownerReferences?: unknown };
  };
  assert.deepEqual(binding.roleRef, {
    apiGroup: 'rbac.authorization.k8s.io',
    kind: 'ClusterRole',
    name: 'open-cluster-management:cluster-gateway:agent:cluster1:attach',
  });
  assert.deepEqual(
    binding.subjects.map((s) => s.name),
    [
      'system:open-cluster-management:cluster:cluster1:addon:cluster-gateway:agent:addon-agent',
      'system:open-cluster-management:cluster:cluster1:addon:cluster-gateway',
    ],
  );
  assert.equal(binding.metadata.ownerReferences, undefined, 'no owner known: none written');
});

test('the credential grant: get/create/patch on the Secret named after the cluster, in the credential namespace, bound to its agent only', () => {
  const subject = addonAgentSubject('cluster1', 'cluster-gateway');
  const cma = { apiVersion: 'addon.open-cluster-management.io/v1alpha1', name: 'cluster-gateway', uid: 'c' };
  const role = agentCredentialRole(owner, 'creds', cma) as {
    metadata: { name: string; namespace: string; ownerReferences: { kind: string }[] };
    rules: unknown[];
  };
  assert.equal(role.metadata.name, 'open-cluster-management:cluster-gateway:agent:cluster1:credential');
  assert.equal(role.metadata.namespace, 'creds');
  assert.deepEqual(
    role.metadata.ownerReferences.map((o) => o.kind),
    ['ClusterManagementAddOn'],
  );
  assert.deepEqual(role.rules, [
    {
      apiGroups: [''],
      resources: ['secrets'],
      resourceNames: ['cluster1'],
      verbs: ['get', 'create', 'patch'],
    },
  ]);
  const binding = agentCredentialRoleBinding(owner, subject, 'creds', cma) as {
    roleRef: { name: string };
    subjects: { name: string }[];
  };
  assert.equal(binding.roleRef.name, role.metadata.name);
  assert.deepEqual(
    binding.subjects.map((s) => s.name),
    [subject.user, 'system:open-cluster-management:cluster:cluster1:addon:cluster-gateway'],
  );
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { defineAddon } from '../addon.ts';
import { agentHubRole, agentHubRoleBinding } from './hub-permissions.ts';
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

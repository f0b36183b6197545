import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StatusError } from '../../../shared/kube/status.ts';
import { bindAgentIdentity, parseAddonAgentUser } from './identity.ts';

const user = (name: string) => ({ name, groups: [], extra: {} });

test("parses OCM's addon agent subject and nothing else", () => {
  assert.deepEqual(
    parseAddonAgentUser('system:open-cluster-management:cluster:c1:addon:cluster-gateway:agent:addon-agent'),
    { cluster: 'c1', addon: 'cluster-gateway', agent: 'addon-agent' },
  );
  for (const name of [
    'system:open-cluster-management:cluster:c1:addon:cluster-gateway',
    'system:open-cluster-management:cluster:c1:addon:cluster-gateway:agent:a:extra',
    'system:open-cluster-management:cluster::addon:cluster-gateway:agent:a',
    'system:open-cluster-management:c1:agent-id',
    'system:serviceaccount:ns:sa',
    'admin',
  ]) {
    assert.equal(parseAddonAgentUser(name), undefined, name);
  }
});

test('binds the tunnel to the cluster in the identity; every mismatch is a 403 saying why', () => {
  const agent = 'system:open-cluster-management:cluster:c1:addon:cluster-gateway:agent:addon-agent';
  assert.equal(bindAgentIdentity(user(agent), 'c1', 'cluster-gateway').cluster, 'c1');
  const refusal = (name: string, cluster: string) => {
    try {
      bindAgentIdentity(user(name), cluster, 'cluster-gateway');
    } catch (err) {
      assert.ok(err instanceof StatusError);
      assert.equal(err.code, 403);
      assert.equal(err.status.details?.name, cluster);
      return err.message;
    }
    assert.fail('not refused');
  };
  assert.match(refusal(agent, 'c2'), /agent of cluster "c1" and may only attach as "c1"/);
  assert.match(
    refusal(agent.replace('cluster-gateway', 'cluster-proxy'), 'c1'),
    /agent of addon "cluster-proxy", not "cluster-gateway"/,
  );
  assert.match(refusal('admin', 'c1'), /"admin" is not an OCM addon agent/);
});

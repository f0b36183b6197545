import assert from 'node:assert/strict';
import { test } from 'node:test';
import { healthFromAnnotations, notProbedYetReason, resolveHealth } from './health-precedence.ts';
import { parseManagedCluster } from './managedcluster-source.ts';
import { ClusterRegistry } from './registry.ts';
import { parseClusterSecret } from './secret-source.ts';
import { caPem, managedCluster, secret } from './test-fixtures.ts';

const down = { healthy: false, reason: 'unreachable: connect ECONNREFUSED' };
const up = { healthy: true };
const marked = { healthy: false, reason: 'maintenance' };

test("an operator's unhealthy mark wins over a healthy probe and condition", () => {
  assert.deepEqual(resolveHealth({ mark: marked, probe: up, condition: up }), marked);
});

test('cleared (healthy) mark: the probe decides; when it agrees, the mark and its reason show', () => {
  const cleared = { healthy: true, reason: 'ConnectionTimeout' };
  assert.deepEqual(resolveHealth({ mark: cleared, probe: down }), down);
  assert.deepEqual(resolveHealth({ mark: cleared, probe: up }), cleared);
});

test('without a mark the probe wins; without a probe the mark, then the condition, else unhealthy', () => {
  assert.deepEqual(resolveHealth({ probe: down, condition: up }), down);
  assert.deepEqual(resolveHealth({ mark: { healthy: true }, condition: down }), { healthy: true });
  assert.deepEqual(resolveHealth({ condition: down }), down);
  assert.deepEqual(resolveHealth({}), { healthy: false });
});

test('marks are read from the status annotations as Go parses booleans', () => {
  const key = 'status.cluster.core.oam.dev/healthy';
  const reasonKey = 'status.cluster.core.oam.dev/healthy-reason';
  assert.equal(healthFromAnnotations(undefined), undefined);
  assert.equal(healthFromAnnotations({ other: 'x' }), undefined);
  assert.deepEqual(healthFromAnnotations({ [key]: 'false', [reasonKey]: 'maintenance' }), marked);
  assert.deepEqual(healthFromAnnotations({ [key]: 'True', [reasonKey]: '' }), { healthy: true });
  assert.deepEqual(healthFromAnnotations({ [reasonKey]: 'why' }), { healthy: false, reason: 'why' });
  assert.deepEqual(healthFromAnnotations({ [key]: 'yes' }), {
    healthy: false,
    reason: `invalid ${key} annotation "yes"`,
  });
});

test('in the registry: a marked Secret stays unhealthy whatever the prober says, until cleared', () => {
  const registry = new ClusterRegistry();
  const data = { endpoint: 'https://127.0.0.1:6443', 'ca.crt': caPem, token: 't' };
  const annotated = (healthy: string, reason: string) =>
    parseClusterSecret(
      secret('c1', data, undefined, {
        'status.cluster.core.oam.dev/healthy': healthy,
        'status.cluster.core.oam.dev/healthy-reason': reason,
      }),
    );
  registry.setSecret('c1', annotated('false', 'maintenance'));
  registry.setHealth('c1', { healthy: true });
  assert.deepEqual(registry.get('c1')?.health, marked);
  registry.setSecret('c1', annotated('true', ''));
  assert.deepEqual(registry.get('c1')?.health, { healthy: true });
  registry.setHealth('c1', down);
  assert.deepEqual(registry.get('c1')?.health, down);
});

test('in the registry: a cluster without a Secret takes the mark from its ManagedCluster', () => {
  const registry = new ClusterRegistry();
  const mc = managedCluster('c2', { url: 'https://127.0.0.1:6443', available: 'True' });
  mc.metadata = { ...mc.metadata, annotations: { 'status.cluster.core.oam.dev/healthy': 'false' } };
  registry.setManagedCluster('c2', parseManagedCluster(mc));
  registry.setTunnel('c2', {
    type: 'ClusterProxy',
    serverName: 'c2',
    insecure: false,
    dial: () => Promise.reject(new Error('unused')),
  });
  registry.setHealth('c2', { healthy: true });
  assert.equal(registry.get('c2')?.health.healthy, false);
});

test('with a prober that has not probed yet: the mark, then the condition, else unknown (not unhealthy)', () => {
  const unknown = { healthy: false, reason: notProbedYetReason, unknown: true };
  assert.deepEqual(resolveHealth({ probePending: true }), unknown);
  assert.deepEqual(resolveHealth({ probePending: true, mark: { healthy: true } }), { healthy: true });
  assert.deepEqual(resolveHealth({ probePending: true, condition: down }), down);
  assert.deepEqual(resolveHealth({ probePending: true, mark: marked }), marked);
});

test('in a probing registry: unknown until the first probe; a deleted cluster keeps no probe result', () => {
  const registry = new ClusterRegistry({ policy: { probing: true } });
  const info = parseClusterSecret(
    secret('c1', { endpoint: 'https://127.0.0.1:6443', 'ca.crt': caPem, token: 't' }),
  );
  registry.setSecret('c1', info);
  assert.equal(registry.get('c1')?.health.unknown, true);
  registry.setHealth('c1', up);
  assert.deepEqual(registry.get('c1')?.health, up);

  // Deleted, then a late probe result: nothing comes back, and a re-created cluster starts unknown again.
  registry.setSecret('c1', undefined);
  registry.setHealth('c1', up);
  assert.equal(registry.get('c1'), undefined);
  assert.deepEqual(registry.list(), []);
  registry.setSecret('c1', info);
  assert.equal(registry.get('c1')?.health.unknown, true, 'no stale probe result from before the deletion');
});

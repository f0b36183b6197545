import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { TunnelEndpoint } from '../clusters/cluster.ts';
import { createClusterPools, transportTargetOf } from './cluster-pools.ts';
import { clusterTarget } from './test-kit.ts';

const address = 'https://10.0.0.1:6443';
const constant = { type: 'Const' as const, address, insecure: false };

describe('transportTargetOf', () => {
  it('maps each kind of endpoint and credential', () => {
    assert.deepEqual(transportTargetOf(clusterTarget('c', constant)), {
      name: 'c',
      key: 'key-1',
      credential: { token: 'cluster-token' },
      endpoint: { kind: 'direct', url: address, insecure: false },
    });
    const egress = transportTargetOf(
      clusterTarget(
        'e',
        { ...constant, caBundle: 'CA', proxyUrl: 'http://proxy:3128' },
        {
          type: 'X509Certificate',
          certificate: 'C',
          privateKey: 'K',
        },
      ),
    );
    assert.deepEqual(egress, {
      name: 'e',
      key: 'key-1',
      credential: { certificate: 'C', privateKey: 'K' },
      endpoint: {
        kind: 'egress',
        url: address,
        proxyUrl: 'http://proxy:3128',
        caBundle: 'CA',
        insecure: false,
      },
    });
    const dial = () => Promise.reject(new Error('unused'));
    const tunnel: TunnelEndpoint = { type: 'ClusterProxy', serverName: 's', insecure: true, dial };
    for (const [trustModel, stream] of [
      [undefined, 'relay'],
      ['hub-credential', 'relay'],
      ['no-credential', 'impersonate'],
    ] as const) {
      const mapped = transportTargetOf(
        clusterTarget(
          't',
          { ...tunnel, ...(trustModel ? { trustModel } : {}) },
          { type: 'Dynamic', token: 'd' },
        ),
      );
      assert.deepEqual(mapped, {
        name: 't',
        key: 'key-1',
        credential: { token: 'd', certificate: undefined, privateKey: undefined },
        endpoint: { kind: 'tunnel', serverName: 's', insecure: true, stream, dial },
      });
    }
  });

  it('says why a cluster without an endpoint cannot be reached', () => {
    const target = { ...clusterTarget('d', constant), endpoint: undefined };
    assert.equal(transportTargetOf({ ...target, problem: 'no endpoint in secret' }), 'no endpoint in secret');
    assert.equal(transportTargetOf(target), 'cluster "d" has no endpoint');
  });
});

describe('createClusterPools', () => {
  it('keeps one pool per cluster until its connectionKey changes, and reports the current problem', () => {
    const pools = createClusterPools();
    const a = pools.get(clusterTarget('c1', constant));
    assert.equal(pools.get({ ...clusterTarget('c1', constant) }), a, 'the same key: the same pool');
    assert.notEqual(pools.get(clusterTarget('c1', constant, undefined, 'key-2')), a);
    const broken = { ...clusterTarget('c2', constant), endpoint: undefined };
    assert.equal(pools.get({ ...broken, problem: 'first' }), 'first');
    assert.equal(pools.get({ ...broken, problem: 'second' }), 'second');
    assert.equal(pools.stats().pools, 1);
    pools.forget('c1');
    assert.equal(pools.stats().pools, 0);
    pools.close();
  });
});

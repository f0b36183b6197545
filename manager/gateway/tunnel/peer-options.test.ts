import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseOptions } from '../options.ts';

const full = [
  '--tunnel-peer-port=9444',
  '--tunnel-peer-address=10.0.0.7:9444',
  '--tunnel-lease-namespace=cluster-gateway-system',
];
const files = ['--tunnel-peer-cert=peer.crt', '--tunnel-peer-key=peer.key', '--tunnel-peer-ca=peer-ca.crt'];

test('off unless --tunnel-peer-port is given: a single replica runs as before', () => {
  const o = parseOptions([]);
  assert.ok(o !== 'help');
  assert.equal(o.tunnelPeers, undefined);
});

test('all the peer settings, with a 10 s Lease by default; the peer certificate from the hub unless files are given', () => {
  const o = parseOptions([...full, '--tunnel-replica-name=gw-a']);
  assert.ok(o !== 'help');
  assert.deepEqual(o.tunnelPeers, {
    port: 9444,
    namespace: 'cluster-gateway-system',
    address: '10.0.0.7:9444',
    replicaName: 'gw-a',
    leaseNamespace: 'cluster-gateway-system',
    leaseDurationSeconds: 10,
  });
  const v6 = parseOptions([...full, '--tunnel-peer-address=[fd00::7]:9444', '--tunnel-lease-duration=15']);
  assert.ok(v6 !== 'help');
  assert.equal(v6.tunnelPeers?.address, '[fd00::7]:9444');
  assert.equal(v6.tunnelPeers?.leaseDurationSeconds, 15);
  assert.equal(v6.tunnelPeers?.replicaName, undefined, 'main.ts defaults it to POD_NAME or the hostname');
  const ns = parseOptions([...full, '--tunnel-peer-namespace=gw-ns']);
  assert.ok(ns !== 'help');
  assert.equal(ns.tunnelPeers?.namespace, 'gw-ns');
  const harness = parseOptions([...full, ...files]);
  assert.ok(harness !== 'help');
  assert.deepEqual(harness.tunnelPeers?.files, {
    certFile: 'peer.crt',
    keyFile: 'peer.key',
    caFile: 'peer-ca.crt',
  });
});

test('each missing or bad setting is named', () => {
  for (const flag of ['cert', 'key', 'ca', 'address']) {
    const without = [...full, ...files].filter((a) => !a.startsWith(`--tunnel-peer-${flag}=`));
    assert.throws(() => parseOptions(without), new RegExp(`needs --tunnel-peer-${flag} `));
  }
  assert.throws(() => parseOptions([...full, '--tunnel-peer-namespace=Bad_NS']), /not a namespace name/);
  assert.throws(
    () => parseOptions(full.filter((a) => !a.startsWith('--tunnel-lease-namespace'))),
    /needs --tunnel-lease-namespace/,
  );
  assert.throws(() => parseOptions([...full, '--tunnel-peer-address=10.0.0.7']), /is not host:port/);
  assert.throws(() => parseOptions([...full, '--tunnel-peer-address=h:99999']), /is not host:port/);
  assert.throws(() => parseOptions([...full, '--tunnel-lease-namespace=Bad_NS']), /not a namespace name/);
  assert.throws(() => parseOptions([...full, '--tunnel-lease-duration=1']), /between 3 and 300/);
  assert.throws(() => parseOptions([...full, '--agent-tunnels=false']), /needs --agent-tunnels=true/);
  // A peer setting without the port is a mistake, not silently ignored.
  assert.throws(() => parseOptions(['--tunnel-peer-ca=ca.crt']), /--tunnel-peer-ca needs --tunnel-peer-port/);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createCertificateAuthority } from '../../../shared/pki.ts';
import { parsePemBundle } from '../../../shared/x509-chain.ts';
import { dedicatedCaPeerTrust, hubPeerTrust, parsePeerCommonName, peerCommonName } from './peer-identity.ts';

test('the peer CN names a namespace and a replica (a pod name), nothing else', () => {
  assert.equal(
    peerCommonName('gw-ns', 'cluster-gateway-7d9f-abcde'),
    'cluster-gateway-peer:gw-ns:cluster-gateway-7d9f-abcde',
  );
  assert.deepEqual(parsePeerCommonName('cluster-gateway-peer:gw-ns:gw-0'), {
    namespace: 'gw-ns',
    replica: 'gw-0',
  });
  assert.deepEqual(parsePeerCommonName('cluster-gateway-peer:gw-ns:a.b-c'), {
    namespace: 'gw-ns',
    replica: 'a.b-c',
  });
  for (const cn of [
    'gw-0',
    'system:serviceaccount:gw-ns:cluster-gateway',
    'cluster-gateway-peer:gw-ns',
    'cluster-gateway-peer:gw-ns:gw-0:extra',
    'cluster-gateway-peer::gw-0',
    'cluster-gateway-peer:gw-ns:',
    'cluster-gateway-peer:GW:gw-0',
    'cluster-gateway-peer:gw-ns:Gw_0',
    `cluster-gateway-peer:gw-ns:${'a'.repeat(64)}`,
    'cluster-gateway-peer:gw-ns:gw-0\n',
  ]) {
    assert.equal(parsePeerCommonName(cn), undefined, JSON.stringify(cn));
  }
});

test('hub trust: a replica of this namespace, with no group; files trust: the CN as it is', async () => {
  const roots = parsePemBundle((await createCertificateAuthority('ca')).cert);
  const hub = hubPeerTrust(roots, 'gw-ns');
  assert.equal(hub.replicaOf('cluster-gateway-peer:gw-ns:gw-0', []), 'gw-0');
  assert.equal(hub.replicaOf('cluster-gateway-peer:other:gw-0', []), undefined);
  assert.equal(hub.replicaOf('cluster-gateway-peer:gw-ns:gw-0', ['system:masters']), undefined);
  assert.equal(hub.replicaOf('gw-0', []), undefined);
  const files = dedicatedCaPeerTrust(roots);
  assert.equal(files.replicaOf('replica-a', []), 'replica-a');
  assert.equal(files.replicaOf('', []), undefined);
});

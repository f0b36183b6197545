import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TunnelEndpoint } from './cluster.ts';
import { connectionKey } from './connection-key.ts';
import { parseManagedCluster } from './managedcluster-source.ts';
import { mergeCluster } from './merge.ts';
import { parseClusterSecret } from './secret-source.ts';
import { caPem, managedCluster, secret } from './test-fixtures.ts';

const tokenSecret = (
  data: Record<string, string>,
  labels?: Record<string, string>,
  annotations?: Record<string, string>,
) =>
  parseClusterSecret(
    secret(
      'c1',
      { token: 'tok', ...data },
      { 'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken', ...labels },
      annotations,
    ),
  );

const tunnel: TunnelEndpoint = {
  type: 'ClusterProxy',
  serverName: 'kubernetes.default.svc',
  insecure: false,
  dial: async () => {
    throw new Error('not in tests');
  },
};

test('a Secret alone: Const endpoint, verified even without CA, credential, default health', () => {
  const merged = mergeCluster({ name: 'c1', secret: tokenSecret({ endpoint: 'https://h:6443' }) });
  // No CA means the system trust store, never "skip verification".
  assert.deepEqual(merged?.endpoint, { type: 'Const', address: 'https://h:6443', insecure: false });
  assert.deepEqual(merged?.credential, { type: 'ServiceAccountToken', token: 'tok' });
  assert.deepEqual(merged?.health, { healthy: false });
  assert.equal(merged?.problem, undefined);
  assert.match(merged?.connectionKey ?? '', /^[0-9a-f]{64}$/);
  const withCa = mergeCluster({
    name: 'c1',
    secret: tokenSecret({ endpoint: 'https://h', 'ca.crt': caPem, 'proxy-url': 'http://p:3128' }),
  });
  assert.deepEqual(withCa?.endpoint, {
    type: 'Const',
    address: 'https://h',
    insecure: false,
    caBundle: caPem,
    proxyUrl: 'http://p:3128',
  });
});

test('no Secret and no tunnel: no cluster, even with a ManagedCluster', () => {
  assert.equal(mergeCluster({ name: 'c1' }), undefined);
  assert.equal(
    mergeCluster({ name: 'c1', managed: parseManagedCluster(managedCluster('c1', { url: 'https://m' })) }),
    undefined,
  );
});

test('OCM: the ManagedCluster endpoint wins, the Secret still gives credential and proxy', () => {
  const merged = mergeCluster({
    name: 'c1',
    secret: tokenSecret({ 'proxy-url': 'socks5://p:1080' }, { team: 'a' }),
    managed: parseManagedCluster(
      managedCluster('c1', {
        url: 'https://m:6443',
        ca: caPem,
        available: 'True',
        labels: { team: 'b', env: 'prod' },
      }),
    ),
  });
  assert.deepEqual(merged?.endpoint, {
    type: 'Const',
    address: 'https://m:6443',
    insecure: false,
    caBundle: caPem,
    proxyUrl: 'socks5://p:1080',
  });
  assert.equal(merged?.problem, undefined, 'the Secret needs no endpoint when the ManagedCluster has one');
  assert.deepEqual(merged?.labels, {
    team: 'a',
    env: 'prod',
    'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken',
  });
  assert.deepEqual(merged?.health, { healthy: true, reason: 'ManagedClusterAvailable' });
  assert.equal(merged?.creationTimestamp, '2026-01-02T03:04:05Z');
});

test('OCM without a usable client config falls back to the Secret endpoint', () => {
  const merged = mergeCluster({
    name: 'c1',
    secret: tokenSecret({ endpoint: 'https://s' }),
    managed: parseManagedCluster(managedCluster('c1')),
  });
  assert.equal(merged?.endpoint?.type === 'Const' && merged.endpoint.address, 'https://s');
});

test("health precedence: an operator's unhealthy mark, then the prober, then the mark, then ManagedCluster", () => {
  const secretInfo = tokenSecret(
    { endpoint: 'https://s' },
    {},
    {
      'status.cluster.core.oam.dev/healthy': 'false',
      'status.cluster.core.oam.dev/healthy-reason': 'ConnectionTimeout',
    },
  );
  const managed = parseManagedCluster(managedCluster('c1', { available: 'True' }));
  assert.deepEqual(mergeCluster({ name: 'c1', secret: secretInfo, managed })?.health, {
    healthy: false,
    reason: 'ConnectionTimeout',
  });
  // The mark wins over a prober that still reaches the cluster (clusters/health-precedence.ts).
  assert.deepEqual(
    mergeCluster({ name: 'c1', secret: secretInfo, managed, health: { healthy: true } })?.health,
    { healthy: false, reason: 'ConnectionTimeout' },
  );
  assert.deepEqual(
    mergeCluster({
      name: 'c1',
      secret: tokenSecret({ endpoint: 'https://s' }),
      managed,
      health: { healthy: true },
    })?.health,
    { healthy: true },
  );
  assert.deepEqual(mergeCluster({ name: 'c1', secret: tokenSecret({}), managed })?.health.healthy, true);
});

test('problems are collected, never thrown', () => {
  const noEndpoint = mergeCluster({ name: 'c1', secret: tokenSecret({}) });
  assert.equal(noEndpoint?.endpoint, undefined);
  assert.equal(noEndpoint?.problem, 'data key endpoint is missing');
  const badBoth = mergeCluster({
    name: 'c1',
    secret: parseClusterSecret(
      secret(
        'c1',
        { endpoint: 'https://h', 'ca.crt': 'junk' },
        { 'cluster.core.oam.dev/cluster-credential-type': 'X509Certificate' },
      ),
    ),
  });
  assert.equal(
    badBoth?.problem,
    'data key ca.crt is not a PEM certificate; credential type X509Certificate needs data key tls.crt and tls.key',
  );
  const clusterProxy = mergeCluster({
    name: 'c1',
    secret: tokenSecret({}, { 'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy' }),
  });
  assert.match(clusterProxy?.problem ?? '', /no agent tunnel is connected/);
});

test('a tunnel provides the endpoint; alone it is the no-credential model, no problem', () => {
  const input = { endpoint: tunnel, generation: 1, connectedAt: '2026-03-01T00:00:00Z' };
  const withSecret = mergeCluster({
    name: 'c1',
    secret: tokenSecret(
      { endpoint: 'https://ignored' },
      { 'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy' },
    ),
    tunnel: input,
  });
  assert.deepEqual(withSecret?.endpoint, { ...tunnel, trustModel: 'hub-credential' });
  assert.equal(withSecret?.problem, undefined);
  assert.deepEqual(withSecret?.tunnel, { connected: true, since: '2026-03-01T00:00:00Z' });
  const alone = mergeCluster({ name: 'c1', tunnel: { ...input, replica: 'gw-0' } });
  assert.deepEqual(alone?.endpoint, { ...tunnel, trustModel: 'no-credential' });
  assert.equal(alone?.credential, undefined);
  assert.equal(alone?.creationTimestamp, '2026-03-01T00:00:00Z');
  assert.equal(alone?.problem, undefined);
  assert.deepEqual(alone?.tunnel, { connected: true, since: '2026-03-01T00:00:00Z', replica: 'gw-0' });
});

test('the Secret picks the trust model: a ClusterProxy Secret without credential-type label and credential data is no-credential', () => {
  const input = { endpoint: tunnel, generation: 1, connectedAt: '2026-03-01T00:00:00Z' };
  const proxyLabel = { 'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy' };
  const marker = parseClusterSecret(secret('c1', {}, proxyLabel));
  assert.equal(marker.noCredential, true);
  assert.equal(marker.credentialProblem, undefined);
  const connected = mergeCluster({ name: 'c1', secret: marker, tunnel: input });
  assert.equal(
    connected?.endpoint?.type === 'ClusterProxy' && connected.endpoint.trustModel,
    'no-credential',
  );
  assert.equal(connected?.problem, undefined);
  assert.equal(connected?.credential, undefined);
  // Without its agent the cluster stays listed, with a 503 that says so.
  const gone = mergeCluster({ name: 'c1', secret: marker });
  assert.equal(gone?.endpoint, undefined);
  assert.match(gone?.problem ?? '', /no agent tunnel is connected/);
  assert.deepEqual(gone?.tunnel, { connected: false });
  // Credential data without the label is ambiguous: the admin is told, nothing is guessed.
  const unlabelled = parseClusterSecret(secret('c1', { token: 'tok' }, proxyLabel));
  assert.equal(unlabelled.noCredential, undefined);
  assert.match(unlabelled.credentialProblem ?? '', /cluster-credential-type is missing/);
  // A Const Secret without the label keeps the original's problem.
  const constUnlabelled = parseClusterSecret(secret('c1', { endpoint: 'https://h' }, {}));
  assert.match(constUnlabelled.credentialProblem ?? '', /cluster-credential-type is missing/);
  // A token Secret with the label: hub-credential.
  const hub = mergeCluster({ name: 'c1', secret: tokenSecret({}, proxyLabel), tunnel: input });
  assert.equal(hub?.endpoint?.type === 'ClusterProxy' && hub.endpoint.trustModel, 'hub-credential');
  assert.deepEqual(hub?.credential, { type: 'ServiceAccountToken', token: 'tok' });
  // A Const cluster has no tunnel state; its attached agent is not used.
  assert.equal(
    mergeCluster({ name: 'c1', secret: tokenSecret({ endpoint: 'https://h' }) })?.tunnel,
    undefined,
  );
});

test('a tunnel is used only when the cluster opts in; TLS inside it is verified with the Secret CA, else the ManagedCluster CA', () => {
  const input = { endpoint: tunnel, generation: 1, connectedAt: '2026-03-01T00:00:00Z' };
  const constSecret = mergeCluster({
    name: 'c1',
    secret: tokenSecret({ endpoint: 'https://h' }),
    tunnel: input,
  });
  assert.equal(constSecret?.endpoint?.type, 'Const', 'a Const Secret keeps its direct endpoint');
  const proxyLabel = { 'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy' };
  const withCa = mergeCluster({
    name: 'c1',
    secret: tokenSecret({ 'ca.crt': caPem }, proxyLabel),
    managed: parseManagedCluster(managedCluster('c1', { url: 'https://m', ca: 'other' })),
    tunnel: input,
  });
  assert.equal(withCa?.endpoint?.type, 'ClusterProxy');
  assert.equal(withCa?.endpoint?.caBundle, caPem);
  const fromManaged = mergeCluster({
    name: 'c1',
    secret: tokenSecret({}, proxyLabel),
    managed: parseManagedCluster(managedCluster('c1', { url: 'https://m', ca: caPem })),
    tunnel: input,
  });
  assert.equal(fromManaged?.endpoint?.caBundle, caPem);
  const badCa = mergeCluster({
    name: 'c1',
    secret: tokenSecret({ 'ca.crt': 'junk' }, proxyLabel),
    tunnel: input,
  });
  assert.equal(badCa?.endpoint, undefined);
  assert.match(badCa?.problem ?? '', /ca.crt is not a PEM certificate/);
});

test('connectionKey changes with the credential, the CA and the tunnel generation only', () => {
  const ep = { type: 'Const' as const, address: 'https://h', insecure: true };
  const a = connectionKey(ep, { type: 'ServiceAccountToken', token: 'one' });
  assert.equal(a, connectionKey({ ...ep }, { type: 'ServiceAccountToken', token: 'one' }));
  assert.notEqual(a, connectionKey(ep, { type: 'ServiceAccountToken', token: 'two' }));
  assert.notEqual(
    a,
    connectionKey({ ...ep, insecure: false, caBundle: caPem }, { type: 'ServiceAccountToken', token: 'one' }),
  );
  assert.notEqual(connectionKey(tunnel, undefined, 1), connectionKey(tunnel, undefined, 2));
  assert.notEqual(
    connectionKey({ ...tunnel, trustModel: 'hub-credential' }, undefined, 1),
    connectionKey({ ...tunnel, trustModel: 'no-credential' }, undefined, 1),
  );
});

test('--insecure-skip-tls-verify-when-no-ca restores the original: a Secret without CA is insecure', () => {
  const policy = { insecureSkipTlsVerifyWhenNoCa: true };
  const noCa = mergeCluster({ name: 'c1', secret: tokenSecret({ endpoint: 'https://h' }) }, policy);
  assert.deepEqual(noCa?.endpoint, { type: 'Const', address: 'https://h', insecure: true });
  const withCa = mergeCluster(
    { name: 'c1', secret: tokenSecret({ endpoint: 'https://h', 'ca.crt': caPem }) },
    policy,
  );
  assert.equal(withCa?.endpoint?.insecure, false, 'a CA is always verified');
  // The flag is about Secrets: an OCM endpoint without a CA stays verified, as in the original.
  const ocm = mergeCluster(
    {
      name: 'c1',
      secret: tokenSecret({}),
      managed: parseManagedCluster(managedCluster('c1', { url: 'https://m' })),
    },
    policy,
  );
  assert.deepEqual(ocm?.endpoint, { type: 'Const', address: 'https://m', insecure: false });
});

test('a certificate failure of a Secret without CA says why and how to fix it; other failures do not', () => {
  const noCa = tokenSecret({ endpoint: 'https://h' });
  const tlsFailure = { healthy: false, reason: 'unreachable: self-signed certificate in certificate chain' };
  const explained = mergeCluster({ name: 'c1', secret: noCa, health: tlsFailure })?.health;
  assert.equal(explained?.healthy, false);
  assert.equal(
    explained?.reason,
    'no ca.crt in Secret vela-system/c1: verified against the system trust store: ' +
      'unreachable: self-signed certificate in certificate chain; ' +
      "add the cluster's CA to the Secret as ca.crt, or start the gateway with " +
      '--insecure-skip-tls-verify-when-no-ca to skip verification as the original did',
  );
  for (const reason of [
    'unable to verify the first certificate',
    'unable to get local issuer certificate',
    "Hostname/IP does not match certificate's altnames: IP: 10.0.0.1 is not in the cert's list: ",
    'certificate has expired',
  ]) {
    const health = mergeCluster({ name: 'c1', secret: noCa, health: { healthy: false, reason } })?.health;
    assert.match(health?.reason ?? '', /^no ca\.crt in Secret vela-system\/c1/, reason);
  }
  const refused = { healthy: false, reason: 'unreachable: connect ECONNREFUSED 127.0.0.1:6443' };
  assert.deepEqual(mergeCluster({ name: 'c1', secret: noCa, health: refused })?.health, refused);
  const withCa = tokenSecret({ endpoint: 'https://h', 'ca.crt': caPem });
  assert.deepEqual(mergeCluster({ name: 'c1', secret: withCa, health: tlsFailure })?.health, tlsFailure);
  const plainHttp = tokenSecret({ endpoint: 'http://h' });
  assert.deepEqual(mergeCluster({ name: 'c1', secret: plainHttp, health: tlsFailure })?.health, tlsFailure);
});

test("a Secret that names an endpoint wins: the ManagedCluster's URL and CA are ignored", () => {
  const otherCa = caPem.replace('fakeCA', 'attackerCA');
  const managed = parseManagedCluster(managedCluster('c1', { url: 'https://attacker:443', ca: otherCa }));
  const withCa = mergeCluster({
    name: 'c1',
    secret: tokenSecret({ endpoint: 'https://real:6443', 'ca.crt': caPem }),
    managed,
  });
  assert.deepEqual(withCa?.endpoint, {
    type: 'Const',
    address: 'https://real:6443',
    insecure: false,
    caBundle: caPem,
  });
  const withoutCa = mergeCluster({
    name: 'c1',
    secret: tokenSecret({ endpoint: 'https://real:6443' }),
    managed,
  });
  assert.deepEqual(withoutCa?.endpoint, { type: 'Const', address: 'https://real:6443', insecure: false });
  // Even an unusable Secret endpoint is the admin's word: a problem, not a fallback to the ManagedCluster.
  const broken = mergeCluster({ name: 'c1', secret: tokenSecret({ endpoint: 'ftp://x' }), managed });
  assert.equal(broken?.endpoint, undefined);
  assert.match(broken?.problem ?? '', /data key endpoint "ftp:\/\/x" must use https/);
});

test("the Secret's ca.crt pins the CA of a ManagedCluster endpoint", () => {
  const otherCa = caPem.replace('fakeCA', 'attackerCA');
  const merged = mergeCluster({
    name: 'c1',
    secret: tokenSecret({ 'ca.crt': caPem }),
    managed: parseManagedCluster(managedCluster('c1', { url: 'https://m:6443', ca: otherCa })),
  });
  assert.deepEqual(merged?.endpoint, {
    type: 'Const',
    address: 'https://m:6443',
    insecure: false,
    caBundle: caPem,
  });
});

test('a ManagedCluster that is not accepted, not joined, or not https never provides the endpoint', () => {
  const cases: [string, Parameters<typeof managedCluster>[1], RegExp][] = [
    [
      'not accepted',
      { hubAcceptsClient: false },
      /^no endpoint: data key endpoint is missing in the Secret and the ManagedCluster is not accepted by the hub \(spec.hubAcceptsClient is not true\)/,
    ],
    [
      'joined missing',
      { joined: 'missing' },
      /the ManagedCluster has not joined \(ManagedClusterJoined is missing\)/,
    ],
    ['joined False', { joined: 'False' }, /has not joined \(ManagedClusterJoined is False\)/],
    [
      'plain http',
      { url: 'http://listener:8080' },
      /the ManagedCluster spec.managedClusterClientConfigs\[0\].url "http:\/\/listener:8080" is not used: a ManagedCluster's URL must be https:\/\//,
    ],
  ];
  for (const [name, options, problem] of cases) {
    const mc = managedCluster('c1', {
      url: 'https://listener:8443',
      ca: caPem,
      available: 'False',
      labels: { injected: 'yes' },
      ...options,
    });
    // Secret without endpoint: no endpoint at all, so the token goes nowhere.
    const merged = mergeCluster({ name: 'c1', secret: tokenSecret({}), managed: parseManagedCluster(mc) });
    assert.equal(merged?.endpoint, undefined, name);
    assert.match(merged?.problem ?? '', problem, name);
    // Secret with endpoint: the Secret's, untouched.
    const withEndpoint = mergeCluster({
      name: 'c1',
      secret: tokenSecret({ endpoint: 'https://real' }),
      managed: parseManagedCluster(mc),
    });
    assert.equal(withEndpoint?.endpoint?.type === 'Const' && withEndpoint.endpoint.address, 'https://real');
    if (name !== 'plain http') {
      // An untrusted ManagedCluster adds no labels and no health either.
      assert.equal(withEndpoint?.labels.injected, undefined, name);
      assert.doesNotMatch(withEndpoint?.health.reason ?? '', /LeaseUpdateStopped/, name);
    }
  }
});

test("the prober's recorded verdict counts while the prober runs; an operator's unhealthy mark still wins", () => {
  const probed = {
    'status.cluster.core.oam.dev/probed-healthy': 'false',
    'status.cluster.core.oam.dev/probed-reason': 'connect ECONNREFUSED',
  };
  const withVerdict = parseClusterSecret(
    secret('a', { token: 't', endpoint: 'https://a' }, undefined, probed),
  );
  assert.deepEqual(mergeCluster({ name: 'a', secret: withVerdict }, { probing: true })?.health, {
    healthy: false,
    reason: 'connect ECONNREFUSED',
  });
  // The prober off: a verdict left from when it ran does not linger.
  assert.deepEqual(mergeCluster({ name: 'a', secret: withVerdict }, { probing: false })?.health, {
    healthy: false,
  });
  const unprobed = parseClusterSecret(secret('b', { token: 't', endpoint: 'https://b' }));
  assert.equal(mergeCluster({ name: 'b', secret: unprobed }, { probing: true })?.health.unknown, true);
  const marked = parseClusterSecret(
    secret('c', { token: 't', endpoint: 'https://c' }, undefined, {
      'status.cluster.core.oam.dev/probed-healthy': 'true',
      'status.cluster.core.oam.dev/healthy': 'false',
      'status.cluster.core.oam.dev/healthy-reason': 'maintenance',
    }),
  );
  assert.deepEqual(mergeCluster({ name: 'c', secret: marked }, { probing: true })?.health, {
    healthy: false,
    reason: 'maintenance',
  });
});

test("the credential Secret's proxy configuration replaces the ManagedCluster's; what was ignored is shown", () => {
  const inline = 'cluster.core.oam.dev/cluster-gateway-proxy-configuration';
  const reference = 'gateway.cluster.core.oam.dev/proxy-configuration';
  const ignoredKey = 'gateway.cluster.core.oam.dev/ignored-managedcluster-settings';
  const mc = managedCluster('c1', { url: 'https://mc:6443', available: 'True' });
  mc.metadata = {
    ...mc.metadata,
    annotations: {
      [inline]: 'apiVersion: cluster.core.oam.dev/v1alpha1\nkind: ClusterGatewayProxyConfiguration\n',
    },
  };
  const managed = parseManagedCluster(mc);
  const adminSecret = tokenSecret({}, {}, { [reference]: 'admins', [ignoredKey]: 'a copy is not believed' });
  const merged = mergeCluster({ name: 'c1', secret: adminSecret, managed });
  assert.equal(merged?.annotations[reference], 'admins');
  assert.equal(merged?.annotations[inline], undefined, 'a managed cluster cannot turn it into a conflict');
  assert.match(
    merged?.annotations[ignoredKey] ?? '',
    /^annotation cluster\.core\.oam\.dev\/cluster-gateway-proxy-configuration on ManagedCluster "c1" is not used: the credential Secret's annotation gateway\.cluster\.core\.oam\.dev\/proxy-configuration applies$/,
  );
  // Without a Secret configuration the ManagedCluster's (screened) one is used, and nothing is said.
  const plain = mergeCluster({ name: 'c1', secret: tokenSecret({}), managed });
  assert.equal(plain?.annotations[inline], mc.metadata.annotations?.[inline]);
  assert.equal(plain?.annotations[ignoredKey], undefined);
});

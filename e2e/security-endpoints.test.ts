/**
 * Endpoint hijacks, against the real hub, OCM and managed clusters: who may
 * write a ManagedCluster (the bootstrap identity every joining cluster gets,
 * a spoke's registration agent, a user with `update managedclusters`) must
 * not be able to send a cluster's traffic, and its credential, somewhere
 * else; and a credential Secret without a CA must not mean "no TLS
 * verification". Each attack runs against a listener on 127.0.0.1 that
 * records every request it gets, and each test shows that legitimate
 * proxying still works.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { writeKubeconfig } from '../hack/localenv/kubeconfig.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import { KubeClient, type KubeObject } from '../shared/kube/client.ts';
import { requestServiceAccountToken } from '../shared/kube/service-account-token.ts';
import { StatusError } from '../shared/kube/status.ts';
import { createCertificateAuthority } from '../shared/pki.ts';
import {
  applyClusterSecret,
  clusterEndpoint,
  credentialNamespace,
  gatewayToken,
  secretPath,
} from './support/credentials.ts';
import { environmentState, hubClient } from './support/environment.ts';
import { gatewayRequest } from './support/gateway-client.ts';
import { grantOnHub, hubUser, revokeOnHub } from './support/rbac.ts';
import { startSecondGateway } from './support/second-gateway.ts';
import { hubUserKubeconfig, proxyPrefix } from './support/users.ts';

const managedClusters = '/apis/cluster.open-cluster-management.io/v1/managedclusters';
const gateways = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways';

interface ClientConfig {
  url: string;
  caBundle?: string;
}
interface ManagedCluster extends KubeObject {
  spec: { hubAcceptsClient?: boolean; managedClusterClientConfigs?: ClientConfig[] };
}
interface ClusterGateway extends KubeObject {
  spec: { access: { endpoint: { const?: { address: string; insecure?: boolean } } } };
  status: { healthy: boolean; healthyReason?: string };
}

/** A listener an attacker controls: it counts every HTTP request and every Authorization header. */
interface Listener {
  url: string;
  ca?: string;
  requests: number;
  authorizations: string[];
  close(): void;
}

let hub: KubeClient;
let bootstrap: KubeClient;
let agent: KubeClient;
let editor: KubeClient;
let plain: Listener;
let tlsListener: Listener;
let original: ManagedCluster;
const editorName = 'managedcluster-editor';

function record(server: http.Server, listener: Omit<Listener, 'close' | 'url'>): void {
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    listener.requests++;
    if (req.headers.authorization) listener.authorizations.push(req.headers.authorization);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"attacker"}}');
  });
}

async function listen(server: http.Server, scheme: 'http' | 'https'): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function startListeners(): Promise<void> {
  const plainState = { requests: 0, authorizations: [] as string[] };
  const plainServer = http.createServer();
  record(plainServer, plainState);
  const plainUrl = await listen(plainServer, 'http');
  plain = Object.assign(plainState, { url: plainUrl, close: () => plainServer.close() });

  // Its own CA, which the attacker puts into the ManagedCluster next to its URL.
  const ca = await createCertificateAuthority('attacker-ca');
  const serving = await ca.issue({ commonName: '127.0.0.1', ipAddresses: ['127.0.0.1'], usage: 'server' });
  const tlsState = { requests: 0, authorizations: [] as string[] };
  const tlsServer = https.createServer({ cert: serving.cert, key: serving.key });
  record(tlsServer, tlsState);
  const tlsUrl = await listen(tlsServer, 'https');
  tlsListener = Object.assign(tlsState, { url: tlsUrl, ca: ca.cert, close: () => tlsServer.close() });
}

/** A hub client that authenticates with `token` (a ServiceAccount's). */
async function clientWithToken(name: string, token: string): Promise<KubeClient> {
  const env = environmentState();
  const file = writeKubeconfig(path.join(env.stateDir, `${name}.kubeconfig`), {
    name: 'hub',
    server: env.hub.server,
    caCert: readFileSync(path.join(env.stateDir, 'hub', 'ca.crt'), 'utf8'),
    token,
  });
  return KubeClient.fromKubeconfig(file);
}

before(async () => {
  hub = await hubClient();
  await startListeners();
  // The bootstrap identity that joining clusters get (open-cluster-management:bootstrap).
  bootstrap = await clientWithToken(
    'bootstrap',
    await requestServiceAccountToken(hub, 'open-cluster-management', 'agent-registration-bootstrap', 3600),
  );
  // cluster1's registration agent, with the hub identity it got from its signed CSR.
  agent = await KubeClient.fromKubeconfig(
    path.join(environmentState().stateDir, 'klusterlet', 'cluster1', 'hub-kubeconfig', 'kubeconfig'),
  );
  // A user who may only read and update ManagedClusters.
  await grantOnHub(
    hub,
    editorName,
    [hubUser(editorName)],
    [
      {
        apiGroups: ['cluster.open-cluster-management.io'],
        resources: ['managedclusters'],
        verbs: ['get', 'update'],
      },
    ],
  );
  editor = await KubeClient.fromKubeconfig(await hubUserKubeconfig(editorName));
  original = await hub.get<ManagedCluster>(`${managedClusters}/cluster1`);
});

after(async () => {
  await restoreCluster1();
  for (const name of ['hijack-unaccepted', 'hijack-unjoined']) {
    await hub.delete(`${managedClusters}/${name}`);
    await hub.delete(secretPath(name));
  }
  await hub.delete(secretPath('no-ca'));
  await revokeOnHub(hub, editorName);
  plain?.close();
  tlsListener?.close();
  for (const client of [hub, bootstrap, agent, editor]) client?.close();
});

/** cluster1's ManagedCluster client configs and labels, and its Secret, as the environment made them. */
async function restoreCluster1(): Promise<void> {
  await hub.mergePatch(`${managedClusters}/cluster1`, {
    metadata: { labels: { 'e2e-hijack': null } },
    spec: { managedClusterClientConfigs: original.spec.managedClusterClientConfigs },
  });
  await hub.mergePatch(secretPath('cluster1'), { data: { endpoint: null, 'ca.crt': null } });
}

/**
 * As `who`, point cluster1's ManagedCluster at `url` (with `ca`), keeping
 * its real client config second so that its registration agent, which only
 * adds a missing URL, leaves the change alone. The nonce label tells when
 * the gateway has seen this version.
 */
async function redirectCluster1(who: KubeClient, url: string, ca?: string): Promise<string> {
  const nonce = `n${Date.now()}`;
  const attacker: ClientConfig = { url, ...(ca ? { caBundle: Buffer.from(ca).toString('base64') } : {}) };
  await updateManagedCluster(who, 'cluster1', (current) => ({
    ...current,
    metadata: { ...current.metadata, labels: { ...current.metadata?.labels, 'e2e-hijack': nonce } },
    spec: {
      ...current.spec,
      managedClusterClientConfigs: [attacker, ...(original.spec.managedClusterClientConfigs ?? [])],
    },
  }));
  return nonce;
}

/** GET and PUT as `who` (some identities may update but not patch), again on a conflict. */
async function updateManagedCluster(
  who: KubeClient,
  name: string,
  change: (current: ManagedCluster) => ManagedCluster,
): Promise<void> {
  await waitFor(`an update of ManagedCluster ${name}`, async () => {
    const current = await who.get<ManagedCluster>(`${managedClusters}/${name}`);
    try {
      await who.request('PUT', `${managedClusters}/${name}`, { body: change(current) });
      return true;
    } catch (err) {
      if (err instanceof StatusError && err.code === 409) return false;
      throw err;
    }
  });
}

async function clusterGateway(name: string): Promise<ClusterGateway> {
  return hub.get<ClusterGateway>(`${gateways}/${name}`);
}

/** A proxied GET through the aggregator; the status code and body, never a throw. */
async function proxied(cluster: string, subpath = 'api/v1/namespaces/default'): Promise<[number, string]> {
  try {
    const body = await hub.request<unknown>('GET', `${proxyPrefix}/${cluster}/proxy/${subpath}`);
    return [200, typeof body === 'string' ? body : JSON.stringify(body)];
  } catch (err) {
    if (err instanceof StatusError) return [err.code, err.message];
    throw err;
  }
}

async function assertLegitimateTrafficWorks(cluster: string): Promise<void> {
  const [code, body] = await waitFor(`${cluster} to serve through the proxy`, async () => {
    const result = await proxied(cluster);
    return result[0] === 200 ? result : undefined;
  });
  assert.equal(code, 200);
  assert.equal((JSON.parse(body) as { metadata: { name: string } }).metadata.name, 'default');
}

/** Keeps proxying (and lets the prober run) for a while; the listener must see nothing. */
async function assertListenerUntouched(listener: Listener, cluster: string, ms = 4000): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    await proxied(cluster);
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.equal(listener.requests, 0, `the listener got ${listener.requests} request(s)`);
  assert.deepEqual(listener.authorizations, [], 'the listener never saw a credential');
}

test('the bootstrap identity cannot rewrite a joined ManagedCluster, and the ManagedClusters it creates are never trusted', async () => {
  // It may not update an existing cluster at all.
  await assert.rejects(
    bootstrap.mergePatch(`${managedClusters}/cluster1`, {
      spec: { managedClusterClientConfigs: [{ url: plain.url }] },
    }),
    (err: unknown) => err instanceof StatusError && err.code === 403,
  );

  // It may create one under the name of a cluster that has a credential Secret but no endpoint in it
  // (the OCM layout): not accepted, that ManagedCluster's URL is ignored.
  const token = await gatewayToken(hub, 'cluster2');
  // The listener's URL with its own CA: everything a client needs to trust it.
  const attackerConfig = {
    url: tlsListener.url,
    caBundle: Buffer.from(tlsListener.ca ?? '').toString('base64'),
  };
  await applyClusterSecret(hub, 'hijack-unaccepted', 'ServiceAccountToken', { token });
  await bootstrap.create(managedClusters, {
    apiVersion: 'cluster.open-cluster-management.io/v1',
    kind: 'ManagedCluster',
    metadata: { name: 'hijack-unaccepted', labels: { injected: 'by-bootstrap' } },
    spec: { hubAcceptsClient: false, managedClusterClientConfigs: [attackerConfig] },
  });
  await assertListenerUntouched(tlsListener, 'hijack-unaccepted');
  const unaccepted = await waitFor('the gateway to report the untrusted ManagedCluster', async () => {
    const gw = await clusterGateway('hijack-unaccepted').catch(() => undefined);
    return gw?.status.healthyReason?.includes('not accepted') ? gw : undefined;
  });
  assert.equal(unaccepted.status.healthy, false);
  assert.match(
    unaccepted.status.healthyReason ?? '',
    /no endpoint: data key endpoint is missing in the Secret and the ManagedCluster is not accepted by the hub \(spec.hubAcceptsClient is not true\)/,
  );
  assert.equal(unaccepted.spec.access.endpoint.const, undefined);
  assert.equal(
    unaccepted.metadata?.labels?.injected,
    undefined,
    'an untrusted ManagedCluster adds no labels',
  );
  const [code, message] = await proxied('hijack-unaccepted');
  assert.equal(code, 503);
  assert.match(message, /not accepted by the hub/);

  // Accepted by someone who may update ManagedClusters, but never joined (no agent with a signed
  // certificate ever reported in): still ignored.
  await applyClusterSecret(hub, 'hijack-unjoined', 'ServiceAccountToken', { token });
  await bootstrap.create(managedClusters, {
    apiVersion: 'cluster.open-cluster-management.io/v1',
    kind: 'ManagedCluster',
    metadata: { name: 'hijack-unjoined' },
    spec: { hubAcceptsClient: false, managedClusterClientConfigs: [attackerConfig] },
  });
  await updateManagedCluster(editor, 'hijack-unjoined', (current) => ({
    ...current,
    spec: { ...current.spec, hubAcceptsClient: true },
  }));
  await assertListenerUntouched(tlsListener, 'hijack-unjoined');
  const unjoined = await waitFor('the gateway to report the unjoined ManagedCluster', async () => {
    const gw = await clusterGateway('hijack-unjoined').catch(() => undefined);
    return gw?.status.healthyReason?.includes('has not joined') ? gw : undefined;
  });
  assert.match(
    unjoined.status.healthyReason ?? '',
    /ManagedCluster has not joined \(ManagedClusterJoined is/,
  );
  await assertLegitimateTrafficWorks('cluster1');
  await assertLegitimateTrafficWorks('cluster2');
});

for (const [who, client] of [
  ['its registration agent', () => agent],
  ['a user with only update on managedclusters', () => editor],
] as const) {
  test(`${who} cannot point a joined cluster at a plain-http listener`, async () => {
    try {
      const nonce = await redirectCluster1(client(), plain.url);
      await waitFor('the gateway to see the redirected ManagedCluster', async () => {
        const g = await clusterGateway('cluster1');
        return g.metadata?.labels?.['e2e-hijack'] === nonce;
      });
      await assertListenerUntouched(plain, 'cluster1');
      const gw = await waitFor('the probe to report the http URL', async () => {
        const g = await clusterGateway('cluster1');
        return /must be https/.test(g.status.healthyReason ?? '') ? g : undefined;
      });
      assert.equal(gw.status.healthy, false);
      assert.match(
        gw.status.healthyReason ?? '',
        /spec.managedClusterClientConfigs\[0\].url "http:\/\/127.0.0.1:\d+" is not used: a ManagedCluster's URL must be https:\/\//,
      );
      const [code] = await proxied('cluster1');
      assert.equal(code, 503, 'no endpoint: the request fails rather than going anywhere');
      assert.equal(plain.requests, 0);
      await assertLegitimateTrafficWorks('cluster2');
    } finally {
      await restoreCluster1();
    }
    await assertLegitimateTrafficWorks('cluster1');
  });
}

test("a Secret that names the endpoint wins: an https listener with the writer's own CA gets nothing", async () => {
  try {
    // The hub admin pins cluster1's endpoint in its Secret.
    const real = clusterEndpoint('cluster1');
    await hub.mergePatch(secretPath('cluster1'), {
      stringData: { endpoint: real.endpoint, 'ca.crt': real['ca.crt'] },
    });
    const nonce = await redirectCluster1(agent, tlsListener.url, tlsListener.ca);
    const gw = await waitFor('the gateway to see the redirected ManagedCluster', async () => {
      const g = await clusterGateway('cluster1');
      return g.metadata?.labels?.['e2e-hijack'] === nonce ? g : undefined;
    });
    assert.equal(gw.spec.access.endpoint.const?.address, real.endpoint);
    await assertLegitimateTrafficWorks('cluster1');
    await assertListenerUntouched(tlsListener, 'cluster1');
  } finally {
    await restoreCluster1();
  }
  await assertLegitimateTrafficWorks('cluster1');
});

test("the Secret's ca.crt pins a ManagedCluster endpoint: a listener with another CA gets no request", async () => {
  try {
    // OCM layout (no endpoint in the Secret) plus the cluster's CA, as managed-serviceaccount writes it.
    await hub.mergePatch(secretPath('cluster1'), {
      stringData: { 'ca.crt': clusterEndpoint('cluster1')['ca.crt'] },
    });
    await assertLegitimateTrafficWorks('cluster1');
    const nonce = await redirectCluster1(editor, tlsListener.url, tlsListener.ca);
    await waitFor('the gateway to see the redirected ManagedCluster', async () => {
      const g = await clusterGateway('cluster1');
      return g.metadata?.labels?.['e2e-hijack'] === nonce;
    });
    await assertListenerUntouched(tlsListener, 'cluster1');
    const gw = await waitFor('the probe to fail verification of the listener', async () => {
      const g = await clusterGateway('cluster1');
      return /certificate/.test(g.status.healthyReason ?? '') ? g : undefined;
    });
    // The ManagedCluster's URL is used (accepted, joined, https), but with the Secret's CA.
    assert.equal(gw.spec.access.endpoint.const?.address, tlsListener.url);
    assert.equal(gw.status.healthy, false);
    const [code] = await proxied('cluster1');
    assert.notEqual(code, 200);
    assert.equal(tlsListener.requests, 0);
    await assertLegitimateTrafficWorks('cluster2');
  } finally {
    await restoreCluster1();
  }
  await assertLegitimateTrafficWorks('cluster1');
});

test('a Secret without ca.crt is verified against the system trust store; the opt-in flag skips verification', async () => {
  const real = clusterEndpoint('cluster1');
  await applyClusterSecret(hub, 'no-ca', 'ServiceAccountToken', {
    endpoint: real.endpoint,
    token: await gatewayToken(hub, 'cluster1'),
  });
  // The cluster's own CA is in no default trust store, so the request must fail, not be proxied unverified.
  await waitFor('the gateway to know the cluster', () => clusterGateway('no-ca').catch(() => undefined));
  const [code, message] = await proxied('no-ca');
  assert.notEqual(code, 200, 'proxied without verifying the certificate');
  assert.match(message, /certificate|self-signed/);
  const gw = await waitFor('the probe to fail verification', async () => {
    const g = await clusterGateway('no-ca').catch(() => undefined);
    return g?.status.healthyReason?.startsWith('no ca.crt') ? g : undefined;
  });
  assert.equal(gw.status.healthy, false);
  assert.equal(gw.spec.access.endpoint.const?.insecure, undefined, 'not shown as insecure');
  assert.match(
    gw.status.healthyReason ?? '',
    new RegExp(
      `^no ca\\.crt in Secret ${credentialNamespace}/no-ca: verified against the system trust store: .*(certificate|self-signed).*; add the cluster's CA to the Secret as ca\\.crt, or start the gateway with --insecure-skip-tls-verify-when-no-ca`,
    ),
  );
  await assertLegitimateTrafficWorks('cluster1');

  // The original's behaviour, for its users, on a second gateway process.
  const second = await startSecondGateway('gateway-security-endpoints', [
    '--health-check-interval=1',
    '--insecure-skip-tls-verify-when-no-ca',
  ]);
  try {
    const admin = { frontProxy: { user: 'admin', groups: ['system:masters'] } };
    const res = await waitFor('the flagged gateway to proxy the Secret without CA', async () => {
      const r = await gatewayRequest(
        'GET',
        `${proxyPrefix}/no-ca/proxy/api/v1/namespaces/default`,
        admin,
        second.url,
      );
      return r.status === 200 ? r : undefined;
    });
    assert.equal(res.json<{ metadata: { name: string } }>().metadata.name, 'default');
    const shown = await gatewayRequest('GET', `${gateways}/no-ca`, admin, second.url);
    assert.equal(shown.json<ClusterGateway>().spec.access.endpoint.const?.insecure, true, 'visible opt-in');
    const legit = await gatewayRequest(
      'GET',
      `${proxyPrefix}/cluster2/proxy/api/v1/namespaces/default`,
      admin,
      second.url,
    );
    assert.equal(legit.status, 200);
  } finally {
    second.stop();
  }
});

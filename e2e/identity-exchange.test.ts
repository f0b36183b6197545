/**
 * Identity exchange and local authorization (issue 12), against the real
 * environment: requests go through the hub's kube-aggregator to the
 * environment's gateway with ?impersonate=true (identity penetration), the
 * rules come from a ClusterGatewayProxyConfiguration applied while the
 * gateway runs, and the managed cluster's own RBAC and audit log show who
 * the request ran as there. The seed's example: user-12345 on cluster-34567
 * is user-34567, group sudoer gets the cluster credential, ext-* gets what a
 * real HTTPS exchange service (started here) answers, and a 503 when it is
 * down. Also: an invalid object reported in status while the previous
 * generation stays in force, the original's annotation and file formats
 * unchanged, local authorization from a per-cluster object, and no
 * credential in any log.
 *
 * cluster-34567, idx-annotated and idx-authz are credential Secrets for
 * cluster1 (its endpoint, CA and the gateway's token), so their rules touch
 * nothing the other test files use; the global object is deleted at the end.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { waitFor } from '../hack/localenv/wait.ts';
import type { KubeClient, KubeObject } from '../shared/kube/client.ts';
import { auditEvents } from './support/audit.ts';
import { clusterEndpoint, credentialNamespace, gatewayToken, secretPath } from './support/credentials.ts';
import { environmentState, hubClient, managedClient } from './support/environment.ts';
import { gatewayRequest } from './support/gateway-client.ts';
import { type IdentityExchangerService, startIdentityExchanger } from './support/identity-exchanger.ts';
import { rawRequest } from './support/raw-request.ts';
import { grantInNamespace, grantOnHub, hubUser, revokeOnHub } from './support/rbac.ts';
import { type SecondGateway, startSecondGateway } from './support/second-gateway.ts';
import { hubUserCertificate, proxyPrefix } from './support/users.ts';

const configurations = '/apis/gateway.cluster.core.oam.dev/v1alpha1/clustergatewayproxyconfigurations';
const globalName = 'cluster-gateway';
const authzName = 'idx-authz';
const aliases = ['cluster-34567', 'idx-annotated', 'idx-authz'];
const managedNamespaces = ['idx-mapped', 'idx-external', 'idx-namespace1'];
const hubNamespace = 'idx-namespace1';
const gatewayOnCluster = 'system:serviceaccount:kube-system:cluster-gateway';
const users = ['user-12345', 'idx-sudo', 'ext-alice', 'ext-carol', 'ext-broken', 'user1-idx', 'user2-idx'];

let hub: KubeClient;
let cluster1: KubeClient;
/** The environment gateway's log is appended to across runs: only what this file caused counts. */
let logStart = 0;
let exchanger: IdentityExchangerService;
let fileGateway: SecondGateway | undefined;
const certs: Record<string, { cert: string; key: string }> = {};

interface ConfigurationObject extends KubeObject {
  metadata: { name: string; generation: number };
  status?: {
    appliedGeneration?: number;
    conditions?: Array<{ type: string; status: string; message: string; observedGeneration?: number }>;
  };
}

function globalConfiguration(mappedUser: string, externalPattern = 'ext-*'): KubeObject {
  return {
    apiVersion: 'gateway.cluster.core.oam.dev/v1alpha1',
    kind: 'ClusterGatewayProxyConfiguration',
    metadata: { name: globalName },
    spec: {
      clientIdentityExchanger: {
        rules: [
          {
            name: 'super-user',
            source: { group: 'sudoer' },
            type: 'PrivilegedIdentityExchanger',
            priority: 10,
          },
          {
            name: 'mapping',
            source: { user: 'user-12345', cluster: 'cluster-34567' },
            target: { user: mappedUser },
            type: 'StaticMappingIdentityExchanger',
            priority: 100,
          },
          {
            name: 'external',
            source: { userPattern: externalPattern },
            url: exchanger.url,
            caBundle: exchanger.caBundle,
            timeoutSeconds: 2,
            cacheTTLSeconds: 300,
            type: 'ExternalIdentityExchanger',
            priority: 20,
          },
        ],
      },
    },
  };
}

/** A credential Secret for cluster1 under another name, with extra annotations. */
async function applyAlias(name: string, annotations: Record<string, string> = {}): Promise<void> {
  await hub.apply(
    secretPath(name),
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name,
        namespace: credentialNamespace,
        labels: { 'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken' },
        annotations,
      },
      stringData: { ...clusterEndpoint('cluster1'), token: await gatewayToken(hub, 'cluster1') },
    },
    'e2e',
  );
}

/** Applies a configuration object and waits until the gateway reports on its current generation. */
async function applyConfiguration(obj: KubeObject): Promise<ConfigurationObject> {
  const name = obj.metadata?.name ?? '';
  const applied = await hub.apply<ConfigurationObject>(`${configurations}/${name}`, obj, 'e2e');
  return waitFor(`the gateway to report on ${name} generation ${applied.metadata.generation}`, async () => {
    const current = await hub.get<ConfigurationObject>(`${configurations}/${name}`);
    const valid = current.status?.conditions?.find((c) => c.type === 'Valid');
    return valid?.observedGeneration === applied.metadata.generation ? current : undefined;
  });
}

/** Through the hub's kube-aggregator, as hub user `user` (client certificate). */
function viaHub(user: string, target: string) {
  const client = certs[user];
  if (!client) throw new Error(`no certificate for ${user}`);
  return rawRequest(environmentState().hub.server, 'GET', target, { client });
}

let markerCount = 0;
function marker(): string {
  markerCount++;
  return `idx${Date.now()}n${markerCount}`;
}

/** The event cluster1 logged for the request whose query holds `mark`. */
function clusterEvent(mark: string) {
  return waitFor(`cluster1 to log ${mark}`, () =>
    auditEvents('cluster1').find((e) => e.requestURI.includes(mark)),
  );
}

/**
 * Proves that no request with `mark` reached cluster1: a later request that
 * does reach it is logged, and the audit log (written in order) holds
 * nothing with `mark` before it.
 */
async function assertNeverReachedCluster(mark: string): Promise<void> {
  const later = marker();
  const res = await viaHub(
    'idx-sudo',
    `${proxyPrefix}/cluster-34567/proxy/api/v1/namespaces?impersonate=true&${later}=1`,
  );
  assert.equal(res.status, 200, res.body);
  await clusterEvent(later);
  assert.equal(
    auditEvents('cluster1').find((e) => e.requestURI.includes(mark)),
    undefined,
    `no request with ${mark} reached cluster1`,
  );
}

function proxied(cluster: string, apiPath: string, mark: string, impersonate = true): string {
  return `${proxyPrefix}/${cluster}/proxy${apiPath}?${impersonate ? 'impersonate=true&' : ''}${mark}=1`;
}

before(async () => {
  logStart = readFileSync(gatewayLogPath()).length;
  hub = await hubClient();
  cluster1 = await managedClient('cluster1');
  exchanger = await startIdentityExchanger({
    'ext-alice': { username: 'idx-ext-mapped', groups: ['idx-ext-team'] },
    'ext-carol': { username: 'idx-ext-mapped' },
    'ext-broken': { httpError: 500 },
  });
  for (const user of users) {
    certs[user] = await hubUserCertificate(user, user === 'idx-sudo' ? ['sudoer'] : []);
  }
  // Hub: every test user may use the proxy subresource; only user1-idx may read configmaps in idx-namespace1.
  await grantOnHub(hub, 'idx-proxy', users.map(hubUser), [
    { apiGroups: ['cluster.core.oam.dev'], resources: ['clustergateways/proxy'], verbs: ['get'] },
  ]);
  await hub.apply(
    `/api/v1/namespaces/${hubNamespace}`,
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: hubNamespace } },
    'e2e',
  );
  await grantInNamespace(
    hub,
    hubNamespace,
    'idx-reader',
    [hubUser('user1-idx')],
    [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list'] }],
  );
  // cluster1: user-34567 may read configmaps in idx-mapped, group idx-ext-team in idx-external; nothing else.
  for (const ns of managedNamespaces) {
    await cluster1.apply(
      `/api/v1/namespaces/${ns}`,
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
      'e2e',
    );
  }
  const read = [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list'] }];
  await grantInNamespace(cluster1, 'idx-mapped', 'idx-reader', [hubUser('user-34567')], read);
  await grantInNamespace(
    cluster1,
    'idx-external',
    'idx-reader',
    [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'idx-ext-team' }],
    read,
  );
  for (const alias of aliases) await applyAlias(alias);
  await waitFor('the gateway to serve the cluster1 aliases', async () => {
    for (const alias of aliases) {
      const res = await viaHub('idx-sudo', `${proxyPrefix}/${alias}/proxy/version`);
      if (res.status !== 200) return false;
    }
    return true;
  });
});

after(async () => {
  fileGateway?.stop();
  await exchanger?.stop();
  for (const name of [globalName, authzName]) await hub?.delete(`${configurations}/${name}`);
  for (const alias of aliases) await hub?.delete(secretPath(alias));
  await revokeOnHub(hub, 'idx-proxy');
  await hub?.delete(`/api/v1/namespaces/${hubNamespace}`);
  for (const ns of managedNamespaces) await cluster1?.delete(`/api/v1/namespaces/${ns}`);
  hub?.close();
  cluster1?.close();
});

describe('the global ClusterGatewayProxyConfiguration, applied while the gateway runs', () => {
  test('the CRD refuses what its schema and CEL rules can see, naming the field', async () => {
    const bad = (rule: Record<string, unknown>) =>
      hub.apply(
        `${configurations}/idx-refused`,
        {
          apiVersion: 'gateway.cluster.core.oam.dev/v1alpha1',
          kind: 'ClusterGatewayProxyConfiguration',
          metadata: { name: 'idx-refused' },
          spec: { clientIdentityExchanger: { rules: [rule] } },
        },
        'e2e',
      );
    await assert.rejects(
      bad({ name: 'm', type: 'StaticMappingIdentityExchanger', source: { user: 'a' } }),
      (err: Error) =>
        /spec\.clientIdentityExchanger\.rules\[0\]\.target.*needs target\.user/.test(err.message),
    );
    await assert.rejects(
      bad({ name: 'e', type: 'ExternalIdentityExchanger', source: { user: 'a' }, url: 'http://plain/' }),
      /rules\[0\]\.url.*must be an https:\/\/ URL/,
    );
    await assert.rejects(
      bad({ name: 'x', type: 'Magic', source: { user: 'a' } }),
      /rules\[0\]\.type.*Unsupported value/,
    );
    await assert.rejects(
      bad({ name: 'x', type: 'PrivilegedIdentityExchanger', source: {} }),
      /rules\[0\]\.source.*1 properties/,
    );
  });

  test('applied live, it is reported valid and in force', async () => {
    const obj = await applyConfiguration(globalConfiguration('user-34567'));
    const valid = obj.status?.conditions?.find((c) => c.type === 'Valid');
    assert.equal(valid?.status, 'True', valid?.message);
    assert.match(valid?.message ?? '', /valid \(3 rules\) and in force/);
    assert.equal(obj.status?.appliedGeneration, obj.metadata.generation);
  });

  test("user-12345 on cluster-34567 is user-34567 there, with exactly that user's permissions", async () => {
    const mark = marker();
    const allowed = await viaHub(
      'user-12345',
      proxied('cluster-34567', '/api/v1/namespaces/idx-mapped/configmaps', mark),
    );
    assert.equal(allowed.status, 200, allowed.body);
    assert.match(allowed.body, /ConfigMapList/);
    const event = await clusterEvent(mark);
    assert.equal(event.user.username, gatewayOnCluster);
    assert.equal(event.impersonatedUser?.username, 'user-34567');

    const refused = await viaHub(
      'user-12345',
      proxied('cluster-34567', '/api/v1/namespaces/kube-system/configmaps', marker()),
    );
    assert.equal(refused.status, 403, refused.body);
    assert.match(refused.body, /User \\"user-34567\\" cannot list resource \\"configmaps\\"/);
  });

  test('without a matching rule the hub identity passes through unchanged', async () => {
    const mark = marker();
    // The mapping rule names cluster-34567 only; on cluster1 itself user-12345 is user-12345.
    const res = await viaHub(
      'user-12345',
      proxied('cluster1', '/api/v1/namespaces/idx-mapped/configmaps', mark),
    );
    assert.equal(res.status, 403, res.body);
    assert.match(res.body, /User \\"user-12345\\" cannot list/);
    assert.equal((await clusterEvent(mark)).impersonatedUser?.username, 'user-12345');
  });

  test("a member of group sudoer gets the cluster credential's permissions, without impersonation", async () => {
    const mark = marker();
    const res = await viaHub(
      'idx-sudo',
      proxied('cluster-34567', '/api/v1/namespaces/kube-system/configmaps', mark),
    );
    assert.equal(res.status, 200, res.body);
    const event = await clusterEvent(mark);
    assert.equal(event.user.username, gatewayOnCluster);
    assert.equal(event.impersonatedUser, undefined);
  });

  test('ext-* gets the identity the external exchanger answers, asked once and then cached', async () => {
    const reviewsBefore = exchanger.reviews.length;
    const mark = marker();
    const res = await viaHub(
      'ext-alice',
      proxied('cluster-34567', '/api/v1/namespaces/idx-external/configmaps', mark),
    );
    assert.equal(res.status, 200, res.body);
    const event = await clusterEvent(mark);
    assert.equal(event.impersonatedUser?.username, 'idx-ext-mapped');
    assert.ok(
      event.impersonatedUser?.groups?.includes('idx-ext-team'),
      JSON.stringify(event.impersonatedUser),
    );
    const review = exchanger.reviews.at(-1);
    assert.equal(review?.spec.user.username, 'ext-alice');
    assert.equal(review?.spec.cluster, 'cluster-34567');
    assert.equal(review?.spec.rule, 'external');
    // That identity's permissions, no more.
    const refused = await viaHub(
      'ext-alice',
      proxied('cluster-34567', '/api/v1/namespaces/idx-mapped/configmaps', marker()),
    );
    assert.equal(refused.status, 403, refused.body);
    assert.match(refused.body, /User \\"idx-ext-mapped\\" cannot list/);
    assert.equal(exchanger.reviews.length, reviewsBefore + 1, 'the second request used the cached answer');
  });

  test('an exchanger error is a 502 and nothing reaches the cluster', async () => {
    const mark = marker();
    const res = await viaHub(
      'ext-broken',
      proxied('cluster-34567', '/api/v1/namespaces/kube-system/configmaps', mark),
    );
    assert.equal(res.status, 502, res.body);
    assert.match(
      res.body,
      /identity exchanger \\"external\\" .* answered HTTP 500; the request was not forwarded/,
    );
    await assertNeverReachedCluster(mark);
  });

  test('the exchanger down is a 503 for an uncached caller, never a fallback to another identity', async () => {
    await exchanger.stop();
    const mark = marker();
    const res = await viaHub(
      'ext-carol',
      proxied('cluster-34567', '/api/v1/namespaces/kube-system/configmaps', mark),
    );
    assert.equal(res.status, 503, res.body);
    assert.match(res.body, /"reason":"ServiceUnavailable"/);
    assert.match(
      res.body,
      /identity exchanger \\"external\\" \(127\.0\.0\.1:\d+\) is unavailable: .*ECONNREFUSED/,
    );
    await assertNeverReachedCluster(mark);
  });

  test('an edit takes effect live; an invalid edit is reported in status and the previous generation stays', async () => {
    const edited = await applyConfiguration(globalConfiguration('idx-other-user'));
    assert.equal(edited.status?.appliedGeneration, edited.metadata.generation);
    const mark = marker();
    await viaHub('user-12345', proxied('cluster-34567', '/api/v1/namespaces/idx-mapped/configmaps', mark));
    assert.equal((await clusterEvent(mark)).impersonatedUser?.username, 'idx-other-user');

    // A pattern the CRD schema cannot check; the gateway refuses the whole generation.
    const invalid = await applyConfiguration({
      ...globalConfiguration('idx-should-not-apply', 'ext-('),
    });
    const valid = invalid.status?.conditions?.find((c) => c.type === 'Valid');
    assert.equal(valid?.status, 'False');
    assert.match(
      valid?.message ?? '',
      /spec\.clientIdentityExchanger\.rules\[2\]\.source\.userPattern: "ext-\(": not a valid regular expression/,
    );
    assert.match(valid?.message ?? '', new RegExp(`generation ${edited.metadata.generation} stays in force`));
    assert.equal(invalid.status?.appliedGeneration, edited.metadata.generation);
    const later = marker();
    await viaHub('user-12345', proxied('cluster-34567', '/api/v1/namespaces/idx-mapped/configmaps', later));
    assert.equal(
      (await clusterEvent(later)).impersonatedUser?.username,
      'idx-other-user',
      'the previous generation',
    );
  });
});

describe('per-cluster configurations', () => {
  test("the original's inline annotation, unchanged, and a cluster's rules before the global ones", async () => {
    await applyAlias('idx-annotated', {
      'cluster.core.oam.dev/cluster-gateway-proxy-configuration': `apiVersion: cluster.core.oam.dev/v1alpha1
kind: ClusterGatewayProxyConfiguration
spec:
  clientIdentityExchanger:
    rules:
      - name: local-mapping
        source:
          user: ext-alice
        target:
          user: user-34567
        type: StaticMappingIdentityExchanger
`,
    });
    const mark = marker();
    const res = await waitFor('the annotation to take effect', async () => {
      const r = await viaHub(
        'ext-alice',
        proxied('idx-annotated', '/api/v1/namespaces/idx-mapped/configmaps', mark),
      );
      return r.status === 200 ? r : undefined;
    });
    assert.match(res.body, /ConfigMapList/);
    // The global rule would have asked the (stopped) exchanger: the cluster's rule came first.
    assert.equal((await clusterEvent(mark)).impersonatedUser?.username, 'user-34567');
  });

  test('local authorization from a per-cluster object: user1 reaches namespace1, user2 is refused by the gateway', async () => {
    await applyConfiguration({
      apiVersion: 'gateway.cluster.core.oam.dev/v1alpha1',
      kind: 'ClusterGatewayProxyConfiguration',
      metadata: { name: authzName },
      spec: { authorizeProxySubpath: true },
    });
    await applyAlias('idx-authz', { 'gateway.cluster.core.oam.dev/proxy-configuration': authzName });
    const namespaced = `/api/v1/namespaces/${hubNamespace}/configmaps`;
    await waitFor('the reference annotation to take effect', async () => {
      const r = await viaHub('user2-idx', proxied('idx-authz', namespaced, marker(), false));
      return r.status === 403;
    });
    const allowedMark = marker();
    const allowed = await viaHub(
      'user1-idx',
      proxied('idx-authz', `/api/v1/namespaces/${hubNamespace}/configmaps`, allowedMark, false),
    );
    assert.equal(allowed.status, 200, allowed.body);
    assert.equal((await clusterEvent(allowedMark)).user.username, gatewayOnCluster);

    const refusedMark = marker();
    const refused = await viaHub(
      'user2-idx',
      proxied('idx-authz', `/api/v1/namespaces/${hubNamespace}/configmaps`, refusedMark, false),
    );
    assert.equal(refused.status, 403, refused.body);
    assert.match(
      refused.body,
      new RegExp(
        `User \\\\"user2-idx\\\\" cannot list resource \\\\"configmaps\\\\" in API group \\\\"\\\\" in the namespace \\\\"${hubNamespace}\\\\"`,
      ),
    );
    await assertNeverReachedCluster(refusedMark);
    // The same user on a cluster without the setting is not checked on the hub.
    const elsewhere = await viaHub(
      'user2-idx',
      proxied('cluster-34567', `/api/v1/namespaces/${hubNamespace}/configmaps`, marker(), false),
    );
    assert.equal(elsewhere.status, 200, elsewhere.body);
  });
});

describe("the original's --cluster-gateway-proxy-config file", () => {
  // examples/client-identity-exchanger/config.yaml of oam-dev/cluster-gateway, unchanged.
  const original = `apiVersion: cluster.core.oam.dev/v1alpha1
kind: ClusterGatewayProxyConfiguration
spec:
  clientIdentityExchanger:
    rules:
      - name: super-user
        source:
          group: sudoer
        type: PrivilegedIdentityExchanger
      - name: mapping
        source:
          user: user-12345
          cluster: cluster-34567
        target:
          user: user-34567
        type: StaticMappingIdentityExchanger`;

  test('is accepted unchanged and applied with the ClientIdentityPenetration gate', async () => {
    const file = path.join(environmentState().stateDir, 'idx-proxy-config.yaml');
    writeFileSync(file, original);
    fileGateway = await startSecondGateway('gateway-proxy-config-file', [
      `--cluster-gateway-proxy-config=${file}`,
      // The global object of the tests above must not replace the file here.
      '--proxy-configuration-name=',
      '--feature-gates=ClientIdentityPenetration=true',
    ]);
    const mark = marker();
    const res = await gatewayRequest(
      'GET',
      `${proxyPrefix}/cluster-34567/proxy/api/v1/namespaces/idx-mapped/configmaps?${mark}=1`,
      { frontProxy: { user: 'user-12345', groups: ['system:authenticated'] } },
      fileGateway.url,
    );
    assert.equal(res.status, 200, res.body);
    assert.equal((await clusterEvent(mark)).impersonatedUser?.username, 'user-34567');
    const sudo = marker();
    const privileged = await gatewayRequest(
      'GET',
      `${proxyPrefix}/cluster-34567/proxy/api/v1/namespaces/kube-system/configmaps?${sudo}=1`,
      { frontProxy: { user: 'idx-sudo', groups: ['sudoer', 'system:authenticated'] } },
      fileGateway.url,
    );
    assert.equal(privileged.status, 200, privileged.body);
    assert.equal((await clusterEvent(sudo)).impersonatedUser, undefined);
  });

  test('an invalid file stops the gateway with the field at fault in its log', async () => {
    const file = path.join(environmentState().stateDir, 'idx-proxy-config-invalid.yaml');
    writeFileSync(file, original.replace('group: sudoer', 'groupPattern: "sudo("'));
    const logName = 'gateway-proxy-config-invalid';
    await assert.rejects(startSecondGateway(logName, [`--cluster-gateway-proxy-config=${file}`]), /exited/);
    const log = readFileSync(path.join(environmentState().stateDir, 'logs', `${logName}.log`), 'utf8');
    assert.match(log, /cannot load the proxy configuration/);
    assert.match(log, /spec\.clientIdentityExchanger\.rules\[0\]\.source\.groupPattern/);
  });
});

describe('logs', () => {
  const gatewayLog = () => readFileSync(gatewayLogPath()).subarray(logStart).toString('utf8');

  test('one access line per proxied request: caller, identity on the cluster, rule, cluster, verb, path, code', () => {
    const lines = gatewayLog()
      .split('\n')
      .filter((line) => line.includes('"msg":"proxied request"'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const mapped = lines.find(
      (l) => l.user === 'user-12345' && l.cluster === 'cluster-34567' && l.code === 200,
    );
    assert.ok(mapped, 'a line for the mapped request');
    assert.equal(mapped.as, 'static-mapping');
    assert.equal(mapped.rule, 'mapping');
    assert.match(String(mapped.ruleOrigin), /ClusterGatewayProxyConfiguration "cluster-gateway" generation/);
    assert.equal(mapped.verb, 'list');
    assert.equal(mapped.path, '/api/v1/namespaces/idx-mapped/configmaps');
    const privileged = lines.find((l) => l.user === 'idx-sudo' && l.as === 'privileged');
    assert.equal(privileged?.clusterUser, undefined);
    const down = lines.find((l) => l.user === 'ext-carol');
    assert.equal(down?.code, 503);
    const refused = lines.find((l) => l.user === 'user2-idx' && l.cluster === 'idx-authz' && l.code === 403);
    assert.equal(refused?.as, 'refused');
    assert.equal(refused?.verb, 'list');
  });

  test('the invalid edit is in the log with its field', () => {
    const line = gatewayLog()
      .split('\n')
      .find((l) => l.includes('invalid proxy configuration; its previous generation stays in force'));
    assert.ok(line, 'an error line for the invalid generation');
    assert.match(line, /spec\.clientIdentityExchanger\.rules\[2\]\.source\.userPattern/);
  });

  test('no token or key in any gateway log of this run', async () => {
    const secrets = [
      (await gatewayToken(hub, 'cluster1')).trim(),
      pemBody(exchanger.servingKey),
      ...Object.values(certs).map((c) => pemBody(c.key)),
    ];
    const logs = [gatewayLog()];
    if (fileGateway) logs.push(readFileSync(fileGateway.logFile, 'utf8'));
    for (const log of logs) {
      assert.ok(log.length > 0);
      for (const secret of secrets) {
        assert.ok(secret.length >= 20);
        assert.ok(!log.includes(secret), 'a credential in the log');
        assert.ok(!log.includes(Buffer.from(secret).toString('base64')), 'a base64 credential in the log');
      }
      assert.doesNotMatch(log, /BEGIN [A-Z ]*PRIVATE KEY|Bearer [A-Za-z0-9._-]{20,}/);
    }
  });
});

function gatewayLogPath(): string {
  return path.join(environmentState().stateDir, 'logs', 'hub-cluster-gateway.log');
}

/** The base64 body of a PEM block, long enough that a match is never a coincidence. */
function pemBody(pem: string): string {
  return pem
    .split('\n')
    .filter((line) => line && !line.startsWith('-----'))
    .join('')
    .slice(0, 64);
}

/**
 * Parser differentials, attacked against the real hub and cluster: the
 * gateway must authorize (--authorize-proxy-subpath) exactly the request the
 * managed kube-apiserver executes, for queries (Go's url.ParseQuery drops
 * what URLSearchParams keeps) and paths (encodings, dot segments, empty
 * segments, ";"), and must not route `clustergateways/<name>//proxy`.
 *
 * The attacker is a hub ServiceAccount with a bearer token, calling the
 * gateway's port directly (any pod on the hub network can), allowed only to
 * proxy and to get the Secret "allowed" in one namespace.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { waitFor } from '../hack/localenv/wait.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import { requestServiceAccountToken } from '../shared/kube/service-account-token.ts';
import { auditEvents } from './support/audit.ts';
import { environmentState, hubClient, managedClient } from './support/environment.ts';
import { rawRequest } from './support/raw-request.ts';
import { grantOnHub, revokeOnHub, serviceAccount } from './support/rbac.ts';
import { type SecondGateway, startSecondGateway } from './support/second-gateway.ts';
import { hubUserCertificate, proxyPrefix } from './support/users.ts';

const ns = 'sec-parsers';
const sa = 'parser-attacker';
const secrets = `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/${ns}/secrets`;
const otherData = Buffer.from('other-secret-data').toString('base64');
const allowedData = Buffer.from('allowed-data').toString('base64');

let hub: KubeClient;
let cluster1: KubeClient;
let gateway: SecondGateway;
let token: string;

before(async () => {
  hub = await hubClient();
  cluster1 = await managedClient('cluster1');
  for (const client of [hub, cluster1]) {
    await client.apply(
      `/api/v1/namespaces/${ns}`,
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
      'e2e',
    );
  }
  for (const [name, value] of [
    ['allowed', 'allowed-data'],
    ['other', 'other-secret-data'],
  ] as const) {
    await cluster1.apply(
      `/api/v1/namespaces/${ns}/secrets/${name}`,
      { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: ns }, stringData: { v: value } },
      'e2e',
    );
  }
  await hub.apply(
    `/api/v1/namespaces/${ns}/serviceaccounts/${sa}`,
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: sa, namespace: ns } },
    'e2e',
  );
  const subjects = [serviceAccount(ns, sa)];
  await grantOnHub(hub, `${ns}-proxy`, subjects, [
    { apiGroups: ['cluster.core.oam.dev'], resources: ['clustergateways/proxy'], verbs: ['get'] },
  ]);
  // On the hub, the proxied request is authorized as "secrets/allowed in sec-parsers" and nothing more.
  await hub.apply(
    `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles/allowed-secret`,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'allowed-secret', namespace: ns },
      rules: [
        {
          apiGroups: [''],
          resources: ['secrets'],
          resourceNames: ['allowed'],
          verbs: ['get', 'list', 'watch'],
        },
      ],
    },
    'e2e',
  );
  await hub.apply(
    `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings/allowed-secret`,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'allowed-secret', namespace: ns },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'allowed-secret' },
      subjects,
    },
    'e2e',
  );
  token = await requestServiceAccountToken(hub, ns, sa, 3600);
  gateway = await startSecondGateway('gateway-security-parsers', ['--authorize-proxy-subpath']);
  await waitFor('the attacker to be allowed the Secret "allowed"', async () => {
    const res = await attack(`${secrets}/allowed`);
    return res.status === 200;
  });
});

after(async () => {
  gateway?.stop();
  await revokeOnHub(hub, `${ns}-proxy`);
  await hub.delete(`/api/v1/namespaces/${ns}`);
  await cluster1.delete(`/api/v1/namespaces/${ns}`);
  hub?.close();
  cluster1?.close();
});

function attack(target: string, method = 'GET') {
  return rawRequest(gateway.url, method, target, { headers: ['Authorization', `Bearer ${token}`] });
}

/** Names of the Secrets in a SecretList body, or of the one Secret. */
function secretNames(body: string): string[] {
  const parsed = JSON.parse(body) as {
    kind: string;
    items?: { metadata: { name: string } }[];
    metadata: { name: string };
  };
  return parsed.kind === 'SecretList'
    ? (parsed.items ?? []).map((s) => s.metadata.name)
    : [parsed.metadata.name];
}

describe('queries: what is authorized is what the cluster executes (issue item 2)', () => {
  test('the ";" and malformed-escape exploits are refused and leak no other Secret', async () => {
    for (const query of [
      // The exploit: URLSearchParams read "the secret allowed", Go no selector at all.
      'fieldSelector=metadata.name=allowed,x=;',
      'fieldSelector=metadata.name%3Dallowed;',
      'fieldSelector=metadata.name=allowed%zz',
      'fieldSelector=metadata.name=allowed%',
      'x=;&fieldSelector=metadata.name=allowed%2',
      // No trimming in fields.ParseSelector: " metadata.name" is another field.
      'fieldSelector=%20metadata.name=allowed',
      // A list option that does not decode: Kubernetes names nothing.
      'fieldSelector=metadata.name=allowed&limit=1x',
    ]) {
      const res = await attack(`${secrets}?${query}`);
      assert.ok(!res.body.includes(otherData), `${query}: the other Secret leaked`);
      assert.ok(
        res.status === 403 || res.status === 400,
        `${query}: ${res.status} ${res.body.slice(0, 200)}`,
      );
      if (res.status === 403) assert.match(res.body, /cannot list resource \\"secrets\\"/, query);
    }
  });

  test('legitimate selectors still work, and only the segments Go reads are forwarded', async () => {
    for (const query of [
      'fieldSelector=metadata.name%3Dallowed',
      'fieldSelector=metadata.name=allowed&fieldSelector=;',
      // A dropped segment does not count as a first value, for Go and the gateway alike.
      'fieldSelector=%zz&fieldSelector=metadata.name=allowed',
    ]) {
      const selected = await attack(`${secrets}?${query}`);
      assert.equal(selected.status, 200, `${query}: ${selected.body}`);
      assert.deepEqual(secretNames(selected.body), ['allowed']);
      assert.ok(selected.body.includes(allowedData));
    }

    const marker = `marker${Date.now()}`;
    const withJunk = await attack(
      `${secrets}?fieldSelector=metadata.name==allowed&junk=a;b&${marker}=1&bad=%zz`,
    );
    assert.equal(withJunk.status, 200, withJunk.body);
    assert.deepEqual(secretNames(withJunk.body), ['allowed']);
    // What cluster1 received (its audit log): the query rebuilt from exactly what was authorized.
    const received = await waitFor('cluster1 to log the request', () =>
      auditEvents('cluster1').find((e) => e.requestURI.includes(marker)),
    );
    assert.equal(
      received.requestURI,
      `/api/v1/namespaces/${ns}/secrets?fieldSelector=metadata.name==allowed&${marker}=1`,
    );
    assert.deepEqual(
      { verb: received.verb, name: received.objectRef?.name, resource: received.objectRef?.resource },
      { verb: 'list', name: 'allowed', resource: 'secrets' },
    );
  });
});

describe('paths: the gateway authorizes the path the cluster routes', () => {
  test('encodings, dot segments, empty segments and ";" never reach another Secret', async () => {
    for (const path of [
      `${secrets}/other`,
      `${secrets}/%6Fther`,
      `${secrets}/allowed/../other`,
      `${secrets}/allowed/%2E%2E/other`,
      `${secrets}/allowed%2F..%2Fother`,
      `${secrets}/allowed%2f%2e%2e%2fother`,
      `${secrets}//other`,
      `${secrets}/allowed;/../other`,
      `${secrets}/./other`,
      `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/${ns}/secrets/allowed/../../${ns}/secrets/other`,
      `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/%73ec-parsers/secrets/other`,
      `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/${ns}/%73ecrets/other`,
      `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/${ns}/secrets/%FF/../other`,
    ]) {
      const res = await attack(path);
      assert.ok(!res.body.includes(otherData), `${path}: the other Secret leaked`);
      assert.ok([400, 403, 404].includes(res.status), `${path}: ${res.status} ${res.body.slice(0, 200)}`);
    }
    // cluster1 never served "other" to anyone but the setup.
    const served = auditEvents('cluster1').filter(
      (e) =>
        e.objectRef?.namespace === ns &&
        e.objectRef.name === 'other' &&
        ['get', 'list', 'watch'].includes(e.verb),
    );
    assert.deepEqual(served, []);
  });

  test('what a Go server decodes to "allowed" is allowed, and gets "allowed"', async () => {
    for (const path of [
      `${secrets}/allowed`,
      `${secrets}/%61llowed`,
      `${secrets}/other/../allowed`,
      `${secrets}//allowed`,
      `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/%73ec-parsers/secrets/allowed`,
    ]) {
      const res = await attack(path);
      assert.equal(res.status, 200, `${path}: ${res.body.slice(0, 200)}`);
      assert.deepEqual(secretNames(res.body), ['allowed'], path);
    }
    // A ";" is part of the name for Go: another object, refused.
    assert.equal((await attack(`${secrets}/allowed;x`)).status, 403);
  });
});

describe('clustergateways/<name>//proxy (issue item 8)', () => {
  test('is a 404, directly and through the aggregator; the real routes still work', async () => {
    const env = environmentState();
    const gatewayUrl = env.gateway?.url ?? '';
    const admin = await hubUserCertificate('parser-admin', ['system:masters']);
    const routes: [
      string,
      { frontProxy?: boolean; client?: { cert: string; key: string }; headers?: string[] },
    ][] = [
      [
        gatewayUrl,
        { frontProxy: true, headers: ['X-Remote-User', 'admin', 'X-Remote-Group', 'system:masters'] },
      ],
      [env.hub.server, { client: admin }],
    ];
    for (const [base, auth] of routes) {
      for (const path of [
        `${proxyPrefix}/cluster2//proxy/api/v1/namespaces/default`,
        `${proxyPrefix}/cluster2//proxy`,
        `${proxyPrefix}/cluster2//health`,
      ]) {
        const res = await rawRequest(base, 'GET', path, auth);
        assert.equal(res.status, 404, `${base}${path}: ${res.status} ${res.body.slice(0, 200)}`);
        assert.doesNotMatch(res.body, /"kind":"ClusterGateway"/);
      }
      const object = await rawRequest(base, 'GET', `${proxyPrefix}/cluster2`, auth);
      assert.equal(object.status, 200, object.body);
      assert.match(object.body, /"kind":"ClusterGateway"/);
      const proxied = await rawRequest(
        base,
        'GET',
        `${proxyPrefix}/cluster2/proxy/api/v1/namespaces/default`,
        auth,
      );
      assert.equal(proxied.status, 200, proxied.body);
      assert.match(proxied.body, /"kind":"Namespace"/);
    }
  });
});

describe('a proxied path the gateway cannot read for its metrics', () => {
  test('is forwarded (default flags) without taking the gateway down', async () => {
    const url = environmentState().gateway?.url ?? '';
    const admin = {
      frontProxy: true,
      headers: ['X-Remote-User', 'admin', 'X-Remote-Group', 'system:masters'],
    };
    // RequestInfo cannot read /api/v1/watch (no resource after the verb); the
    // metrics hook used to throw in the response's 'close' listener.
    for (const path of ['/api/v1/watch', '/apis/apps/v1/watch', '/api/v1/watch/']) {
      const res = await rawRequest(url, 'GET', `${proxyPrefix}/cluster1/proxy${path}`, admin).catch(
        (err: Error) => err,
      );
      assert.ok(!(res instanceof Error), `${path}: ${String(res)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal((await rawRequest(url, 'GET', '/readyz')).status, 200);
    const ok = await rawRequest(url, 'GET', `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/default`, admin);
    assert.equal(ok.status, 200, ok.body);
  });
});

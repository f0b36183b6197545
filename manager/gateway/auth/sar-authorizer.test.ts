import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import type { UserInfo } from '../../../shared/identity/user.ts';
import { StatusError } from '../../../shared/kube/status.ts';
import type { AuthorizationAttributes } from './contracts.ts';
import { SubjectAccessReviewAuthorizer, subjectAccessReviewPath } from './sar-authorizer.ts';
import { type FakeKube, type ReviewReply, startFakeKube } from './testing.ts';

const alice: UserInfo = {
  name: 'alice',
  uid: 'u-1',
  groups: ['dev', 'system:authenticated'],
  extra: { scopes: ['b', 'a'], 'authentication.kubernetes.io/credential-id': ['X509SHA256=ab'] },
};
const proxyGet: AuthorizationAttributes = {
  kind: 'resource',
  verb: 'get',
  group: 'cluster.core.oam.dev',
  version: 'v1alpha1',
  resource: 'clustergateways',
  subresource: 'proxy',
  name: 'cluster-1',
};

describe('SubjectAccessReview authorizer', () => {
  let kube: FakeKube;
  let reply: (spec: Record<string, unknown>) => ReviewReply | Promise<ReviewReply>;
  let clock = 0;

  // Allows get on clustergateways/proxy of cluster-1 only.
  function defaultReply(spec: Record<string, unknown>): ReviewReply {
    const attrs = spec['resourceAttributes'] as Record<string, string> | undefined;
    const allowed = attrs?.['name'] === 'cluster-1' && attrs['verb'] === 'get';
    return {
      body: {
        kind: 'SubjectAccessReview',
        status: allowed
          ? { allowed: true, reason: 'RBAC: allowed by ClusterRoleBinding "proxy-users"' }
          : { allowed: false, reason: 'no RBAC policy matched' },
      },
    };
  }

  before(async () => {
    kube = await startFakeKube((_path, body) => reply(body['spec'] as Record<string, unknown>));
  });
  after(() => kube.close());
  beforeEach(() => {
    kube.calls.clear();
    kube.bodies.length = 0;
    reply = defaultReply;
    clock = 5_000_000;
  });

  const authorizer = (
    options: { allowTtlMs?: number; denyTtlMs?: number; alwaysAllowGroups?: string[] } = {},
  ) => new SubjectAccessReviewAuthorizer({ client: kube.client, now: () => clock, ...options });
  const reviews = () => kube.calls.get(subjectAccessReviewPath) ?? 0;

  test('posts the full identity and resource attributes and returns the reason', async () => {
    const decision = await authorizer().authorize(alice, proxyGet);
    assert.deepEqual(decision, {
      allowed: true,
      reason: 'RBAC: allowed by ClusterRoleBinding "proxy-users"',
    });
    assert.deepEqual(kube.bodies[0]?.body, {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: 'alice',
        groups: ['dev', 'system:authenticated'],
        uid: 'u-1',
        extra: { 'authentication.kubernetes.io/credential-id': ['X509SHA256=ab'], scopes: ['b', 'a'] },
        resourceAttributes: {
          verb: 'get',
          group: 'cluster.core.oam.dev',
          version: 'v1alpha1',
          resource: 'clustergateways',
          subresource: 'proxy',
          name: 'cluster-1',
        },
      },
    });
  });

  test('non-resource attributes are reviewed as such', async () => {
    const decision = await authorizer().authorize(alice, {
      kind: 'nonResource',
      verb: 'get',
      path: '/openapi/v2',
    });
    assert.equal(decision.allowed, false);
    assert.equal(decision.reason, 'no RBAC policy matched');
    const spec = kube.bodies[0]?.body['spec'] as Record<string, unknown>;
    assert.deepEqual(spec['nonResourceAttributes'], { path: '/openapi/v2', verb: 'get' });
    assert.equal(spec['resourceAttributes'], undefined);
  });

  test('allow decisions are cached for 10 s, deny decisions for 5 s', async () => {
    const auth = authorizer();
    const denied: AuthorizationAttributes = { ...proxyGet, name: 'cluster-2' };
    await auth.authorize(alice, proxyGet);
    await auth.authorize(alice, denied);
    await auth.authorize(alice, proxyGet);
    await auth.authorize(alice, denied);
    assert.equal(reviews(), 2);
    clock += 5_000;
    await auth.authorize(alice, proxyGet);
    await auth.authorize(alice, denied);
    assert.equal(reviews(), 3, 'only the deny expired');
    clock += 5_000;
    await auth.authorize(alice, proxyGet);
    assert.equal(reviews(), 4);
  });

  test('TTLs are configurable; zero disables caching', async () => {
    const auth = authorizer({ allowTtlMs: 0, denyTtlMs: 60_000 });
    await auth.authorize(alice, proxyGet);
    await auth.authorize(alice, proxyGet);
    assert.equal(reviews(), 2);
  });

  test('the cache key covers every attribute and identity field', async () => {
    const auth = authorizer();
    await auth.authorize(alice, proxyGet);
    await auth.authorize({ ...alice, groups: ['dev'] }, proxyGet);
    await auth.authorize({ ...alice, extra: {} }, proxyGet);
    await auth.authorize({ ...alice, uid: 'u-2' }, proxyGet);
    await auth.authorize(alice, { ...proxyGet, verb: 'create' });
    await auth.authorize(alice, { ...proxyGet, namespace: 'ns' });
    await auth.authorize(alice, { ...proxyGet, subresource: 'health' });
    assert.equal(reviews(), 7);
    // Key order of extra does not matter.
    const [first, second] = Object.entries(alice.extra);
    await auth.authorize({ ...alice, extra: Object.fromEntries([second!, first!]) }, proxyGet);
    assert.equal(reviews(), 7);
  });

  test('concurrent identical reviews are coalesced into one call', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    reply = async (spec) => {
      await gate;
      return defaultReply(spec);
    };
    const auth = authorizer();
    const pending = Array.from({ length: 10 }, () => auth.authorize(alice, proxyGet));
    const other = auth.authorize(alice, { ...proxyGet, name: 'cluster-2' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    release();
    const decisions = await Promise.all(pending);
    assert.ok(decisions.every((decision) => decision.allowed));
    assert.equal((await other).allowed, false);
    assert.equal(reviews(), 2);
  });

  test('a failing review is an error, never a deny, and is not cached', async () => {
    const auth = authorizer();
    reply = () => ({ code: 503, body: { kind: 'Status', message: 'apiserver is shutting down', code: 503 } });
    await assert.rejects(auth.authorize(alice, proxyGet), (err) => {
      assert.ok(err instanceof StatusError);
      assert.equal(err.code, 503);
      assert.equal(err.reason, 'ServiceUnavailable');
      assert.match(err.message, /subject access review failed: .*shutting down/);
      return true;
    });
    reply = () => ({
      code: 403,
      body: { kind: 'Status', message: 'cannot create subjectaccessreviews', reason: 'Forbidden', code: 403 },
    });
    await assert.rejects(auth.authorize(alice, proxyGet), { code: 500, reason: 'InternalError' });
    reply = defaultReply;
    assert.equal((await auth.authorize(alice, proxyGet)).allowed, true);
    assert.equal(reviews(), 3);
  });

  test('an unreachable hub is a 503', async () => {
    const { client } = await startFakeKube(() => ({ body: {} })).then(async (dead) => {
      await dead.close();
      return dead;
    });
    const auth = new SubjectAccessReviewAuthorizer({ client, timeoutMs: 2_000 });
    await assert.rejects(auth.authorize(alice, proxyGet), { code: 503 });
  });

  test('"denied" and evaluation errors refuse, with the reasons combined', async () => {
    reply = () => ({
      body: {
        status: {
          allowed: false,
          denied: true,
          reason: 'denied by policy',
          evaluationError: 'webhook timeout',
        },
      },
    });
    assert.deepEqual(await authorizer().authorize(alice, proxyGet), {
      allowed: false,
      reason: 'denied by policy; webhook timeout',
    });
  });

  test('system:masters and health paths skip the review by default', async () => {
    const auth = authorizer();
    const admin: UserInfo = { name: 'kubernetes-admin', groups: ['system:masters'], extra: {} };
    assert.equal((await auth.authorize(admin, proxyGet)).allowed, true);
    assert.equal(
      (await auth.authorize(alice, { kind: 'nonResource', verb: 'get', path: '/healthz' })).allowed,
      true,
    );
    assert.equal(reviews(), 0);
    const strict = authorizer({ alwaysAllowGroups: [] });
    await strict.authorize(admin, { ...proxyGet, name: 'cluster-9' });
    assert.equal(reviews(), 1);
    // A managed cluster's /healthz, proxied, is the hub's to decide (any verb reaches it otherwise).
    await auth.authorize(alice, { kind: 'nonResource', verb: 'post', path: '/healthz' }, { proxied: true });
    assert.equal(reviews(), 2);
  });
});

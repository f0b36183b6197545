import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { StatusError } from '../../../shared/kube/status.ts';
import { type FakeKube, type ReviewReply, request, startAuthServer, startFakeKube } from './testing.ts';
import { bearerToken, TokenReviewAuthenticator, tokenReviewPath } from './token-review.ts';

describe('TokenReview authentication', () => {
  let kube: FakeKube;
  let reply: (spec: Record<string, unknown>) => ReviewReply | Promise<ReviewReply>;
  let clock = 0;

  const users: Record<string, unknown> = {
    'good-token': {
      username: 'system:serviceaccount:vela-system:vela-core',
      uid: 'sa-uid',
      groups: ['system:serviceaccounts', 'system:authenticated'],
      extra: { 'authentication.kubernetes.io/pod-name': ['vela-core-0'] },
    },
    'other-token': { username: 'bob', groups: null },
  };
  function defaultReply(spec: Record<string, unknown>): ReviewReply {
    const user = users[String(spec['token'])];
    const status = user ? { authenticated: true, user } : { authenticated: false, error: 'token not found' };
    return { body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', status } };
  }

  before(async () => {
    kube = await startFakeKube((_path, body) => reply(body['spec'] as Record<string, unknown>));
  });
  after(() => kube.close());
  beforeEach(() => {
    kube.calls.clear();
    kube.bodies.length = 0;
    reply = defaultReply;
    clock = 1_000_000;
  });

  function authenticator(options: { audiences?: string[] } = {}) {
    return new TokenReviewAuthenticator({ client: kube.client, now: () => clock, ...options });
  }
  const reviews = () => kube.calls.get(tokenReviewPath) ?? 0;

  test('a valid token yields the reviewed user; the review carries the token', async () => {
    const user = await authenticator().reviewToken('good-token');
    assert.deepEqual(user, {
      name: 'system:serviceaccount:vela-system:vela-core',
      uid: 'sa-uid',
      groups: ['system:serviceaccounts', 'system:authenticated'],
      extra: { 'authentication.kubernetes.io/pod-name': ['vela-core-0'] },
    });
    assert.deepEqual(kube.bodies[0]?.body, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token: 'good-token' },
    });
    assert.deepEqual(await authenticator().reviewToken('other-token'), {
      name: 'bob',
      groups: [],
      extra: {},
    });
  });

  test('acceptances are cached for 10 s', async () => {
    const auth = authenticator();
    await auth.reviewToken('good-token');
    await auth.reviewToken('good-token');
    assert.equal(reviews(), 1);
    clock += 9_999;
    await auth.reviewToken('good-token');
    assert.equal(reviews(), 1);
    clock += 1;
    await auth.reviewToken('good-token');
    assert.equal(reviews(), 2);
  });

  test('an invalid token is a 401 with a message, cached for 2 s only', async () => {
    const auth = authenticator();
    const invalid = (err: unknown) =>
      err instanceof StatusError &&
      err.code === 401 &&
      /invalid bearer token: token not found/.test(err.message);
    await assert.rejects(auth.reviewToken('bad-token'), invalid);
    await assert.rejects(auth.reviewToken('bad-token'), invalid);
    assert.equal(reviews(), 1);
    clock += 2_000;
    await assert.rejects(auth.reviewToken('bad-token'), invalid);
    assert.equal(reviews(), 2);
  });

  test('concurrent reviews of one token are coalesced into one call', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    reply = async (spec) => {
      await gate;
      return defaultReply(spec);
    };
    const auth = authenticator();
    const pending = Array.from({ length: 8 }, () => auth.reviewToken('good-token'));
    await new Promise((resolve) => setTimeout(resolve, 50));
    release();
    const results = await Promise.all(pending);
    assert.equal(reviews(), 1);
    assert.ok(results.every((user) => user.name === 'system:serviceaccount:vela-system:vela-core'));
  });

  test('a failing TokenReview call is a 503 (500 when refused), and is not cached', async () => {
    reply = () => ({ code: 500, body: { kind: 'Status', message: 'etcd is down', code: 500 } });
    const auth = authenticator();
    await assert.rejects(
      auth.reviewToken('good-token'),
      (err) =>
        err instanceof StatusError &&
        err.code === 503 &&
        /token review failed: .*etcd is down/.test(err.message),
    );
    reply = () => ({ code: 403, body: { kind: 'Status', message: 'cannot create tokenreviews', code: 403 } });
    await assert.rejects(
      auth.reviewToken('good-token'),
      (err) => err instanceof StatusError && err.code === 500,
    );
    reply = defaultReply;
    assert.equal((await auth.reviewToken('good-token')).uid, 'sa-uid');
    assert.equal(reviews(), 3);
  });

  test('configured audiences are requested and must be confirmed', async () => {
    reply = (spec) => {
      const answer = defaultReply(spec);
      const status = (answer.body as { status: Record<string, unknown> }).status;
      status['audiences'] = spec['token'] === 'good-token' ? ['cluster-gateway'] : ['elsewhere'];
      return answer;
    };
    const auth = authenticator({ audiences: ['cluster-gateway'] });
    assert.equal((await auth.reviewToken('good-token')).uid, 'sa-uid');
    const spec = kube.bodies[0]!.body['spec'] as Record<string, unknown>;
    assert.deepEqual(spec['audiences'], ['cluster-gateway']);
    await assert.rejects(auth.reviewToken('other-token'), /token audiences do not include cluster-gateway/);
  });

  test('over HTTPS: bearer header authenticates and is removed; other schemes are ignored', async () => {
    const server = await startAuthServer(authenticator(), []);
    try {
      const res = await request(server, { headers: { Authorization: 'Bearer good-token', 'X-Keep': '1' } });
      assert.equal(res.status, 200);
      assert.equal(
        (res.body['user'] as { name: string }).name,
        'system:serviceaccount:vela-system:vela-core',
      );
      const headers = res.body['headers'] as Record<string, string>;
      assert.equal(headers['authorization'], undefined);
      assert.equal(headers['x-keep'], '1');

      const basic = await request(server, { headers: { Authorization: 'Basic dXNlcjpwYXNz' } });
      assert.equal(basic.body['user'], null);
      const invalid = await request(server, { headers: { Authorization: 'Bearer nope' } });
      assert.equal(invalid.status, 401);
      assert.match(String(invalid.body['message']), /invalid bearer token/);
    } finally {
      await server.close();
    }
  });

  test('bearerToken parses like Kubernetes', () => {
    assert.equal(bearerToken('Bearer abc'), 'abc');
    assert.equal(bearerToken('  bearer abc  '), 'abc');
    assert.equal(bearerToken('Bearer  abc'), undefined);
    assert.equal(bearerToken('Bearer'), undefined);
    assert.equal(bearerToken('Basic abc'), undefined);
    assert.equal(bearerToken(undefined), undefined);
  });
});

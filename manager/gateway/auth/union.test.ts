import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { after, before, describe, test } from 'node:test';
import type { UserInfo } from '../../../shared/identity/user.ts';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import { type CertificateAuthority, createCertificateAuthority, type KeyPair } from '../../../shared/pki.ts';
import { RejectedCredentialsError, unauthorized } from './auth-errors.ts';
import { ClientCertAuthenticator } from './client-cert.ts';
import type { Authenticator } from './contracts.ts';
import { RequestHeaderAuthenticator } from './request-header.ts';
import { type AuthServer, type FakeKube, request, startAuthServer, startFakeKube } from './testing.ts';
import { TokenReviewAuthenticator } from './token-review.ts';
import { UnionAuthenticator } from './union.ts';

const fakeRequest = (url = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways') =>
  ({ url }) as IncomingMessage;
const fixed = (result: UserInfo | undefined | Error): Authenticator => ({
  async authenticate() {
    if (result instanceof Error) throw result;
    return result;
  },
});

describe('union of authenticators', () => {
  test('no credentials is a 401 "Unauthorized" Status', async () => {
    const union = new UnionAuthenticator({ authenticators: [fixed(undefined), fixed(undefined)] });
    await assert.rejects(union.authenticate(fakeRequest()), (err) => {
      assert.ok(err instanceof StatusError);
      assert.deepEqual(err.status, failureStatus(401, 'Unauthorized'));
      return true;
    });
  });

  test('always-allowed paths serve a caller without credentials as system:anonymous', async () => {
    const union = new UnionAuthenticator({
      authenticators: [fixed(undefined)],
      anonymousPaths: ['/healthz', '/openapi/*', '/apis/cluster.core.oam.dev/v1alpha1'],
    });
    const anonymous = { name: 'system:anonymous', groups: ['system:unauthenticated'], extra: {} };
    assert.deepEqual(await union.authenticate(fakeRequest('/healthz?verbose')), anonymous);
    assert.deepEqual(await union.authenticate(fakeRequest('/openapi/v2')), anonymous);
    assert.deepEqual(await union.authenticate(fakeRequest('/apis/cluster.core.oam.dev/v1alpha1')), anonymous);
    await assert.rejects(union.authenticate(fakeRequest()), { code: 401 });
    await assert.rejects(union.authenticate(fakeRequest('/healthz/extra')), { code: 401 });
  });

  test('bad credentials fail even on an always-allowed path', async () => {
    const union = new UnionAuthenticator({
      authenticators: [fixed(unauthorized('invalid bearer token'))],
      anonymousPaths: ['/healthz'],
    });
    await assert.rejects(union.authenticate(fakeRequest('/healthz')), {
      code: 401,
      message: 'invalid bearer token',
    });
  });

  test('the first success wins, adds system:authenticated, and earlier errors are forgiven', async () => {
    const union = new UnionAuthenticator({
      authenticators: [
        fixed(unauthorized('client certificate rejected')),
        fixed({ name: 'alice', groups: ['dev'], extra: {} }),
        fixed({ name: 'never', groups: [], extra: {} }),
      ],
    });
    assert.deepEqual(await union.authenticate(fakeRequest()), {
      name: 'alice',
      groups: ['dev', 'system:authenticated'],
      extra: {},
    });
  });

  test('a rejected identity header stops the chain', async () => {
    const union = new UnionAuthenticator({
      authenticators: [
        fixed(new RejectedCredentialsError('spoofed')),
        fixed({ name: 'a', groups: [], extra: {} }),
      ],
    });
    await assert.rejects(union.authenticate(fakeRequest()), { code: 401, message: 'spoofed' });
  });

  test('a failed review outranks bad credentials; 401 messages are joined', async () => {
    const outage = new StatusError(failureStatus(503, 'token review failed: timeout'));
    const withOutage = new UnionAuthenticator({
      authenticators: [fixed(unauthorized('bad cert')), fixed(outage)],
    });
    await assert.rejects(withOutage.authenticate(fakeRequest()), { code: 503 });
    const both = new UnionAuthenticator({
      authenticators: [fixed(unauthorized('bad cert')), fixed(unauthorized('invalid bearer token'))],
    });
    await assert.rejects(both.authenticate(fakeRequest()), {
      code: 401,
      message: 'bad cert; invalid bearer token',
    });
  });

  describe('the gateway chain over real TLS', () => {
    let frontProxyCA: CertificateAuthority;
    let clientCA: CertificateAuthority;
    let proxyClient: KeyPair;
    let kube: FakeKube;
    let server: AuthServer;

    before(async () => {
      frontProxyCA = await createCertificateAuthority('front-proxy-ca');
      clientCA = await createCertificateAuthority('client-ca');
      proxyClient = await frontProxyCA.issue({ commonName: 'front-proxy-client', usage: 'client' });
      const configMapData = {
        'client-ca-file': clientCA.cert,
        'requestheader-client-ca-file': frontProxyCA.cert,
        'requestheader-allowed-names': '["front-proxy-client"]',
        'requestheader-username-headers': '["X-Remote-User"]',
        'requestheader-group-headers': '["X-Remote-Group"]',
        'requestheader-extra-headers-prefix': '["X-Remote-Extra-"]',
      };
      kube = await startFakeKube((_path, body) => {
        const token = (body['spec'] as { token: string }).token;
        const status =
          token === 'sa-token'
            ? { authenticated: true, user: { username: 'system:serviceaccount:default:robot', groups: [] } }
            : { authenticated: false, error: 'unknown token' };
        return { body: { status } };
      });
      const union = new UnionAuthenticator({
        authenticators: [
          new RequestHeaderAuthenticator({ configMapData }),
          new ClientCertAuthenticator({ configMapData }),
          new TokenReviewAuthenticator({ client: kube.client }),
        ],
        anonymousPaths: ['/healthz'],
      });
      server = await startAuthServer(union, [frontProxyCA.cert, clientCA.cert]);
    });
    after(async () => {
      await server.close();
      await kube.close();
    });

    const name = (res: { body: Record<string, unknown> }) => (res.body['user'] as UserInfo | null)?.name;

    test('each kind of credential authenticates', async () => {
      const viaAggregator = await request(server, {
        cert: proxyClient,
        headers: { 'X-Remote-User': 'alice', 'X-Remote-Group': 'system:authenticated' },
      });
      assert.equal(name(viaAggregator), 'alice');
      assert.deepEqual((viaAggregator.body['user'] as UserInfo).groups, ['system:authenticated']);

      const direct = await clientCA.issue({ commonName: 'ops-bot', organizations: ['ops'], usage: 'client' });
      const viaCert = await request(server, { cert: direct });
      assert.deepEqual(viaCert.body['user'], {
        name: 'ops-bot',
        groups: ['ops', 'system:authenticated'],
        extra: {},
      });

      const viaToken = await request(server, { headers: { Authorization: 'Bearer sa-token' } });
      assert.equal(name(viaToken), 'system:serviceaccount:default:robot');
    });

    test('X-Remote-User is rejected with 401 unless a front-proxy certificate vouches for it', async () => {
      const direct = await clientCA.issue({ commonName: 'ops-bot', usage: 'client' });
      for (const res of [
        await request(server, { headers: { 'X-Remote-User': 'system:admin' } }),
        await request(server, { cert: direct, headers: { 'X-Remote-User': 'system:admin' } }),
        await request(server, {
          headers: { 'X-Remote-User': 'system:admin', Authorization: 'Bearer sa-token' },
        }),
        await request(server, { path: '/healthz', headers: { 'X-Remote-User': 'system:admin' } }),
      ]) {
        assert.equal(res.status, 401);
        assert.equal(res.body['reason'], 'Unauthorized');
      }
    });

    test('no credentials: 401 for the API, anonymous for /healthz', async () => {
      const api = await request(server);
      assert.equal(api.status, 401);
      assert.equal(api.body['message'], 'Unauthorized');
      const health = await request(server, { path: '/healthz' });
      assert.equal(name(health), 'system:anonymous');
    });

    test('a front-proxy certificate without identity headers is not a client certificate', async () => {
      const res = await request(server, { cert: proxyClient });
      assert.equal(res.status, 401);
      assert.match(String(res.body['message']), /client certificate rejected/);
    });
  });
});

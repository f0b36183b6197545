import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type CertificateAuthority, createCertificateAuthority } from '../../../shared/pki.ts';
import { ClientCertAuthenticator } from './client-cert.ts';
import { type AuthServer, request, startAuthServer } from './testing.ts';

describe('client-certificate authentication over real TLS', () => {
  let clientCA: CertificateAuthority;
  let otherCA: CertificateAuthority;
  let authenticator: ClientCertAuthenticator;
  let server: AuthServer;

  before(async () => {
    clientCA = await createCertificateAuthority('client-ca');
    otherCA = await createCertificateAuthority('other-ca');
    authenticator = new ClientCertAuthenticator({ configMapData: { 'client-ca-file': clientCA.cert } });
    server = await startAuthServer(authenticator, [clientCA.cert, otherCA.cert]);
  });
  after(() => server.close());

  test('CN is the user name and every O a group', async () => {
    const cert = await clientCA.issue({
      commonName: 'system:serviceaccount:vela-system:vela-core',
      organizations: ['system:masters', 'ops'],
      usage: 'client',
    });
    const res = await request(server, { cert });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body['user'], {
      name: 'system:serviceaccount:vela-system:vela-core',
      groups: ['system:masters', 'ops'],
      extra: {},
    });
  });

  test('a certificate from a CA other than client-ca-file is an authentication error', async () => {
    const cert = await otherCA.issue({ commonName: 'mallory', usage: 'client' });
    const res = await request(server, { cert });
    assert.equal(res.status, 401);
    assert.match(
      String(res.body['message']),
      /client certificate rejected: .*not signed by a trusted authority/,
    );
  });

  test('a serving-only certificate from the client CA is refused', async () => {
    const cert = await clientCA.issue({ commonName: 'web', usage: 'server' });
    const res = await request(server, { cert });
    assert.equal(res.status, 401);
  });

  test('no certificate, or no client CA configured, means no credentials', async () => {
    assert.equal((await request(server)).body['user'], null);
    const unconfigured = new ClientCertAuthenticator();
    assert.equal(unconfigured.configured, false);
    const bare = await startAuthServer(unconfigured, [clientCA.cert]);
    try {
      const cert = await clientCA.issue({ commonName: 'alice', usage: 'client' });
      assert.equal((await request(bare, { cert })).body['user'], null);
      unconfigured.update({ 'client-ca-file': clientCA.cert });
      assert.deepEqual((await request(bare, { cert })).body['user'], {
        name: 'alice',
        groups: [],
        extra: {},
      });
    } finally {
      await bare.close();
    }
  });
});

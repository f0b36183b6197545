import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { utf8WireValue } from '../../../shared/identity/header-encoding.ts';
import { type CertificateAuthority, createCertificateAuthority, type KeyPair } from '../../../shared/pki.ts';
import { RequestHeaderAuthenticator } from './request-header.ts';
import { type AuthServer, request, startAuthServer } from './testing.ts';

describe('front-proxy (requestheader) authentication over real TLS', () => {
  let frontProxyCA: CertificateAuthority;
  let clientCA: CertificateAuthority;
  let proxyClient: KeyPair;
  let configMapData: Record<string, string>;
  let authenticator: RequestHeaderAuthenticator;
  let server: AuthServer;

  before(async () => {
    frontProxyCA = await createCertificateAuthority('front-proxy-ca');
    clientCA = await createCertificateAuthority('client-ca');
    proxyClient = await frontProxyCA.issue({ commonName: 'front-proxy-client', usage: 'client' });
    configMapData = {
      'client-ca-file': clientCA.cert,
      'requestheader-client-ca-file': frontProxyCA.cert,
      'requestheader-allowed-names': '["front-proxy-client"]',
      'requestheader-username-headers': '["X-Remote-User"]',
      'requestheader-uid-headers': '["X-Remote-Uid"]',
      'requestheader-group-headers': '["X-Remote-Group"]',
      'requestheader-extra-headers-prefix': '["X-Remote-Extra-"]',
    };
    authenticator = new RequestHeaderAuthenticator({ configMapData });
    server = await startAuthServer(authenticator, [frontProxyCA.cert, clientCA.cert]);
  });
  after(() => server.close());

  test('trusts the identity headers from an allowed front-proxy certificate', async () => {
    const res = await request(server, {
      cert: proxyClient,
      headers: {
        'X-Remote-User': 'alice',
        'X-Remote-Uid': 'uid-1',
        // Repeated headers are separate groups, and a comma stays inside one.
        'X-Remote-Group': ['system:authenticated', 'team, with comma', ''],
        'X-Remote-Extra-Scopes': ['view', 'edit'],
        'X-Remote-Extra-Example.com%2fReason': 'audit',
        'X-Other': 'kept',
      },
    });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body['user'], {
      name: 'alice',
      uid: 'uid-1',
      groups: ['system:authenticated', 'team, with comma'],
      extra: { scopes: ['view', 'edit'], 'example.com/reason': ['audit'] },
    });
    // Consumed identity headers never travel on to a managed cluster.
    const headers = res.body['headers'] as Record<string, string>;
    assert.deepEqual(
      Object.keys(headers).filter((name) => name.startsWith('x-remote')),
      [],
    );
    assert.equal(headers['x-other'], 'kept');
    const raw = res.body['rawHeaders'] as string[];
    assert.ok(!raw.some((name) => name.toLowerCase().startsWith('x-remote')));
  });

  test('reads identity values as the UTF-8 bytes the aggregator writes, not as latin1', async () => {
    // What kube-apiserver's front proxy puts on the wire for user h-jösé in group g-ñ: UTF-8 bytes
    // (utf8WireValue hands Node the latin1 view of them, so these exact bytes are sent).
    const res = await request(server, {
      cert: proxyClient,
      headers: {
        'X-Remote-User': utf8WireValue('h-jösé'),
        'X-Remote-Uid': utf8WireValue('uid-ü'),
        'X-Remote-Group': [utf8WireValue('g-ñ'), utf8WireValue('团队')],
        // client-go escapes the key's UTF-8 bytes; the value is raw UTF-8.
        'X-Remote-Extra-R%C3%B4le': utf8WireValue('chef·de·projet'),
      },
    });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body['user'], {
      name: 'h-jösé',
      uid: 'uid-ü',
      groups: ['g-ñ', '团队'],
      extra: { rôle: ['chef·de·projet'] },
    });
  });

  test('rejects identity values whose bytes are not UTF-8 (401) rather than guessing a latin1 name', async () => {
    const cases: Record<string, string>[] = [
      { 'X-Remote-User': 'h-j\xf6s\xe9' },
      { 'X-Remote-User': 'alice', 'X-Remote-Group': 'g-\xf1' },
      { 'X-Remote-User': 'alice', 'X-Remote-Extra-Scopes': '\xff' },
    ];
    for (const headers of cases) {
      const res = await request(server, { cert: proxyClient, headers });
      assert.equal(res.status, 401, JSON.stringify(headers));
      assert.match(String(res.body['message']), /not valid UTF-8/);
    }
  });

  test('rejects identity headers with a certificate from another CA (the client CA)', async () => {
    const direct = await clientCA.issue({ commonName: 'front-proxy-client', usage: 'client' });
    const res = await request(server, { cert: direct, headers: { 'X-Remote-User': 'alice' } });
    assert.equal(res.status, 401);
    assert.equal(res.body['reason'], 'Unauthorized');
    assert.match(String(res.body['message']), /not signed by a trusted authority/);
  });

  test('rejects identity headers from a front-proxy certificate whose CN is not allowed', async () => {
    const other = await frontProxyCA.issue({ commonName: 'someone-else', usage: 'client' });
    const res = await request(server, { cert: other, headers: { 'X-Remote-User': 'alice' } });
    assert.equal(res.status, 401);
    assert.match(String(res.body['message']), /CN "someone-else" is not an allowed front-proxy name/);
  });

  test('rejects identity headers without any client certificate', async () => {
    const res = await request(server, { headers: { 'X-Remote-User': 'system:admin' } });
    assert.equal(res.status, 401);
    assert.match(String(res.body['message']), /no client certificate/);
  });

  test('an empty X-Remote-User followed by another is a claim too (401 without a certificate)', async () => {
    const claims: Record<string, string | string[]>[] = [
      { 'X-Remote-User': ['', 'system:admin'] },
      { 'X-Remote-User': '' },
      { 'X-Remote-Group': 'system:masters' },
      { 'X-Remote-Extra-Scopes': 'admin' },
      { 'X-Remote-Uid': 'u' },
    ];
    for (const headers of claims) {
      const res = await request(server, { headers });
      assert.equal(res.status, 401, JSON.stringify(headers));
      assert.match(String(res.body['message']), /no client certificate/);
    }
  });

  test('with the front-proxy certificate, the first X-Remote-User value must be the name (Go Header.Get)', async () => {
    const res = await request(server, { cert: proxyClient, headers: { 'X-Remote-User': ['', 'alice'] } });
    assert.equal(res.status, 401);
    assert.match(String(res.body['message']), /no user name in x-remote-user/);
  });

  test('rejects a front-proxy certificate that is not valid for client authentication', async () => {
    const serving = await frontProxyCA.issue({ commonName: 'front-proxy-client', usage: 'server' });
    const res = await request(server, { cert: serving, headers: { 'X-Remote-User': 'alice' } });
    assert.equal(res.status, 401);
    assert.match(String(res.body['message']), /not valid for client authentication/);
  });

  test('rejects an expired front-proxy certificate', async () => {
    const future = new RequestHeaderAuthenticator({
      configMapData,
      now: () => new Date(Date.now() + 20 * 365 * 24 * 3600 * 1000),
    });
    const expiredServer = await startAuthServer(future, [frontProxyCA.cert]);
    try {
      const res = await request(expiredServer, { cert: proxyClient, headers: { 'X-Remote-User': 'alice' } });
      assert.equal(res.status, 401);
      assert.match(String(res.body['message']), /expired/);
    } finally {
      await expiredServer.close();
    }
  });

  test('without identity headers the request is left to the next authenticator', async () => {
    const res = await request(server, { cert: proxyClient });
    assert.equal(res.status, 200);
    assert.equal(res.body['user'], null);
    const anonymous = await request(server);
    assert.equal(anonymous.body['user'], null);
  });

  test('an empty allowed-names list accepts any CN signed by the front-proxy CA', async () => {
    const open = new RequestHeaderAuthenticator({
      configMapData: { ...configMapData, 'requestheader-allowed-names': '[]' },
    });
    const openServer = await startAuthServer(open, [frontProxyCA.cert]);
    try {
      const anyName = await frontProxyCA.issue({ commonName: 'aggregator-2', usage: 'client' });
      const res = await request(openServer, { cert: anyName, headers: { 'X-Remote-User': 'bob' } });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body['user'], { name: 'bob', groups: [], extra: {} });
    } finally {
      await openServer.close();
    }
  });

  test('reloads its configuration from a new ConfigMap revision', async () => {
    const reloadable = new RequestHeaderAuthenticator();
    const rotatedCA = await createCertificateAuthority('front-proxy-ca-2');
    const rotatedClient = await rotatedCA.issue({ commonName: 'front-proxy-client', usage: 'client' });
    const reloadServer = await startAuthServer(reloadable, [frontProxyCA.cert, rotatedCA.cert]);
    try {
      const headers = { 'X-Remote-User': 'carol' };
      // Not configured yet: identity headers cannot be trusted.
      let res = await request(reloadServer, { cert: proxyClient, headers });
      assert.equal(res.status, 401);
      assert.match(String(res.body['message']), /not configured/);

      reloadable.update(configMapData);
      res = await request(reloadServer, { cert: proxyClient, headers });
      assert.equal(res.status, 200);

      reloadable.update({ ...configMapData, 'requestheader-client-ca-file': rotatedCA.cert });
      res = await request(reloadServer, { cert: proxyClient, headers });
      assert.equal(res.status, 401);
      res = await request(reloadServer, { cert: rotatedClient, headers });
      assert.equal(res.status, 200);

      // Malformed data is refused and the working configuration stays.
      assert.throws(() => reloadable.update({ ...configMapData, 'requestheader-allowed-names': 'nope' }));
      res = await request(reloadServer, { cert: rotatedClient, headers });
      assert.equal(res.status, 200);
    } finally {
      await reloadServer.close();
    }
  });
});

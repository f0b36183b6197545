import assert from 'node:assert/strict';
import https from 'node:https';
import { test } from 'node:test';
import { createCertificateAuthority } from '../../../shared/pki.ts';
import { RequestHeaderAuthenticator } from './request-header.ts';
import { request, startAuthServer } from './testing.ts';

const config = (ca: string) => ({
  'requestheader-client-ca-file': ca,
  'requestheader-allowed-names': '["front-proxy-client"]',
  'requestheader-username-headers': '["X-Remote-User"]',
  'requestheader-group-headers': '["X-Remote-Group"]',
  'requestheader-extra-headers-prefix': '["X-Remote-Extra-"]',
});

test('a connection verified once is re-checked when the trusted CA changes', async () => {
  const oldCa = await createCertificateAuthority('old-front-proxy-ca');
  const newCa = await createCertificateAuthority('new-front-proxy-ca');
  const client = await oldCa.issue({ commonName: 'front-proxy-client', usage: 'client' });
  const authenticator = new RequestHeaderAuthenticator({ configMapData: config(oldCa.cert) });
  const server = await startAuthServer(authenticator, [oldCa.cert, newCa.cert]);
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  const headers = { 'X-Remote-User': 'alice' };
  try {
    // Several requests on one keep-alive connection: all authenticated.
    for (let i = 0; i < 3; i++) {
      const res = await request(server, { cert: client, headers, agent });
      assert.equal(res.status, 200);
      assert.equal((res.body.user as { name: string }).name, 'alice');
    }
    // The hub rotates its front-proxy CA: the same connection's old certificate no longer counts.
    authenticator.update(config(newCa.cert));
    const after = await request(server, { cert: client, headers, agent });
    assert.equal(after.status, 401);
  } finally {
    agent.destroy();
    await server.close();
  }
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Connection } from './kubeconfig.ts';
import { ReloadingClient } from './reloading-client.ts';

test('a new client only when the credential content changes; the change is reported', () => {
  let connection: Connection = {
    server: 'https://a',
    options: { headers: { authorization: 'Bearer 1' } },
    fingerprint: 'f1',
  };
  let reloads = 0;
  const seen: string[] = [];
  const c = new ReloadingClient({
    load: () => connection,
    onReload: () => reloads++,
    onConnection: (x) => seen.push(x.fingerprint),
    drainMs: 1,
  });
  const first = c.get();
  assert.equal(c.get(), first);
  assert.equal(reloads, 0, 'the first load is not a reload');
  connection = {
    server: 'https://a',
    options: { headers: { authorization: 'Bearer 2' } },
    fingerprint: 'f2',
  };
  const second = c.get();
  assert.notEqual(second, first);
  assert.equal(reloads, 1);
  assert.equal(c.connection?.fingerprint, 'f2');
  assert.deepEqual(seen, ['f1', 'f2']);
  c.close();
});

test('an unreadable credential throws, and the last good client is kept for the next read', () => {
  let fail = false;
  const c = new ReloadingClient({
    load: () => {
      if (fail) throw new Error('ENOENT');
      return { server: 'https://a', options: {}, fingerprint: 'f' };
    },
  });
  const first = c.get();
  fail = true;
  assert.throws(() => c.get(), /ENOENT/);
  fail = false;
  assert.equal(c.get(), first);
  c.close();
});

test('a certificate with the wrong key (files swapped one by one) is refused until the pair matches', async () => {
  const { createCertificateAuthority } = await import('../../shared/pki.ts');
  const [a, b] = await Promise.all([createCertificateAuthority('a'), createCertificateAuthority('b')]);
  let options: { cert: string; key: string } = { cert: a.cert, key: a.key };
  const c = new ReloadingClient({
    load: () => ({ server: 'https://a', options, fingerprint: options.cert + options.key }),
  });
  const first = c.get();
  options = { cert: b.cert, key: a.key };
  assert.throws(() => c.get(), /not usable \(a rotation in progress\?\)/);
  options = { cert: b.cert, key: b.key };
  assert.notEqual(c.get(), first);
  c.close();
});

test('over TLS: the server is verified against the CA, the client certificate presented, a rotated one used', async () => {
  const https = await import('node:https');
  const { createCertificateAuthority } = await import('../../shared/pki.ts');
  const ca = await createCertificateAuthority('test-ca');
  const serving = await ca.issue({ commonName: 'server', ipAddresses: ['127.0.0.1'], usage: 'server' });
  const [first, second] = await Promise.all([
    ca.issue({ commonName: 'agent-1', usage: 'client' }),
    ca.issue({ commonName: 'agent-2', usage: 'client' }),
  ]);
  const server = https.createServer(
    { ...serving, ca: ca.cert, requestCert: true, rejectUnauthorized: true },
    (req, res) => {
      const peer = (req.socket as import('node:tls').TLSSocket).getPeerCertificate();
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ cn: peer.subject.CN }));
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as import('node:net').AddressInfo).port;
  let pair = first;
  const c = new ReloadingClient({
    load: () => ({
      server: `https://127.0.0.1:${port}`,
      options: { ca: ca.cert, cert: pair.cert, key: pair.key, rejectUnauthorized: true },
      fingerprint: pair.cert,
    }),
    drainMs: 1,
  });
  try {
    assert.deepEqual(await c.get().request('GET', '/'), { cn: 'agent-1' });
    pair = second;
    assert.deepEqual(await c.get().request('GET', '/'), { cn: 'agent-2' });
  } finally {
    c.close();
    server.close();
  }
});

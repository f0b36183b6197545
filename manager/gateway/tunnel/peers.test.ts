import assert from 'node:assert/strict';
import http2 from 'node:http2';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { createCertificateAuthority, type KeyPair } from '../../../shared/pki.ts';
import { PeerClient, PeerServer, peerClusterHeader } from './peers.ts';

let ca: KeyPair;
let peerA: KeyPair;
let peerB: KeyPair;
let stranger: KeyPair;
let server: PeerServer;
let port: number;
let echo: net.Server;
let echoPort: number;
const logs: string[] = [];
const log = {
  info: () => {},
  debug: () => {},
  warn: (_f: object, m: string) => void logs.push(m),
};

before(async () => {
  const authority = await createCertificateAuthority('peer-ca');
  ca = authority;
  const leaf = { ipAddresses: ['127.0.0.1'], usage: 'both' as const };
  peerA = await authority.issue({ commonName: 'gw-a', ...leaf });
  peerB = await authority.issue({ commonName: 'gw-b', ...leaf });
  // Signed by another CA (the hub's, say): must not pass for a replica.
  stranger = await (await createCertificateAuthority('other-ca')).issue({ commonName: 'gw-x', ...leaf });
  // The "agent tunnel" of cluster c1 on replica A: here an echo server per stream.
  echo = net.createServer((s) => s.pipe(s));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  echoPort = (echo.address() as net.AddressInfo).port;
  server = new PeerServer({
    tls: { ...peerA, ca: ca.cert },
    dialLocal: (cluster, kind) =>
      cluster === 'c1'
        ? new Promise((resolve) => {
            const s = net.connect(echoPort, '127.0.0.1', () => resolve(s));
            // The kind reaches the holder: an impersonation stream is marked for its agent.
            if (kind === 'impersonate') s.write('impersonate:');
          })
        : undefined,
    log,
  });
  port = await server.listen(0, '127.0.0.1');
});

after(async () => {
  await server.close();
  echo.close();
});

function roundTrip(stream: import('node:stream').Duplex, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    stream.on('data', (c: Buffer) => {
      got += c.toString();
      if (got.length >= text.length) resolve(got);
    });
    stream.on('error', reject);
    stream.write(text);
  });
}

test('a replica opens a stream of the tunnel another replica holds, bytes both ways', async () => {
  const client = new PeerClient({ tls: { ...peerB, ca: ca.cert } });
  try {
    const relay = await client.dial(`127.0.0.1:${port}`, 'gw-a', 'c1', 'relay');
    assert.equal(await roundTrip(relay, 'hello'), 'hello');
    relay.destroy();
    const impersonate = await client.dial(`127.0.0.1:${port}`, 'gw-a', 'c1', 'impersonate');
    assert.equal(await roundTrip(impersonate, 'GET / HTTP/1.1\r\n'), 'impersonate:GET / HTTP/1.1\r\n');
    impersonate.destroy();
  } finally {
    client.close();
  }
});

test('a cluster the peer does not hold, or a peer that is gone: a refusal that names replica and cluster', async () => {
  const client = new PeerClient({ tls: { ...peerB, ca: ca.cert }, dialTimeoutMs: 2_000 });
  try {
    await assert.rejects(
      client.dial(`127.0.0.1:${port}`, 'gw-a', 'c2', 'relay'),
      /replica "gw-a" .* cluster "c2" could not open a stream \(503: this replica holds no tunnel of cluster "c2"\)/,
    );
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const deadPort = (closed.address() as net.AddressInfo).port;
    closed.close();
    await assert.rejects(
      client.dial(`127.0.0.1:${deadPort}`, 'gw-dead', 'c1', 'relay'),
      /cannot reach the gateway replica "gw-dead" \(127\.0\.0\.1:\d+\) that holds the tunnel of cluster "c1": .*ECONNREFUSED/,
    );
  } finally {
    client.close();
  }
});

/** A CONNECT stream opened with `tlsOptions`: resolves with its status, rejects when TLS refuses. */
function rawConnect(tlsOptions: http2.SecureClientSessionOptions): Promise<number> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`https://127.0.0.1:${port}`, {
      ca: ca.cert,
      checkServerIdentity: () => undefined,
      ...tlsOptions,
    });
    session.on('error', (err) => reject(err));
    const stream = session.request(
      { ':method': 'CONNECT', ':authority': 'x:443', [peerClusterHeader]: 'c1' },
      { endStream: false },
    );
    stream.on('error', (err) => reject(err));
    stream.on('response', (h) => {
      resolve(Number(h[':status']));
      session.destroy();
    });
    stream.on('close', () => reject(new Error('closed without an answer')));
  });
}

test('the peer port refuses a client without a certificate, or with one the peer CA did not sign', async () => {
  assert.equal(await rawConnect({ cert: peerB.cert, key: peerB.key }), 200, 'a replica is served');
  await assert.rejects(rawConnect({}));
  await assert.rejects(rawConnect({ cert: stranger.cert, key: stranger.key }));
  assert.ok(
    logs.filter((m) => /no valid peer client certificate/.test(m)).length >= 2,
    'refusals are logged',
  );
});

test('a client does not accept a peer server whose certificate the peer CA did not sign', async () => {
  const impostor = new PeerServer({ tls: { ...stranger, ca: ca.cert }, dialLocal: () => undefined, log });
  const impostorPort = await impostor.listen(0, '127.0.0.1');
  const client = new PeerClient({ tls: { ...peerB, ca: ca.cert }, dialTimeoutMs: 2_000 });
  try {
    await assert.rejects(client.dial(`127.0.0.1:${impostorPort}`, 'gw-x', 'c1', 'relay'), /cannot reach/);
  } finally {
    client.close();
    await impostor.close();
  }
});

test('rotated peer credentials: new handshakes use them on both sides', async () => {
  const next = await createCertificateAuthority('peer-ca-2');
  const leaf = { ipAddresses: ['127.0.0.1'], usage: 'both' as const };
  const a2 = await next.issue({ commonName: 'gw-a', ...leaf });
  const b2 = await next.issue({ commonName: 'gw-b', ...leaf });
  const rotated = new PeerServer({
    tls: { ...peerA, ca: ca.cert },
    dialLocal: (cluster) =>
      cluster === 'c1' ? Promise.resolve(net.connect(echoPort, '127.0.0.1')) : undefined,
    log,
  });
  const rotatedPort = await rotated.listen(0, '127.0.0.1');
  const client = new PeerClient({ tls: { ...peerB, ca: ca.cert }, dialTimeoutMs: 2_000 });
  try {
    (await client.dial(`127.0.0.1:${rotatedPort}`, 'gw-a', 'c1', 'relay')).destroy();
    rotated.setTls({ ...a2, ca: next.cert });
    client.setTls({ ...b2, ca: next.cert });
    const stream = await client.dial(`127.0.0.1:${rotatedPort}`, 'gw-a', 'c1', 'relay');
    assert.equal(await roundTrip(stream, 'after rotation'), 'after rotation');
    stream.destroy();
    // The old credentials no longer pass.
    const stale = new PeerClient({ tls: { ...peerB, ca: ca.cert }, dialTimeoutMs: 2_000 });
    await assert.rejects(stale.dial(`127.0.0.1:${rotatedPort}`, 'gw-a', 'c1', 'relay'), /cannot reach/);
    stale.close();
  } finally {
    client.close();
    await rotated.close();
  }
});

import assert from 'node:assert/strict';
import type { X509Certificate } from 'node:crypto';
import http2 from 'node:http2';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { type CertificateAuthority, createCertificateAuthority, type KeyPair } from '../../../shared/pki.ts';
import { parsePemBundle } from '../../../shared/x509-chain.ts';
import { hubPeerTrust, type PeerTrust, peerCommonName } from './peer-identity.ts';
import { PeerClient, PeerServer, peerClusterHeader } from './peers.ts';

const namespace = 'gw-ns';
/** The hub's client CA (the kube-apiserver-client signer's): client-only certificates, as the hub signs them. */
let hubCa: CertificateAuthority;
let roots: X509Certificate[];
let trust: PeerTrust;
let peerA: KeyPair;
let peerB: KeyPair;
let server: PeerServer;
let port: number;
let echo: net.Server;
let echoPort: number;
/** Streams replica A's server opened on its tunnels: a refused client must never add one. */
let localDials = 0;
const logs: string[] = [];
const log = {
  info: () => {},
  debug: () => {},
  warn: (_f: object, m: string) => void logs.push(m),
};

const peerCert = (ca: CertificateAuthority, replica: string, ns = namespace) =>
  ca.issue({ commonName: peerCommonName(ns, replica), usage: 'client', validForMs: 86_400_000 });

before(async () => {
  hubCa = await createCertificateAuthority('hub-client-ca');
  roots = parsePemBundle(hubCa.cert);
  trust = hubPeerTrust(roots, namespace);
  peerA = await peerCert(hubCa, 'gw-a');
  peerB = await peerCert(hubCa, 'gw-b');
  // The "agent tunnel" of cluster c1 on replica A: here an echo server per stream.
  echo = net.createServer((s) => s.pipe(s));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  echoPort = (echo.address() as net.AddressInfo).port;
  server = new PeerServer({
    tls: peerA,
    trust: () => trust,
    dialLocal: (cluster, kind) => {
      if (cluster !== 'c1') return undefined;
      localDials++;
      return new Promise((resolve) => {
        const s = net.connect(echoPort, '127.0.0.1', () => resolve(s));
        // The kind reaches the holder: an impersonation stream is marked for its agent.
        if (kind === 'impersonate') s.write('impersonate:');
      });
    },
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

const client = (pair: KeyPair | null = peerB, t: () => PeerTrust | undefined = () => trust) =>
  new PeerClient({ ...(pair ? { tls: pair } : {}), trust: t, dialTimeoutMs: 2_000 });

test('a replica opens a stream of the tunnel another replica holds, bytes both ways', async () => {
  const b = client();
  try {
    await b.verify(`127.0.0.1:${port}`, 'gw-a');
    const relay = await b.dial(`127.0.0.1:${port}`, 'gw-a', 'c1', 'relay');
    assert.equal(await roundTrip(relay, 'hello'), 'hello');
    relay.destroy();
    const impersonate = await b.dial(`127.0.0.1:${port}`, 'gw-a', 'c1', 'impersonate');
    assert.equal(await roundTrip(impersonate, 'GET / HTTP/1.1\r\n'), 'impersonate:GET / HTTP/1.1\r\n');
    impersonate.destroy();
  } finally {
    b.close();
  }
});

test('a cluster the peer does not hold, or a peer that is gone: a refusal that names replica and cluster, not the network error', async () => {
  const b = client();
  try {
    await assert.rejects(
      b.dial(`127.0.0.1:${port}`, 'gw-a', 'c2', 'relay'),
      /replica "gw-a" .* cluster "c2" could not open a stream \(503: this replica holds no tunnel of cluster "c2"\)/,
    );
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const deadPort = (closed.address() as net.AddressInfo).port;
    closed.close();
    const err = await b.dial(`127.0.0.1:${deadPort}`, 'gw-dead', 'c1', 'relay').catch((e: Error) => e);
    assert.ok(err instanceof Error);
    assert.match(
      err.message,
      /cannot reach the gateway replica "gw-dead" that holds the tunnel of cluster "c1": unreachable$/,
    );
    assert.doesNotMatch(err.message, /ECONNREFUSED|127\.0\.0\.1/);
    await assert.rejects(b.verify(`127.0.0.1:${deadPort}`, 'gw-dead'), /^Error: unreachable$/);
  } finally {
    b.close();
  }
});

test('verify: the server must be the replica named, else the session is closed', async () => {
  const b = client();
  try {
    await assert.rejects(b.verify(`127.0.0.1:${port}`, 'gw-b'), /^Error: not a gateway replica$/);
    await assert.rejects(
      b.dial(`127.0.0.1:${port}`, 'gw-c', 'c1', 'relay'),
      /replica "gw-c" .*: not a gateway replica$/,
    );
    // The right name still works after the refusals (a new session).
    await b.verify(`127.0.0.1:${port}`, 'gw-a');
  } finally {
    b.close();
  }
});

/** A CONNECT stream opened with `tlsOptions`: resolves with its status, rejects when the session is refused. */
function rawConnect(tlsOptions: http2.SecureClientSessionOptions): Promise<number> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`https://127.0.0.1:${port}`, {
      rejectUnauthorized: false,
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

test('the peer port serves replicas only: no certificate, another CA, a hub user, another namespace, a group, expired', async () => {
  assert.equal(await rawConnect({ cert: peerB.cert, key: peerB.key }), 200, 'a replica is served');
  const other = await createCertificateAuthority('gateway-serving-ca');
  const refused: [string, KeyPair | undefined][] = [
    ['no certificate', undefined],
    // What a reader of the gateway's TLS Secret could mint: the right name from another CA.
    ['a peer name signed by another CA', await peerCert(other, 'gw-b')],
    ['a hub user of the right CA', await hubCa.issue({ commonName: 'alice', usage: 'client' })],
    ['a replica of another namespace', await peerCert(hubCa, 'gw-b', 'elsewhere')],
    [
      'a peer name with a group',
      await hubCa.issue({
        commonName: peerCommonName(namespace, 'gw-b'),
        organizations: ['system:masters'],
        usage: 'client',
      }),
    ],
    [
      'an expired peer certificate',
      await hubCa.issue({
        commonName: peerCommonName(namespace, 'gw-b'),
        usage: 'client',
        validForMs: -60_000,
      }),
    ],
    [
      'a server-only certificate',
      await hubCa.issue({ commonName: peerCommonName(namespace, 'gw-b'), usage: 'server' }),
    ],
  ];
  const dialsBefore = localDials;
  const logsBefore = logs.length;
  for (const [what, pair] of refused) {
    await assert.rejects(rawConnect(pair ? { cert: pair.cert, key: pair.key } : {}), `${what}: refused`);
  }
  assert.equal(localDials, dialsBefore, 'no refused client had a tunnel stream opened');
  assert.equal(
    logs.slice(logsBefore).filter((m) => /peer connection refused: no valid peer client certificate/.test(m))
      .length,
    refused.length,
    'each refusal is logged',
  );
});

test('a client opens no stream on a server that is not the replica: another CA, or before any trust', async () => {
  const impostorCa = await createCertificateAuthority('impostor');
  const impostorPair = await peerCert(impostorCa, 'gw-a');
  const streams: string[] = [];
  const impostor = http2.createSecureServer({
    ...impostorPair,
    requestCert: true,
    rejectUnauthorized: false,
  });
  impostor.on('stream', (s, h) => {
    streams.push(String(h[peerClusterHeader]));
    s.respond({ ':status': 200 });
  });
  await new Promise<void>((r) => impostor.listen(0, '127.0.0.1', r));
  const impostorPort = (impostor.address() as net.AddressInfo).port;
  const b = client();
  const untrusting = client(peerB, () => undefined);
  try {
    await assert.rejects(b.verify(`127.0.0.1:${impostorPort}`, 'gw-a'), /^Error: not a gateway replica$/);
    await assert.rejects(b.dial(`127.0.0.1:${impostorPort}`, 'gw-a', 'c1', 'relay'), /not a gateway replica/);
    await assert.rejects(
      untrusting.dial(`127.0.0.1:${port}`, 'gw-a', 'c1', 'relay'),
      /not a gateway replica/,
    );
    assert.deepEqual(streams, [], 'the impostor saw no stream (and no cluster name)');
  } finally {
    b.close();
    untrusting.close();
    impostor.close();
  }
});

test('no peer certificate yet: the server refuses every handshake, the client dials nothing; both start once it arrives', async () => {
  const waiting = new PeerServer({
    trust: () => trust,
    dialLocal: (cluster) =>
      cluster === 'c1' ? Promise.resolve(net.connect(echoPort, '127.0.0.1')) : undefined,
    log,
  });
  const waitingPort = await waiting.listen(0, '127.0.0.1');
  const b = client();
  const fresh = client(null);
  try {
    await assert.rejects(rawConnectTo(waitingPort, peerB), 'no server certificate: no handshake');
    await assert.rejects(fresh.verify(`127.0.0.1:${port}`, 'gw-a'), /^Error: no peer certificate yet$/);
    waiting.setTls(await peerCert(hubCa, 'gw-w'));
    fresh.setTls(await peerCert(hubCa, 'gw-f'));
    await b.verify(`127.0.0.1:${waitingPort}`, 'gw-w');
    await fresh.verify(`127.0.0.1:${port}`, 'gw-a');
  } finally {
    b.close();
    fresh.close();
    await waiting.close();
  }
});

function rawConnectTo(p: number, pair: KeyPair): Promise<void> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`https://127.0.0.1:${p}`, { ...pair, rejectUnauthorized: false });
    session.on('error', reject);
    session.on('connect', () => {
      session.destroy();
      resolve();
    });
  });
}

test('renewed peer certificates: new handshakes use them on both sides', async () => {
  const renewed = new PeerServer({
    tls: peerA,
    trust: () => trust,
    dialLocal: (cluster) =>
      cluster === 'c1' ? Promise.resolve(net.connect(echoPort, '127.0.0.1')) : undefined,
    log,
  });
  const renewedPort = await renewed.listen(0, '127.0.0.1');
  const b = client();
  try {
    (await b.dial(`127.0.0.1:${renewedPort}`, 'gw-a', 'c1', 'relay')).destroy();
    renewed.setTls(await peerCert(hubCa, 'gw-a'));
    b.setTls(await peerCert(hubCa, 'gw-b'));
    const stream = await b.dial(`127.0.0.1:${renewedPort}`, 'gw-a', 'c1', 'relay');
    assert.equal(await roundTrip(stream, 'after renewal'), 'after renewal');
    stream.destroy();
  } finally {
    b.close();
    await renewed.close();
  }
});

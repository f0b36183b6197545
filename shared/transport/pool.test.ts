import assert from 'node:assert/strict';
import { once } from 'node:events';
import https from 'node:https';
import { describe, it } from 'node:test';
import type { TLSSocket } from 'node:tls';
import { createCertificateAuthority } from '../pki.ts';
import { createConnectionPools, type Upstream } from './pool.ts';
import type { TransportCredential, TransportEndpoint, TransportTarget } from './target.ts';
import { listen, startUpstream, testPki } from './test-kit.ts';

/** An endpoint reached by URL: directly, or through `proxyUrl`. */
const constant = (
  url: string,
  extra: { caBundle?: string; insecure?: boolean; proxyUrl?: string } = {},
): TransportEndpoint => {
  const { proxyUrl, ...trust } = extra;
  return proxyUrl
    ? { kind: 'egress', url, proxyUrl, insecure: false, ...trust }
    : { kind: 'direct', url, insecure: false, ...trust };
};

function target(
  name: string,
  endpoint: TransportEndpoint,
  credential: TransportCredential = { token: 'cluster-token' },
  key = 'key-1',
): TransportTarget {
  return { name, key, endpoint, credential };
}

function upstreamOf(result: Upstream | string): Upstream {
  assert.equal(typeof result, 'object', String(result));
  return result as Upstream;
}

const agentOptions = (u: Upstream) => (u.agent as https.Agent).options;

/** The TLS context each new connection of the pool's Agent is opened with, in order. */
function contextsOfNewConnections(up: Upstream): unknown[] {
  const contexts: unknown[] = [];
  const createConnection = up.agent.createConnection.bind(up.agent);
  up.agent.createConnection = (options, callback) => {
    const socket = createConnection(options, callback);
    contexts.push((options as { secureContext?: unknown }).secureContext);
    return socket;
  };
  return contexts;
}

/** One request on a connection of connectOnce(), written by hand: the raw answer, and whether TLS resumed a session. */
async function requestOnce(
  up: Upstream,
): Promise<{ answer: string; resumed: boolean; protocol: string | null }> {
  const socket = (await up.connectOnce()) as TLSSocket;
  let resumed = false;
  let protocol: string | null = null;
  const handshook = () => {
    resumed = socket.isSessionReused();
    protocol = socket.getProtocol();
  };
  // connectOnce() resolves before the handshake (a pool context, OpenSSL verifies) or after it (the shared one).
  if ((socket as TLSSocket & { secureConnecting: boolean }).secureConnecting)
    socket.once('secureConnect', handshook);
  else handshook();
  socket.write(`GET / HTTP/1.1\r\nHost: ${up.hostHeader}\r\nConnection: close\r\n\r\n`);
  let answer = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    answer += chunk;
  });
  await once(socket, 'close');
  return { answer, resumed, protocol };
}

/** A pool for cluster `name` with the test CA as its bundle, to a server of startUpstream(). */
async function caTrustedPool(port: number, name = 'c', credential?: TransportCredential) {
  const { ca } = await testPki();
  const pools = createConnectionPools();
  const endpoint = constant(`https://127.0.0.1:${port}`, { caBundle: ca });
  return { pools, up: upstreamOf(pools.get(target(name, endpoint, credential))) };
}

describe('connection pools', () => {
  it('keeps one pool per cluster while the connection key is unchanged', () => {
    const pools = createConnectionPools();
    const a = upstreamOf(pools.get(target('c1', constant('https://10.0.0.1:6443'))));
    const b = upstreamOf(pools.get(target('c1', constant('https://10.0.0.1:6443'))));
    assert.equal(a, b);
    const c = upstreamOf(pools.get(target('c1', constant('https://10.0.0.1:6443'), undefined, 'key-2')));
    assert.notEqual(c, a);
    assert.deepEqual(pools.stats(), {
      pools: 1,
      retired: 0,
      activeSockets: 0,
      idleSockets: 0,
      queuedRequests: 0,
      http2Sessions: 0,
      http2Streams: 0,
      perCluster: [['c1', 0]],
    });
    pools.get(target('c2', constant('https://10.0.0.2')));
    assert.equal(pools.stats().pools, 2);
    pools.forget('c2');
    pools.forget('unknown');
    assert.equal(pools.stats().pools, 1);
    pools.close();
    assert.equal(pools.stats().pools, 0);
  });

  it('offers HTTP/2 on TLS endpoints only, and not at all with http2: false', () => {
    const pools = createConnectionPools();
    assert.ok(upstreamOf(pools.get(target('tls', constant('https://10.0.0.1:6443')))).http2);
    assert.equal(upstreamOf(pools.get(target('plain', constant('http://10.0.0.1:8080')))).http2, undefined);
    const http1Only = createConnectionPools({ http2: false });
    assert.equal(
      upstreamOf(http1Only.get(target('tls', constant('https://10.0.0.1:6443')))).http2,
      undefined,
    );
    pools.close();
    http1Only.close();
  });

  it('parses the endpoint address once: host, port, sub-path, Host header', () => {
    const pools = createConnectionPools();
    const sub = upstreamOf(pools.get(target('a', constant('https://rancher.example.com/k8s/clusters/c-1/'))));
    assert.equal(sub.hostname, 'rancher.example.com');
    assert.equal(sub.port, 443);
    assert.equal(sub.basePath, '/k8s/clusters/c-1');
    assert.equal(sub.hostHeader, 'rancher.example.com');

    const v6 = upstreamOf(pools.get(target('b', constant('https://[::1]:6443'))));
    assert.equal(v6.hostname, '::1');
    assert.equal(v6.port, 6443);
    assert.equal(v6.basePath, '');
    assert.equal(v6.hostHeader, '[::1]:6443');

    const plain = upstreamOf(pools.get(target('c', constant('http://127.0.0.1:8080'))));
    assert.equal(plain.port, 8080);
    assert.equal(plain.agent.constructor.name, 'Agent');
    pools.close();
  });

  it('carries TLS settings and the credential', () => {
    const pools = createConnectionPools();
    const token = upstreamOf(pools.get(target('t', constant('https://10.0.0.1', { insecure: false }))));
    assert.equal(token.authorization, 'Bearer cluster-token');
    assert.equal(agentOptions(token).rejectUnauthorized, true);
    assert.equal(agentOptions(token).keepAlive, true);
    const insecure = upstreamOf(pools.get(target('x', constant('https://10.0.0.1', { insecure: true }))));
    assert.equal(agentOptions(insecure).rejectUnauthorized, false);
    pools.close();
  });

  it('opens every connection of a pool with one TLS context, built from the CA and client certificate', async () => {
    const { ca, client } = await testPki();
    const seenCerts: (string | undefined)[] = [];
    const upstream = await startUpstream(
      (req, res) => {
        const peer = (req.socket as TLSSocket).getPeerCertificate();
        seenCerts.push(String(peer.subject?.CN));
        res.writeHead(200, { Connection: 'close' }).end('ok');
      },
      { requestCert: true },
    );
    const pools = createConnectionPools();
    const up = upstreamOf(
      pools.get(
        target('c', constant(`https://127.0.0.1:${upstream.port}`, { caBundle: ca }), {
          certificate: client.cert,
          privateKey: client.key,
        }),
      ),
    );
    assert.equal(agentOptions(up).ca, undefined, 'the PEMs are not handed to each connection to parse again');
    const contexts = contextsOfNewConnections(up);
    const get = () =>
      new Promise<number>((resolve, reject) => {
        up.request({ agent: up.agent, host: up.hostname, port: up.port, path: '/' }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        })
          .on('error', reject)
          .end();
      });
    assert.equal(await get(), 200);
    assert.equal(await get(), 200);
    assert.equal(contexts.length, 2, 'two connections (the server closes each)');
    assert.ok(contexts[0]);
    assert.equal(contexts[0], contexts[1]);
    assert.deepEqual(seenCerts, ['gateway', 'gateway'], 'the client certificate was presented');
    pools.close();
    await upstream.close();
  });

  it('a one-shot connection of a pool with a client certificate takes the held TLS context, and keeps none it had to build', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { client } = await testPki();
    const upstream = await startUpstream((_req, res) => res.writeHead(200, { Connection: 'close' }).end(), {
      requestCert: true,
    });
    const credential = { certificate: client.cert, privateKey: client.key };
    const { pools, up } = await caTrustedPool(upstream.port, 'c', credential);
    const contexts = contextsOfNewConnections(up);
    const get = async (oneShot: boolean) => {
      if (oneShot) return void (await requestOnce(up));
      await new Promise<void>((resolve, reject) => {
        up.request({ agent: up.agent, host: up.hostname, port: up.port }, (res) => {
          res.resume();
          res.on('end', resolve);
        })
          .on('error', reject)
          .end();
      });
    };
    await get(false);
    await get(true);
    assert.equal(
      contexts[0],
      contexts[1],
      'the context a regular connection holds serves a one-shot connection',
    );
    t.mock.timers.tick(30_001); // the held context is dropped after 30 s without a new connection
    await get(true);
    await get(true);
    assert.notEqual(contexts[2], contexts[1]);
    assert.notEqual(contexts[3], contexts[2], 'one-shot connections keep no context for later ones');
    await get(false);
    await get(false);
    assert.notEqual(contexts[4], contexts[3]);
    assert.equal(contexts[5], contexts[4], 'a regular connection builds one and holds it');

    // A pool whose first turn opened no regular connection (created by a probe) keeps no context.
    const probed = await caTrustedPool(upstream.port, 'probed', credential);
    const probedContexts = contextsOfNewConnections(probed.up);
    await new Promise((resolve) => setImmediate(resolve));
    await requestOnce(probed.up);
    await requestOnce(probed.up);
    assert.notEqual(probedContexts[1], probedContexts[0]);
    for (const p of [pools, probed.pools]) p.close();
    await upstream.close();
  });

  it('one-shot connections of pools trusted by their CA alone share one TLS context, each pool resuming its own session', async () => {
    const upstream = await startUpstream((_req, res) =>
      res.writeHead(200, { Connection: 'close' }).end('ok'),
    );
    const a = await caTrustedPool(upstream.port, 'a');
    const b = await caTrustedPool(upstream.port, 'b');
    const contextsA = contextsOfNewConnections(a.up);
    const contextsB = contextsOfNewConnections(b.up);
    const firstA = await requestOnce(a.up);
    const secondA = await requestOnce(a.up);
    const firstB = await requestOnce(b.up);
    assert.match(firstA.answer, /^HTTP\/1\.1 200 .*\r\nok\r\n/s);
    assert.deepEqual([firstA.resumed, secondA.resumed, firstB.resumed], [false, true, false]);
    assert.equal(secondA.protocol, 'TLSv1.2', 'TLS 1.2: resumed without a key exchange');
    assert.ok(contextsA[0]);
    assert.deepEqual([contextsA[1], contextsB[0]], [contextsA[0], contextsA[0]], 'one context for all');
    await new Promise<void>((resolve, reject) => {
      a.up
        .request({ agent: a.up.agent, host: a.up.hostname, port: a.up.port }, (res) => {
          res.resume();
          res.on('end', resolve);
        })
        .on('error', reject)
        .end();
    });
    assert.notEqual(contextsA[2], contextsA[0], "the pool's own connections keep the pool's context");
    for (const { pools } of [a, b]) pools.close();
    await upstream.close();
  });

  it('a server that refuses TLS 1.2 gets TLS 1.3 at once, and from then on', async () => {
    const { server } = await testPki();
    const tls13Only = await listen(
      https.createServer({ cert: server.cert, key: server.key, minVersion: 'TLSv1.3' }, (_req, res) =>
        res.writeHead(200, { Connection: 'close' }).end('ok'),
      ),
    );
    const { pools, up } = await caTrustedPool(tls13Only.port);
    const contexts = contextsOfNewConnections(up);
    const first = await requestOnce(up);
    assert.match(first.answer, /^HTTP\/1\.1 200 /);
    assert.equal(first.protocol, 'TLSv1.3');
    const second = await requestOnce(up);
    assert.deepEqual([second.protocol, second.resumed], ['TLSv1.3', true]);
    assert.equal(contexts.length, 3, 'one refused handshake, then TLS 1.3 only');
    assert.notEqual(contexts[1], contexts[0]);
    assert.equal(contexts[2], contexts[1]);
    pools.close();
    await tls13Only.close();
  });

  it('a certificate the gateway does not vouch for is left to OpenSSL, whose verdict stands, before anything is sent', async () => {
    let requests = 0;
    const upstream = await startUpstream((_req, res) => {
      requests++;
      res.writeHead(200, { Connection: 'close' }).end('ok');
    });
    const other = await createCertificateAuthority('another-ca');
    const pools = createConnectionPools();
    const endpoint = constant(`https://127.0.0.1:${upstream.port}`, { caBundle: other.cert });
    const up = upstreamOf(pools.get(target('c', endpoint)));
    const contexts = contextsOfNewConnections(up);
    const refused = async () => {
      const socket = await up.connectOnce();
      socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
      const [err] = (await once(socket, 'error')) as NodeJS.ErrnoException[];
      return err?.code;
    };
    assert.equal(await refused(), 'SELF_SIGNED_CERT_IN_CHAIN');
    assert.equal(contexts.length, 2, 'the shared context, then a context with the CA');
    assert.notEqual(contexts[1], contexts[0]);
    assert.equal(await refused(), 'SELF_SIGNED_CERT_IN_CHAIN');
    assert.equal(contexts.length, 3, 'from then on, OpenSSL only');
    assert.equal(requests, 0);
    pools.close();
    await upstream.close();
  });

  it('connectOnce resumes the TLS session of the connection before, and counts its connection while open', async () => {
    const upstream = await startUpstream((_req, res) =>
      res.writeHead(200, { Connection: 'close' }).end('ok'),
    );
    const { pools, up } = await caTrustedPool(upstream.port);
    const first = await requestOnce(up);
    assert.match(first.answer, /^HTTP\/1\.1 200 .*\r\nok\r\n/s);
    assert.equal(first.resumed, false);
    const second = await requestOnce(up);
    assert.equal(second.resumed, true, 'the second handshake is resumed');

    const open = await up.connectOnce();
    assert.deepEqual(pools.stats().perCluster, [['c', 1]], 'an open one-shot connection is counted');
    assert.equal(pools.stats().activeSockets, 1);
    open.destroy();
    await once(open, 'close');
    assert.deepEqual(pools.stats().perCluster, [['c', 0]]);
    pools.close();
    await upstream.close();
  });

  it('connectOnce fails with the connection error (nothing listens)', async () => {
    const pools = createConnectionPools();
    const up = upstreamOf(pools.get(target('gone', constant('https://127.0.0.1:1'))));
    const socket = await up.connectOnce();
    const [err] = await Promise.all([
      once(socket, 'error') as Promise<NodeJS.ErrnoException[]>,
      new Promise((resolve) => socket.once('close', resolve)),
    ]);
    assert.equal(err?.[0]?.code, 'ECONNREFUSED');
    assert.deepEqual(pools.stats().perCluster, [['gone', 0]]);
    pools.close();
  });

  it('answers a client certificate OpenSSL cannot load with a problem naming the cluster', () => {
    const pools = createConnectionPools();
    const key = pools.get(
      target('badkey', constant('https://10.0.0.1'), { certificate: 'CERT', privateKey: 'KEY' }),
    );
    assert.match(String(key), /cannot load the TLS configuration of cluster "badkey"/);
    // A plain-HTTP endpoint builds no TLS context at all.
    upstreamOf(
      pools.get(target('plain', constant('http://10.0.0.1'), { certificate: 'CERT', privateKey: 'KEY' })),
    );
    assert.equal(pools.stats().pools, 1);
    pools.close();
  });

  it('addresses tunnel endpoints by their TLS server name', () => {
    const pools = createConnectionPools();
    const tunnel = upstreamOf(
      pools.get(
        target('t', {
          kind: 'tunnel',
          serverName: 'kubernetes.default.svc',
          insecure: false,
          stream: 'relay',
          dial: () => Promise.reject(new Error('unused')),
        }),
      ),
    );
    assert.equal(tunnel.hostname, 'kubernetes.default.svc');
    assert.equal(tunnel.hostHeader, 'kubernetes.default.svc');
    assert.equal(agentOptions(tunnel).servername, 'kubernetes.default.svc');
    pools.close();
  });

  it('reports unusable endpoints as problems', () => {
    const pools = createConnectionPools();
    assert.equal(
      pools.get(target('a', constant('not a url'))),
      'endpoint address "not a url" is not a valid URL',
    );
    assert.match(
      String(pools.get(target('b', constant('ftp://h')))),
      /must be an https:\/\/ or http:\/\/ URL/,
    );
    assert.equal(
      pools.get(target('c', constant('https://h', { proxyUrl: 'ftp://127.0.0.1:21' }))),
      'proxy-url scheme "ftp" is not supported (use http, https, socks5 or socks5h)',
    );
    assert.equal(pools.stats().pools, 0);
  });
});

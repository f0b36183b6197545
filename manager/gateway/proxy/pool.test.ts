import assert from 'node:assert/strict';
import type https from 'node:https';
import { describe, it } from 'node:test';
import type { Endpoint } from '../clusters/cluster.ts';
import { createConnectionPools, type Upstream } from './pool.ts';
import { clusterTarget } from './test-kit.ts';

const constant = (address: string, extra: Partial<Endpoint> = {}): Endpoint =>
  ({ type: 'Const', address, insecure: false, ...extra }) as Endpoint;

function upstreamOf(result: Upstream | string): Upstream {
  assert.equal(typeof result, 'object', String(result));
  return result as Upstream;
}

const agentOptions = (u: Upstream) => (u.agent as https.Agent).options;

describe('connection pools', () => {
  it('keeps one pool per cluster while the connection key is unchanged', () => {
    const pools = createConnectionPools();
    const a = upstreamOf(pools.get(clusterTarget('c1', constant('https://10.0.0.1:6443'))));
    const b = upstreamOf(pools.get(clusterTarget('c1', constant('https://10.0.0.1:6443'))));
    assert.equal(a, b);
    const c = upstreamOf(
      pools.get(clusterTarget('c1', constant('https://10.0.0.1:6443'), undefined, 'key-2')),
    );
    assert.notEqual(c, a);
    assert.deepEqual(pools.stats(), {
      pools: 1,
      retired: 0,
      activeSockets: 0,
      idleSockets: 0,
      queuedRequests: 0,
      perCluster: [['c1', 0]],
    });
    pools.get(clusterTarget('c2', constant('https://10.0.0.2')));
    assert.equal(pools.stats().pools, 2);
    pools.forget('c2');
    pools.forget('unknown');
    assert.equal(pools.stats().pools, 1);
    pools.close();
    assert.equal(pools.stats().pools, 0);
  });

  it('parses the endpoint address once: host, port, sub-path, Host header', () => {
    const pools = createConnectionPools();
    const sub = upstreamOf(
      pools.get(clusterTarget('a', constant('https://rancher.example.com/k8s/clusters/c-1/'))),
    );
    assert.equal(sub.hostname, 'rancher.example.com');
    assert.equal(sub.port, 443);
    assert.equal(sub.basePath, '/k8s/clusters/c-1');
    assert.equal(sub.hostHeader, 'rancher.example.com');

    const v6 = upstreamOf(pools.get(clusterTarget('b', constant('https://[::1]:6443'))));
    assert.equal(v6.hostname, '::1');
    assert.equal(v6.port, 6443);
    assert.equal(v6.basePath, '');
    assert.equal(v6.hostHeader, '[::1]:6443');

    const plain = upstreamOf(pools.get(clusterTarget('c', constant('http://127.0.0.1:8080'))));
    assert.equal(plain.port, 8080);
    assert.equal(plain.agent.constructor.name, 'Agent');
    pools.close();
  });

  it('carries TLS settings and the credential', () => {
    const pools = createConnectionPools();
    const token = upstreamOf(
      pools.get(clusterTarget('t', constant('https://10.0.0.1', { caBundle: 'CA PEM', insecure: false }))),
    );
    assert.equal(token.authorization, 'Bearer cluster-token');
    assert.equal(agentOptions(token).ca, 'CA PEM');
    assert.equal(agentOptions(token).rejectUnauthorized, true);
    assert.equal(agentOptions(token).keepAlive, true);

    const cert = upstreamOf(
      pools.get(
        clusterTarget('x', constant('https://10.0.0.1', { insecure: true }), {
          type: 'X509Certificate',
          certificate: 'CERT',
          privateKey: 'KEY',
        }),
      ),
    );
    assert.equal(cert.authorization, undefined);
    assert.equal(agentOptions(cert).rejectUnauthorized, false);
    assert.equal(agentOptions(cert).cert, 'CERT');
    assert.equal(agentOptions(cert).key, 'KEY');
    pools.close();
  });

  it('addresses tunnel endpoints by their TLS server name', () => {
    const pools = createConnectionPools();
    const tunnel = upstreamOf(
      pools.get(
        clusterTarget('t', {
          type: 'ClusterProxy',
          serverName: 'kubernetes.default.svc',
          insecure: false,
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
      pools.get(clusterTarget('a', constant('not a url'))),
      'endpoint address "not a url" is not a valid URL',
    );
    assert.match(
      String(pools.get(clusterTarget('b', constant('ftp://h')))),
      /must be an https:\/\/ or http:\/\/ URL/,
    );
    assert.equal(
      pools.get(clusterTarget('c', constant('https://h', { proxyUrl: 'socks5://127.0.0.1:1080' }))),
      'proxy-url scheme "socks5" is not supported yet (only http and https CONNECT proxies)',
    );
    assert.equal(
      pools.get({
        ...clusterTarget('d', constant('https://h')),
        endpoint: undefined,
        problem: 'no endpoint in secret',
      }),
      'no endpoint in secret',
    );
    assert.equal(pools.stats().pools, 0);
  });
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { cleanPath, matchClusterGatewayPath, parseProxyPath } from './path.ts';

const P = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways/';

describe('matchClusterGatewayPath', () => {
  it('splits name, subresource, rest and query', () => {
    assert.deepEqual(matchClusterGatewayPath(`${P}c1/health`), {
      name: 'c1',
      subresource: 'health',
      rest: '',
      query: '',
    });
    assert.deepEqual(matchClusterGatewayPath(`${P}c1/proxy/api/v1?x=1`), {
      name: 'c1',
      subresource: 'proxy',
      rest: '/api/v1',
      query: '?x=1',
    });
    assert.deepEqual(matchClusterGatewayPath(`${P}c1?y=2`), {
      name: 'c1',
      subresource: '',
      rest: '',
      query: '?y=2',
    });
  });

  it('accepts DNS subdomain names with dots', () => {
    assert.equal(
      matchClusterGatewayPath(`${P}prod.eu-west.example.com/proxy/`)?.name,
      'prod.eu-west.example.com',
    );
  });

  it('rejects other URLs and invalid names', () => {
    assert.equal(matchClusterGatewayPath('/api/v1/pods'), undefined);
    assert.equal(matchClusterGatewayPath(P), undefined);
    assert.equal(matchClusterGatewayPath(`${P}Upper/proxy`), undefined);
  });

  it("matches no route for an empty segment after the name, as Kubernetes' router", () => {
    // The issue: `cluster2//proxy/...` served the object itself.
    assert.equal(matchClusterGatewayPath(`${P}c1//proxy/api/v1/secrets`), undefined);
    assert.equal(matchClusterGatewayPath(`${P}c1//health`), undefined);
    assert.equal(parseProxyPath(`${P}c1//proxy/api`), undefined);
    // Trailing slashes are ignored, as go-restful does.
    assert.deepEqual(matchClusterGatewayPath(`${P}c1/?a=1`), {
      name: 'c1',
      subresource: '',
      rest: '',
      query: '?a=1',
    });
    assert.deepEqual(matchClusterGatewayPath(`${P}c1//`), {
      name: 'c1',
      subresource: '',
      rest: '',
      query: '',
    });
    assert.equal(matchClusterGatewayPath(`${P}under_score/proxy`), undefined);
    assert.equal(matchClusterGatewayPath(`${P}-dash/proxy`), undefined);
    assert.equal(matchClusterGatewayPath(`${P}a..b/proxy`), undefined);
    assert.equal(matchClusterGatewayPath(`${P}${'a'.repeat(254)}/proxy`), undefined);
  });
});

describe('parseProxyPath', () => {
  it('keeps the raw query byte for byte, dryRun included', () => {
    const url = `${P}c1.example.com/proxy/api/v1/namespaces/default/configmaps?dryRun=All&fieldManager=kubectl-client-side-apply&fieldSelector=metadata.name%3Dx&a=1&a=2&empty=&flag`;
    assert.deepEqual(parseProxyPath(url), {
      cluster: 'c1.example.com',
      upstreamPath:
        '/api/v1/namespaces/default/configmaps?dryRun=All&fieldManager=kubectl-client-side-apply&fieldSelector=metadata.name%3Dx&a=1&a=2&empty=&flag',
    });
  });

  it('maps the bare proxy URL to the endpoint root', () => {
    assert.equal(parseProxyPath(`${P}c1/proxy`)?.upstreamPath, '');
    assert.equal(parseProxyPath(`${P}c1/proxy?timeout=32s`)?.upstreamPath, '?timeout=32s');
    assert.equal(parseProxyPath(`${P}c1/proxy/`)?.upstreamPath, '/');
  });

  it('ignores other subresources', () => {
    assert.equal(parseProxyPath(`${P}c1/health`), undefined);
    assert.equal(parseProxyPath(`${P}c1/proxyx/api`), undefined);
    assert.equal(parseProxyPath(`${P}c1`), undefined);
  });

  it('keeps percent-encoding of ordinary characters', () => {
    assert.equal(
      parseProxyPath(`${P}c1/proxy/api/v1/namespaces/a%20b`)?.upstreamPath,
      '/api/v1/namespaces/a%20b',
    );
  });
});

describe('cleanPath', () => {
  it('leaves ordinary paths alone', () => {
    assert.equal(cleanPath('/api/v1/pods'), '/api/v1/pods');
    assert.equal(cleanPath('/apis/apps/v1/'), '/apis/apps/v1/');
    assert.equal(cleanPath('/.well-known/openid-configuration'), '/.well-known/openid-configuration');
    assert.equal(cleanPath(''), '');
  });

  it('cannot climb out of the endpoint sub-path', () => {
    assert.equal(cleanPath('/../../k8s/clusters/other/api'), '/k8s/clusters/other/api');
    assert.equal(cleanPath('/api/../../x'), '/x');
    assert.equal(cleanPath('/%2e%2e/%2E%2E%2fx'), '/x');
    assert.equal(cleanPath('/..'), '/');
  });

  it('removes empty and dot segments, keeping a trailing slash', () => {
    assert.equal(cleanPath('//api//v1/./pods/'), '/api/v1/pods/');
    assert.equal(cleanPath('/api/v1/.'), '/api/v1/');
  });
});

describe('parseProxyPath with goQuery (--authorize-proxy-subpath)', () => {
  it('forwards only the query segments a Go server reads, each byte for byte', () => {
    const url = `${P}c1/proxy/api/v1/namespaces/default/secrets?fieldSelector=metadata.name=allowed,x=;&limit=5&a=%zz&b=%41+c&&`;
    assert.deepEqual(parseProxyPath(url, { goQuery: true }), {
      cluster: 'c1',
      upstreamPath: '/api/v1/namespaces/default/secrets?limit=5&b=%41+c',
    });
    assert.equal(parseProxyPath(`${P}c1/proxy/version?x=;`, { goQuery: true })?.upstreamPath, '/version');
    assert.equal(parseProxyPath(`${P}c1/proxy?x=;&y=1`, { goQuery: true })?.upstreamPath, '?y=1');
    // Without the flag nothing is authorized on the query: it goes through untouched.
    assert.equal(parseProxyPath(`${P}c1/proxy/version?x=;`)?.upstreamPath, '/version?x=;');
  });
});

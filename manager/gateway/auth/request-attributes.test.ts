import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { StatusError } from '../../../shared/kube/status.ts';
import {
  parseRequestInfo,
  proxiedRequestAttributes,
  proxiedRequestAttributesIfValid,
  requestAttributes,
} from './request-attributes.ts';

const base = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways';
const gateway = { group: 'cluster.core.oam.dev', version: 'v1alpha1', resource: 'clustergateways' };

describe('requests to the gateway', () => {
  test('collection reads are list, or watch when watch is set', () => {
    assert.deepEqual(requestAttributes('GET', base), { kind: 'resource', verb: 'list', ...gateway });
    for (const value of ['true', '1', 'yes', '']) {
      assert.equal(requestAttributes('GET', `${base}?watch=${value}`).verb, 'watch', `watch=${value}`);
    }
    for (const value of ['false', 'FALSE', '0']) {
      assert.equal(requestAttributes('GET', `${base}?watch=${value}`).verb, 'list', `watch=${value}`);
    }
    assert.equal(
      requestAttributes('GET', `/apis/cluster.core.oam.dev/v1alpha1/watch/clustergateways`).verb,
      'watch',
    );
  });

  test('a fieldSelector on metadata.name names the object of a list or watch', () => {
    assert.deepEqual(requestAttributes('GET', `${base}?watch=1&fieldSelector=metadata.name%3Dcluster-1`), {
      kind: 'resource',
      verb: 'watch',
      ...gateway,
      name: 'cluster-1',
    });
    assert.equal(
      (
        requestAttributes('GET', `${base}?fieldSelector=status.healthy=true,metadata.name==c2`) as {
          name?: string;
        }
      ).name,
      'c2',
    );
    for (const selector of ['metadata.name!=c', 'metadata.name=a/b', 'metadata.name=..']) {
      const attrs = requestAttributes('GET', `${base}?fieldSelector=${encodeURIComponent(selector)}`);
      assert.equal((attrs as { name?: string }).name, undefined, selector);
    }
  });

  test('object verbs follow the HTTP method; a nameless DELETE is deletecollection', () => {
    assert.deepEqual(requestAttributes('GET', `${base}/cluster-1`), {
      kind: 'resource',
      verb: 'get',
      ...gateway,
      name: 'cluster-1',
    });
    assert.equal(requestAttributes('POST', base).verb, 'create');
    assert.equal(requestAttributes('PUT', `${base}/c`).verb, 'update');
    assert.equal(requestAttributes('PATCH', `${base}/c`).verb, 'patch');
    assert.equal(requestAttributes('DELETE', `${base}/c`).verb, 'delete');
    assert.equal(requestAttributes('DELETE', base).verb, 'deletecollection');
  });

  test('proxy is a subresource whose verb comes from the method, as for connect requests', () => {
    const expected: Record<string, string> = {
      GET: 'get',
      HEAD: 'get',
      POST: 'create',
      PUT: 'update',
      PATCH: 'patch',
      DELETE: 'delete',
      // requestinfo.go maps every other method to the empty verb, which
      // only a "*" RBAC rule matches; the Go original behaves the same.
      OPTIONS: '',
    };
    for (const [method, verb] of Object.entries(expected)) {
      assert.deepEqual(
        requestAttributes(method, `${base}/cluster-1/proxy/api/v1/namespaces/default/pods?watch=true`),
        { kind: 'resource', verb, ...gateway, subresource: 'proxy', name: 'cluster-1' },
        method,
      );
    }
    assert.equal(requestAttributes('GET', `${base}/cluster-1/proxy`).verb, 'get');
  });

  test('health is a subresource too', () => {
    assert.deepEqual(requestAttributes('PUT', `${base}/cluster-1/health`), {
      kind: 'resource',
      verb: 'update',
      ...gateway,
      subresource: 'health',
      name: 'cluster-1',
    });
  });

  test('discovery, openapi and health endpoints are non-resource requests', () => {
    for (const path of [
      '/apis',
      '/apis/cluster.core.oam.dev',
      '/apis/cluster.core.oam.dev/v1alpha1',
      '/openapi/v2',
      '/healthz',
      '/',
    ]) {
      assert.deepEqual(requestAttributes('GET', path), { kind: 'nonResource', verb: 'get', path });
    }
    assert.deepEqual(requestAttributes('HEAD', '/livez?verbose'), {
      kind: 'nonResource',
      verb: 'head',
      path: '/livez',
    });
  });

  test('the path is matched decoded, and malformed escapes are a 400', () => {
    assert.equal((requestAttributes('GET', `${base}/my%2Dcluster`) as { name?: string }).name, 'my-cluster');
    assert.throws(
      () => requestAttributes('GET', `${base}/%E0%A4%A`),
      (err) => err instanceof StatusError && err.code === 400,
    );
    assert.throws(
      () => requestAttributes('GET', '/apis/g/v1/watch'),
      (err) => err instanceof StatusError && err.code === 400,
    );
  });
});

describe('proxied request paths (--authorize-proxy-subpath)', () => {
  test('core and grouped resources, namespaced or not', () => {
    assert.deepEqual(
      proxiedRequestAttributes('GET', '/api/v1/namespaces/default/pods/web-0/log', 'follow=true'),
      {
        kind: 'resource',
        verb: 'get',
        group: '',
        version: 'v1',
        resource: 'pods',
        subresource: 'log',
        name: 'web-0',
        namespace: 'default',
      },
    );
    assert.deepEqual(proxiedRequestAttributes('GET', '/apis/apps/v1/deployments'), {
      kind: 'resource',
      verb: 'list',
      group: 'apps',
      version: 'v1',
      resource: 'deployments',
    });
    assert.deepEqual(
      proxiedRequestAttributes('GET', 'api/v1/namespaces/kube-system/configmaps', 'watch=true'),
      {
        kind: 'resource',
        verb: 'watch',
        group: '',
        version: 'v1',
        resource: 'configmaps',
        namespace: 'kube-system',
      },
    );
    assert.deepEqual(
      proxiedRequestAttributes('POST', '/api/v1/namespaces/default/pods/web-0/exec', 'command=sh'),
      {
        kind: 'resource',
        verb: 'create',
        group: '',
        version: 'v1',
        resource: 'pods',
        subresource: 'exec',
        name: 'web-0',
        namespace: 'default',
      },
    );
  });

  test('namespaces themselves and their subresources', () => {
    assert.deepEqual(proxiedRequestAttributes('GET', '/api/v1/namespaces/default'), {
      kind: 'resource',
      verb: 'get',
      group: '',
      version: 'v1',
      resource: 'namespaces',
      name: 'default',
      namespace: 'default',
    });
    assert.deepEqual(proxiedRequestAttributes('PUT', '/api/v1/namespaces/default/finalize'), {
      kind: 'resource',
      verb: 'update',
      group: '',
      version: 'v1',
      resource: 'namespaces',
      subresource: 'finalize',
      name: 'default',
      namespace: 'default',
    });
    assert.equal(
      proxiedRequestAttributes('DELETE', '/api/v1/namespaces/default/pods').verb,
      'deletecollection',
    );
  });

  test('the legacy proxy verb takes no subresource', () => {
    const info = parseRequestInfo('GET', '/api/v1/proxy/namespaces/ns/services/web/some/path', new Map());
    assert.equal(info.verb, 'proxy');
    assert.equal(info.resource, 'services');
    assert.equal(info.name, 'web');
    assert.equal(info.subresource, '');
  });

  test('non-resource paths on the managed cluster', () => {
    assert.deepEqual(proxiedRequestAttributes('GET', '/version'), {
      kind: 'nonResource',
      verb: 'get',
      path: '/version',
    });
    assert.deepEqual(proxiedRequestAttributes('GET', '/apis/apps/v1'), {
      kind: 'nonResource',
      verb: 'get',
      path: '/apis/apps/v1',
    });
  });
});

describe('proxied queries are read as the managed cluster (Go) reads them', () => {
  const secrets = '/api/v1/namespaces/default/secrets';
  const named = (query: string) =>
    (proxiedRequestAttributes('GET', `${secrets}?${query}`) as { name?: string }).name;

  test('a segment with a ";" is no parameter: the selector it carries names nothing', () => {
    // The exploit: URLSearchParams read "the secret allowed", Go no
    // fieldSelector at all, and the cluster returned every Secret.
    assert.deepEqual(proxiedRequestAttributes('GET', `${secrets}?fieldSelector=metadata.name=allowed,x=;`), {
      kind: 'resource',
      verb: 'list',
      group: '',
      version: 'v1',
      resource: 'secrets',
      namespace: 'default',
    });
    assert.equal(named('fieldSelector=metadata.name%3Dallowed;x'), undefined);
    assert.equal(named('a=1;&fieldSelector=metadata.name%3Dallowed'), 'allowed');
  });

  test('a segment with a malformed escape is no parameter, and the next value counts', () => {
    assert.equal(named('fieldSelector=metadata.name=allowed%zz'), undefined);
    assert.equal(named('fieldSelector=metadata.name=allowed%'), undefined);
    assert.equal(named('fieldSelector%=x&fieldSelector=metadata.name=b'), 'b');
    assert.equal(named('fieldSelector=metadata.name=%61llowed'), 'allowed');
    assert.equal(named('fieldSelector=metadata.name=a+b'), 'a b');
  });

  test('only the first fieldSelector counts, as RequiresExactMatch on its sorted terms', () => {
    assert.equal(named('fieldSelector=metadata.name=a&fieldSelector=metadata.name=b'), 'a');
    assert.equal(named('fieldSelector=metadata.name=zz,metadata.name=aa'), 'aa');
    assert.equal(named('fieldSelector=metadata.name!=x,metadata.name==y'), 'y');
    // No trimming: " metadata.name" is another field.
    assert.equal(named('fieldSelector=%20metadata.name=allowed'), undefined);
    // Values unescape only \\, \, and \=; anything else fails the whole selector.
    assert.equal(named('fieldSelector=metadata.name=a\\,b'), 'a,b');
    assert.equal(named('fieldSelector=metadata.name=a\\x'), undefined);
    assert.equal(named('fieldSelector=metadata.name=a=b'), undefined);
    assert.equal(named('fieldSelector=metadata.name=a/b'), undefined);
  });

  test('list options that do not decode name nothing, as in requestinfo.go', () => {
    assert.equal(named('fieldSelector=metadata.name=a&limit=500'), 'a');
    assert.equal(named('fieldSelector=metadata.name=a&limit=abc'), undefined);
    assert.equal(named('fieldSelector=metadata.name=a&timeoutSeconds=99999999999999999999'), undefined);
    assert.equal(named('fieldSelector=metadata.name=a&labelSelector=app%20in%20(x'), undefined);
    assert.equal(named('fieldSelector=metadata.name=a&labelSelector=app%3Dx'), 'a');
  });

  test('watch is any value but "0" and "false" under Go\'s case folding', () => {
    const verb = (query: string) => proxiedRequestAttributes('GET', `${secrets}?${query}`).verb;
    assert.equal(verb('watch=1'), 'watch');
    assert.equal(verb('watch='), 'watch');
    assert.equal(verb('watch=FALSE'), 'list');
    // strings.EqualFold folds U+017F (long s) to "s".
    assert.equal(verb('watch=fal%C5%BFe'), 'list');
    // ...but the fallback after a decoding error lower-cases ASCII only.
    assert.equal(verb('watch=fal%C5%BFe&limit=x'), 'watch');
    assert.equal(verb('watch=false;'), 'list');
    assert.equal(verb('watch=%zz&watch=1'), 'watch');
  });

  test('bytes that are not UTF-8 become U+FFFD each, as Go writes them in JSON', () => {
    assert.equal(named('fieldSelector=metadata.name=a%E2%82'), 'a\uFFFD\uFFFD');
    assert.equal(named('fieldSelector=metadata.name=%C3%A9'), '\u00e9');
  });

  test('the path is decoded once, as URL.Path', () => {
    assert.deepEqual(proxiedRequestAttributes('GET', '/api/v1/namespaces/default/secrets/a%252Fb'), {
      kind: 'resource',
      verb: 'get',
      group: '',
      version: 'v1',
      resource: 'secrets',
      name: 'a%2Fb',
      namespace: 'default',
    });
    assert.equal(
      (proxiedRequestAttributes('GET', '/api/v1/namespaces/default/secrets/%FF') as { name?: string }).name,
      '\uFFFD',
    );
    assert.equal(
      (proxiedRequestAttributes('GET', '/api/v1/namespaces/default/secrets;x/a') as { resource?: string })
        .resource,
      'secrets;x',
    );
  });
});

test('for metrics, a proxied path Go would refuse gives no attributes instead of throwing', () => {
  assert.throws(() => proxiedRequestAttributes('GET', '/api/v1/watch'), StatusError);
  assert.equal(proxiedRequestAttributesIfValid('GET', '/api/v1/watch'), undefined);
  assert.equal(proxiedRequestAttributesIfValid('GET', '/api/v1/pods')?.verb, 'list');
});

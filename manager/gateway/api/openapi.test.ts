import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openApiResponse, openApiV2, openApiV3GroupVersion, openApiV3Index } from './openapi.ts';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk the JSON documents freely
type Json = Record<string, any>;
const gw = 'com.github.oam-dev.cluster-gateway.pkg.apis.cluster.v1alpha1.';

/** Every property of every schema, recursively, must have a description (kubectl explain shows it). */
function undescribed(schemas: Json): string[] {
  const missing: string[] = [];
  const walk = (schema: Json, at: string) => {
    for (const [name, prop] of Object.entries<Json>(schema.properties ?? {})) {
      if (!prop.description) missing.push(`${at}.${name}`);
      walk(prop, `${at}.${name}`);
    }
  };
  for (const [name, schema] of Object.entries<Json>(schemas)) {
    if (!schema.description) missing.push(name);
    walk(schema, name);
  }
  return missing;
}

/** Every $ref must resolve inside the document. */
function danglingRefs(doc: Json, prefix: string, schemas: Json): string[] {
  const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"([^"]+)"/g)].map((m) => m[1] ?? '');
  return refs.filter((ref) => !ref.startsWith(prefix) || !(ref.slice(prefix.length) in schemas));
}

test('v3 group-version document: GVK extensions, allOf references, every field described', () => {
  const doc = openApiV3GroupVersion() as Json;
  const schemas = doc.components.schemas;
  assert.deepEqual(schemas[`${gw}ClusterGateway`]['x-kubernetes-group-version-kind'], [
    { group: 'cluster.core.oam.dev', kind: 'ClusterGateway', version: 'v1alpha1' },
  ]);
  assert.deepEqual(
    schemas[`${gw}ClusterGatewayList`]['x-kubernetes-group-version-kind'][0].kind,
    'ClusterGatewayList',
  );
  assert.deepEqual(schemas[`${gw}ClusterGateway`].properties.spec.allOf, [
    { $ref: `#/components/schemas/${gw}ClusterGatewaySpec` },
  ]);
  assert.deepEqual(Object.keys(schemas[`${gw}ClusterEndpointConst`].properties), [
    'address',
    'caBundle',
    'insecure',
    'proxy-url',
  ]);
  assert.deepEqual(Object.keys(schemas[`${gw}ClusterAccessCredential`].properties), ['type']);
  assert.deepEqual(undescribed(schemas), []);
  assert.deepEqual(danglingRefs(doc, '#/components/schemas/', schemas), []);
  assert.ok(doc.paths['/apis/cluster.core.oam.dev/v1alpha1/clustergateways'].get);
  assert.equal(
    doc.paths['/apis/cluster.core.oam.dev/v1alpha1/clustergateways/{name}/proxy/{path}'].post[
      'x-kubernetes-action'
    ],
    'connect',
  );
  assert.doesNotMatch(JSON.stringify(doc), /serviceAccountToken|privateKey/);
});

test('v2 document: definitions with $ref and every field described', () => {
  const doc = openApiV2() as Json;
  assert.equal(doc.swagger, '2.0');
  assert.equal(
    doc.definitions[`${gw}ClusterGateway`].properties.metadata.$ref,
    '#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta',
  );
  assert.deepEqual(undescribed(doc.definitions), []);
  assert.deepEqual(danglingRefs(doc, '#/definitions/', doc.definitions), []);
  const ids = Object.values<Json>(doc.paths).flatMap((item) =>
    Object.values<Json>(item)
      .map((op) => op.operationId)
      .filter(Boolean),
  );
  assert.equal(new Set(ids).size, ids.length, 'operationIds are unique');
});

test('v3 index points at a hash-addressed document; stale hashes redirect; ETags give 304', () => {
  const index = openApiV3Index();
  const url = index.paths['apis/cluster.core.oam.dev/v1alpha1']?.serverRelativeURL ?? '';
  assert.match(url, /^\/openapi\/v3\/apis\/cluster\.core\.oam\.dev\/v1alpha1\?hash=[0-9A-F]{128}$/);
  const hash = new URL(url, 'https://x').searchParams.get('hash') ?? '';

  const fresh = openApiResponse('/openapi/v3/apis/cluster.core.oam.dev/v1alpha1', {
    query: new URLSearchParams({ hash }),
    now: 0,
  });
  assert.equal(fresh?.status, 200);
  assert.equal(fresh?.headers['cache-control'], 'public, immutable');
  assert.equal(fresh?.headers.etag, `"${hash}"`);
  assert.equal(fresh?.headers.expires, new Date(365 * 24 * 3600 * 1000).toUTCString());

  const stale = openApiResponse('/openapi/v3/apis/cluster.core.oam.dev/v1alpha1', {
    query: new URLSearchParams({ hash: 'OLD' }),
  });
  assert.equal(stale?.status, 301);
  assert.equal(stale?.headers.location, url);

  assert.equal(
    openApiResponse('/openapi/v3/apis/cluster.core.oam.dev/v1alpha1', { ifNoneMatch: `"${hash}"` })?.status,
    304,
  );
  const v2 = openApiResponse('/openapi/v2');
  assert.equal(v2?.status, 200);
  assert.equal(openApiResponse('/openapi/v2', { ifNoneMatch: v2?.headers.etag ?? '' })?.status, 304);
  assert.deepEqual(JSON.parse(openApiResponse('/openapi/v3')?.body ?? ''), index);
  assert.equal(openApiResponse('/openapi/v3/apis/apps/v1'), undefined);
});

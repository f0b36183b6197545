import assert from 'node:assert/strict';
import { test } from 'node:test';
import { discoveryResponse, wantsAggregatedDiscovery } from './discovery.ts';

const aggregatorAccept =
  'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList';

const body = (path: string, accept?: string) =>
  JSON.parse(discoveryResponse(path, accept ? { accept } : {})?.body ?? 'null');

test('aggregated discovery for the aggregator: GVK content type, resources and subresources', () => {
  const response = discoveryResponse('/apis', { accept: aggregatorAccept });
  assert.equal(response?.status, 200);
  assert.equal(
    response?.headers['content-type'],
    'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList',
  );
  const doc = JSON.parse(response?.body ?? '');
  assert.equal(doc.kind, 'APIGroupDiscoveryList');
  assert.equal(doc.apiVersion, 'apidiscovery.k8s.io/v2');
  const [groupDoc] = doc.items;
  assert.equal(groupDoc.metadata.name, 'cluster.core.oam.dev');
  const [versionDoc] = groupDoc.versions;
  assert.equal(versionDoc.version, 'v1alpha1');
  assert.equal(versionDoc.freshness, 'Current');
  assert.deepEqual(versionDoc.resources, [
    {
      resource: 'clustergateways',
      responseKind: { group: 'cluster.core.oam.dev', version: 'v1alpha1', kind: 'ClusterGateway' },
      scope: 'Cluster',
      singularResource: 'clustergateway',
      verbs: ['get', 'list', 'watch'],
      subresources: [
        {
          subresource: 'health',
          responseKind: { group: 'cluster.core.oam.dev', version: 'v1alpha1', kind: 'ClusterGateway' },
          verbs: ['get', 'patch', 'update'],
        },
        {
          subresource: 'proxy',
          responseKind: {
            group: 'cluster.core.oam.dev',
            version: 'v1alpha1',
            kind: 'ClusterGatewayProxyOptions',
          },
          verbs: ['create', 'delete', 'get', 'patch', 'update'],
        },
      ],
    },
  ]);
});

test('aggregated discovery is cacheable by ETag, and v2beta1 is served when preferred', () => {
  const first = discoveryResponse('/apis', { accept: aggregatorAccept });
  const etag = first?.headers.etag ?? '';
  assert.match(etag, /^"[0-9a-f]{32}"$/);
  assert.deepEqual(discoveryResponse('/apis', { accept: aggregatorAccept, ifNoneMatch: etag }), {
    status: 304,
    headers: { etag },
    body: '',
  });
  const beta = discoveryResponse('/apis', {
    accept: 'application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList',
  });
  assert.equal(
    beta?.headers['content-type'],
    'application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList',
  );
  assert.equal(JSON.parse(beta?.body ?? '').apiVersion, 'apidiscovery.k8s.io/v2beta1');
  assert.equal(wantsAggregatedDiscovery('application/json, ' + aggregatorAccept), undefined);
});

test('legacy documents: APIGroupList, APIGroup, APIResourceList', () => {
  const groupVersion = { groupVersion: 'cluster.core.oam.dev/v1alpha1', version: 'v1alpha1' };
  assert.deepEqual(body('/apis', 'application/json'), {
    kind: 'APIGroupList',
    apiVersion: 'v1',
    groups: [{ name: 'cluster.core.oam.dev', versions: [groupVersion], preferredVersion: groupVersion }],
  });
  assert.deepEqual(body('/apis/cluster.core.oam.dev/'), {
    kind: 'APIGroup',
    apiVersion: 'v1',
    name: 'cluster.core.oam.dev',
    versions: [groupVersion],
    preferredVersion: groupVersion,
  });
  assert.deepEqual(body('/apis/cluster.core.oam.dev/v1alpha1'), {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: 'cluster.core.oam.dev/v1alpha1',
    resources: [
      {
        name: 'clustergateways',
        singularName: 'clustergateway',
        namespaced: false,
        kind: 'ClusterGateway',
        verbs: ['get', 'list', 'watch'],
      },
      {
        name: 'clustergateways/health',
        singularName: '',
        namespaced: false,
        kind: 'ClusterGateway',
        verbs: ['get', 'patch', 'update'],
      },
      {
        name: 'clustergateways/proxy',
        singularName: '',
        namespaced: false,
        kind: 'ClusterGatewayProxyOptions',
        verbs: ['create', 'delete', 'get', 'patch', 'update'],
      },
    ],
  });
  assert.equal(discoveryResponse('/apis/cluster.core.oam.dev/v1alpha1/clustergateways'), undefined);
  assert.equal(discoveryResponse('/api'), undefined);
});

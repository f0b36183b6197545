import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dump, load } from 'js-yaml';
import { contextName, gatewayKubeconfig, gatewayServer, KubeconfigGenerationError } from './generate.ts';

const hubDoc = {
  apiVersion: 'v1',
  kind: 'Config',
  'current-context': 'hub',
  clusters: [
    {
      name: 'hub-cluster',
      cluster: {
        server: 'https://hub.example:6443/',
        'certificate-authority': 'ca.crt',
        'tls-server-name': 'kubernetes.default',
        'proxy-url': 'http://proxy.example:3128',
      },
    },
    { name: 'other', cluster: { server: 'https://other.example' } },
  ],
  users: [
    {
      name: 'alice',
      user: {
        'client-certificate': 'certs/alice.crt',
        'client-key': '/abs/alice.key',
        tokenFile: 'token',
        exec: { apiVersion: 'client.authentication.k8s.io/v1', command: './bin/login', args: ['--x'] },
        as: 'bob',
      },
    },
    { name: 'someone-else', user: { token: 'secret-of-someone-else' } },
  ],
  contexts: [
    { name: 'hub', context: { cluster: 'hub-cluster', user: 'alice', namespace: 'team' } },
    { name: 'other', context: { cluster: 'other', user: 'someone-else' } },
  ],
};

type Doc = {
  'current-context': string;
  clusters: { name: string; cluster: Record<string, unknown> }[];
  users?: { name: string; user: Record<string, unknown> }[];
  contexts: { name: string; context: Record<string, unknown> }[];
};

test('the hub cluster entry with the proxy server; the user entry as it is, its relative paths made absolute', () => {
  const { kubeconfig, context } = gatewayKubeconfig(
    [{ file: '/home/alice/.kube/config', text: dump(hubDoc) }],
    'c1',
  );
  const doc = load(kubeconfig) as Doc;
  assert.equal(context, 'hub@c1');
  assert.deepEqual(doc, {
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'hub@c1',
    clusters: [
      {
        name: 'hub@c1',
        cluster: {
          server: 'https://hub.example:6443/apis/cluster.core.oam.dev/v1alpha1/clustergateways/c1/proxy',
          'certificate-authority': '/home/alice/.kube/ca.crt',
          'tls-server-name': 'kubernetes.default',
          'proxy-url': 'http://proxy.example:3128',
        },
      },
    ],
    users: [
      {
        name: 'alice',
        user: {
          'client-certificate': '/home/alice/.kube/certs/alice.crt',
          'client-key': '/abs/alice.key',
          tokenFile: '/home/alice/.kube/token',
          exec: {
            apiVersion: 'client.authentication.k8s.io/v1',
            command: '/home/alice/.kube/bin/login',
            args: ['--x'],
          },
          as: 'bob',
        },
      },
    ],
    contexts: [{ name: 'hub@c1', context: { cluster: 'hub@c1', user: 'alice' } }],
  });
  assert.doesNotMatch(kubeconfig, /secret-of-someone-else/, 'no other credential of the file');
});

test('inline data and bare exec commands (looked up in PATH) are copied unchanged', () => {
  const doc = structuredClone(hubDoc);
  doc.users[0] = {
    name: 'alice',
    user: {
      'client-certificate-data': 'Q0VSVA==',
      'client-key-data': 'S0VZ',
      exec: { command: 'kubelogin' },
    } as never,
  };
  const out = load(gatewayKubeconfig([{ file: '/k/config', text: dump(doc) }], 'c1').kubeconfig) as Doc;
  assert.deepEqual(out.users?.[0]?.user, {
    'client-certificate-data': 'Q0VSVA==',
    'client-key-data': 'S0VZ',
    exec: { command: 'kubelogin' },
  });
});

test('--context picks another context; KUBECONFIG lists merge as client-go merges them (first definition wins)', () => {
  const second = {
    'current-context': 'ignored',
    clusters: [{ name: 'other', cluster: { server: 'https://shadowed.example' } }],
    users: [{ name: 'extra', user: { token: 't' } }],
    contexts: [{ name: 'third', context: { cluster: 'other', user: 'extra' } }],
  };
  const sources = [
    { file: '/missing', text: undefined },
    { file: '/a/config', text: dump(hubDoc) },
    { file: '/b/config', text: dump(second) },
  ];
  const viaOther = load(gatewayKubeconfig(sources, 'c2', 'other').kubeconfig) as Doc;
  assert.equal(viaOther['current-context'], 'other@c2');
  assert.equal(viaOther.clusters[0]?.cluster.server, `https://other.example${gatewayServer('', 'c2')}`);
  assert.deepEqual(viaOther.users, [{ name: 'someone-else', user: { token: 'secret-of-someone-else' } }]);
  const viaThird = load(gatewayKubeconfig(sources, 'c2', 'third').kubeconfig) as Doc;
  assert.equal(viaThird.users?.[0]?.name, 'extra', 'a context from the second file');
  assert.equal(viaThird.clusters[0]?.cluster.server, `https://other.example${gatewayServer('', 'c2')}`);
  const current = load(gatewayKubeconfig(sources, 'c2').kubeconfig) as Doc;
  assert.equal(current['current-context'], 'hub@c2', "the first file's current-context");
});

test('a hub server with a path keeps it; the cluster name is escaped', () => {
  assert.equal(
    gatewayServer('https://rancher.example/k8s/clusters/c-1', 'a.b'),
    'https://rancher.example/k8s/clusters/c-1/apis/cluster.core.oam.dev/v1alpha1/clustergateways/a.b/proxy',
  );
  assert.equal(contextName('hub', 'a.b'), 'hub@a.b');
});

test('no such context, no current context, no server: a clear error', () => {
  const file = { file: '/k', text: dump(hubDoc) };
  assert.throws(() => gatewayKubeconfig([file], 'c1', 'nope'), KubeconfigGenerationError);
  assert.throws(
    () => gatewayKubeconfig([{ file: '/k', text: dump({ ...hubDoc, 'current-context': undefined }) }], 'c1'),
    /no current context/,
  );
  const noServer = { ...hubDoc, clusters: [{ name: 'hub-cluster', cluster: {} }] };
  assert.throws(
    () => gatewayKubeconfig([{ file: '/k', text: dump(noServer) }], 'c1'),
    /has no cluster with a server/,
  );
  assert.throws(
    () => gatewayKubeconfig([{ file: '/k', text: 'clusters: [unclosed' }], 'c1'),
    /not valid YAML/,
  );
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  expandEnvReferences,
  MissingReference,
  type PodTemplate,
  rewritePaths,
  rewritePorts,
  templateHash,
  translatePod,
} from './pod-spec.ts';

const template: PodTemplate = {
  spec: {
    serviceAccountName: 'agent',
    containers: [
      {
        name: 'agent',
        image: 'cluster-gateway:dev',
        command: ['node', '/app/agent/main.ts'],
        args: ['--hub-kubeconfig=/etc/hub/kubeconfig', '--cluster-name=$(CLUSTER)'],
        env: [
          { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
          { name: 'CA', value: '/etc/hub/ca.crt' },
          { name: 'MODE', valueFrom: { configMapKeyRef: { name: 'settings', key: 'mode' } } },
        ],
        volumeMounts: [{ name: 'hub', mountPath: '/etc/hub' }],
      },
    ],
    volumes: [{ name: 'hub', secret: { secretName: 'agent-hub-kubeconfig' } }],
  },
};

const pod = { name: 'agent-local', namespace: 'addon-ns', nodeName: 'c1-local', serviceAccountName: 'agent' };

test('translates command, env, field refs and volumes, rewriting mount and image paths', () => {
  const spec = translatePod({
    template,
    pod,
    objects: {
      secrets: new Map([['agent-hub-kubeconfig', { kubeconfig: 'KC', 'ca.crt': 'CA' }]]),
      configMaps: new Map([['settings', { mode: 'fast' }]]),
    },
    podDir: '/state/pod',
    pathMap: { '/app': '/repo' },
    nodeExecutable: '/usr/bin/node24',
  });
  assert.equal(spec.command, '/usr/bin/node24');
  assert.deepEqual(spec.args, [
    '/repo/agent/main.ts',
    '--hub-kubeconfig=/state/pod/volumes/hub/kubeconfig',
    '--cluster-name=$(CLUSTER)',
  ]);
  assert.equal(spec.env.POD_NAMESPACE, 'addon-ns');
  assert.equal(spec.env.CA, '/state/pod/volumes/hub/ca.crt');
  assert.equal(spec.env.MODE, 'fast');
  assert.deepEqual(
    [...(spec.volumes.get('hub') ?? [])],
    [
      ['kubeconfig', 'KC'],
      ['ca.crt', 'CA'],
    ],
  );
});

test('a missing Secret is reported as a reference to wait for, not a failure', () => {
  assert.throws(
    () =>
      translatePod({
        template,
        pod,
        objects: { secrets: new Map(), configMaps: new Map([['settings', { mode: 'x' }]]) },
        podDir: '/p',
        pathMap: {},
        nodeExecutable: 'node',
      }),
    (err: unknown) =>
      err instanceof MissingReference && /agent-hub-kubeconfig does not exist yet/.test(err.message),
  );
});

test('rewritePaths only rewrites whole path prefixes', () => {
  const mounts = [{ mountPath: '/etc/hub', localPath: '/x' }];
  assert.equal(rewritePaths('/etc/hub/kubeconfig', mounts, {}), '/x/kubeconfig');
  assert.equal(rewritePaths('--a=/etc/hub', mounts, {}), '--a=/x');
  assert.equal(rewritePaths('/etc/hubble/file', mounts, {}), '/etc/hubble/file');
  assert.equal(rewritePaths('/other/etc/hub', mounts, {}), '/other/etc/hub');
});

test('rewritePaths rewrites each path once, even when a result starts with another mount path', () => {
  // A repository under /tmp and an emptyDir mounted at /tmp: the rewritten TLS path must not be rewritten again.
  const mounts = [
    { mountPath: '/var/run/tls', localPath: '/tmp/repo/pods/gw/volumes/tls' },
    { mountPath: '/tmp', localPath: '/tmp/repo/pods/gw/volumes/tmp' },
  ];
  const pathMap = { '/app': '/tmp/repo' };
  assert.equal(
    rewritePaths('--tls-cert-file=/var/run/tls/tls.crt', mounts, pathMap),
    '--tls-cert-file=/tmp/repo/pods/gw/volumes/tls/tls.crt',
  );
  assert.equal(
    rewritePaths('/app/manager/gateway/main.ts', mounts, pathMap),
    '/tmp/repo/manager/gateway/main.ts',
  );
  assert.equal(rewritePaths('/tmp/scratch', mounts, pathMap), '/tmp/repo/pods/gw/volumes/tmp/scratch');
});

test('the template hash changes with the template only', () => {
  const copy = structuredClone(template);
  assert.equal(templateHash(copy), templateHash(template));
  copy.spec.containers[0]!.args = ['--changed'];
  assert.notEqual(templateHash(copy), templateHash(template));
});

test('remapped ports: declared container ports are rewritten where a value ends with them', () => {
  const ports = new Map([[8080, 23456]]);
  assert.equal(rewritePorts('--port=8080', ports), '--port=23456');
  assert.equal(rewritePorts('0.0.0.0:8080', ports), '0.0.0.0:23456');
  assert.equal(rewritePorts('8080', ports), '23456');
  assert.equal(rewritePorts('--port=80801', ports), '--port=80801');
  assert.equal(rewritePorts('--renew-interval=5', ports), '--renew-interval=5');
  assert.equal(rewritePorts('/etc/8080/x', ports), '/etc/8080/x');
  const spec = translatePod({
    template: {
      spec: {
        containers: [
          {
            name: 'agent',
            command: ['node', 'main.ts', '--port=8080'],
            env: [{ name: 'PORT', value: '8080' }],
            ports: [{ name: 'http', containerPort: 8080 }],
          },
        ],
      },
    },
    pod,
    objects: { secrets: new Map(), configMaps: new Map() },
    podDir: '/state/pod',
    pathMap: {},
    nodeExecutable: 'node',
    portMap: ports,
  });
  assert.deepEqual(spec.args, ['main.ts', '--port=23456']);
  assert.equal(spec.env.PORT, '23456');
  assert.equal(spec.ports.get(8080), 23456);
});

test('$(VAR) in args is the container env var, as the kubelet expands it; then ports are remapped', () => {
  assert.equal(expandEnvReferences('$(A):$(B)', { A: 'x', B: 'y' }), 'x:y');
  assert.equal(expandEnvReferences('$(MISSING)', {}), '$(MISSING)', 'undefined: left as written');
  assert.equal(expandEnvReferences('$$(A) $$', { A: 'x' }), '$(A) $', '$$ escapes');
  const spec = translatePod({
    template: {
      spec: {
        containers: [
          {
            name: 'gateway',
            command: ['node', 'main.ts', '--peer-address=$(POD_IP):9444'],
            env: [{ name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }],
            ports: [{ name: 'peer', containerPort: 9444 }],
          },
        ],
      },
    },
    pod,
    objects: { secrets: new Map(), configMaps: new Map() },
    podDir: '/state/pod',
    pathMap: {},
    nodeExecutable: 'node',
    portMap: new Map([[9444, 30001]]),
  });
  assert.deepEqual(spec.args, ['main.ts', '--peer-address=127.0.0.1:30001']);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MissingReference, type PodTemplate, rewritePaths, templateHash, translatePod } from './pod-spec.ts';

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

test('the template hash changes with the template only', () => {
  const copy = structuredClone(template);
  assert.equal(templateHash(copy), templateHash(template));
  copy.spec.containers[0]!.args = ['--changed'];
  assert.notEqual(templateHash(copy), templateHash(template));
});

/**
 * The process runner (hack/runner) plays the kubelet for this project's
 * Deployments: command, env, Secret volumes and the ServiceAccount identity
 * of the pod template reach a local process, and readiness reaches the
 * Deployment's status.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { freePort } from '../hack/localenv/ports.ts';
import { Supervisor } from '../hack/localenv/supervisor.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import { DeploymentRunner } from '../hack/runner/deployment-runner.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import { e2eStateDir, environmentState, hubClient } from './support/environment.ts';

const ns = 'runner-e2e';
let hub: KubeClient;
let supervisor: Supervisor;
let runner: DeploymentRunner;
let port: number;

// A tiny server: reports the mounted Secret, an env value and who it is on the API.
const program = `
const http = require('node:http');
const fs = require('node:fs');
http.createServer(async (req, res) => {
  const secret = fs.readFileSync(process.env.SECRET_FILE, 'utf8');
  res.end(JSON.stringify({ secret, namespace: process.env.POD_NAMESPACE, kubeconfig: process.env.KUBECONFIG }));
}).listen(Number(process.env.PORT), '127.0.0.1');
`;

before(async () => {
  hub = await hubClient();
  port = await freePort();
  const env = environmentState();
  const stateDir = path.join(e2eStateDir, 'runner-test');
  supervisor = new Supervisor(stateDir);
  runner = new DeploymentRunner({
    clusterName: 'hub',
    client: hub,
    server: env.hub.server,
    caCert: readFileSync(path.join(env.stateDir, 'hub', 'ca.crt'), 'utf8'),
    supervisor,
    stateDir,
    images: ['runner-e2e/'],
    pathMap: {},
    intervalMs: 300,
  });
  await hub.apply(
    `/api/v1/namespaces/${ns}`,
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
    'e2e',
  );
  await hub.apply(
    `/api/v1/namespaces/${ns}/serviceaccounts/probe`,
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'probe', namespace: ns } },
    'e2e',
  );
  await hub.apply(
    `/api/v1/namespaces/${ns}/secrets/probe-secret`,
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'probe-secret', namespace: ns },
      stringData: { value: 'v1' },
    },
    'e2e',
  );
  runner.start();
});

after(async () => {
  await runner.stop();
  await supervisor.stop();
  await hub.delete(`/api/v1/namespaces/${ns}`);
  hub.close();
});

async function fetchProbe(): Promise<{ secret: string; namespace: string; kubeconfig: string }> {
  const res = await fetch(`http://127.0.0.1:${port}/`);
  return (await res.json()) as { secret: string; namespace: string; kubeconfig: string };
}

test('a Deployment runs as a local process with its env, volumes and identity, and reports ready', async () => {
  await hub.apply(
    `/apis/apps/v1/namespaces/${ns}/deployments/probe`,
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'probe', namespace: ns },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'probe' } },
        template: {
          metadata: { labels: { app: 'probe' } },
          spec: {
            serviceAccountName: 'probe',
            containers: [
              {
                name: 'probe',
                image: 'runner-e2e/probe:1',
                command: ['node', '-e', program],
                env: [
                  { name: 'PORT', value: String(port) },
                  { name: 'SECRET_FILE', value: '/etc/probe/value' },
                  { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
                ],
                ports: [{ name: 'http', containerPort: port }],
                readinessProbe: { httpGet: { path: '/', port: 'http' } },
                volumeMounts: [{ name: 'secret', mountPath: '/etc/probe' }],
              },
            ],
            volumes: [{ name: 'secret', secret: { secretName: 'probe-secret' } }],
          },
        },
      },
    },
    'e2e',
  );
  await waitFor('the Deployment to report available', async () => {
    const d = await hub.get<{ status?: { availableReplicas?: number } }>(
      `/apis/apps/v1/namespaces/${ns}/deployments/probe`,
    );
    return d.status?.availableReplicas === 1;
  });
  const first = await fetchProbe();
  assert.equal(first.secret, 'v1');
  assert.equal(first.namespace, ns);

  // The process authenticates as its ServiceAccount, with real RBAC.
  const { KubeClient } = await import('../shared/kube/client.ts');
  const asPod = await KubeClient.fromKubeconfig(first.kubeconfig);
  const review = await asPod.create<{ status: { userInfo: { username: string } } }>(
    '/apis/authentication.k8s.io/v1/selfsubjectreviews',
    { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
  );
  assert.equal(review.status.userInfo.username, `system:serviceaccount:${ns}:probe`);
  asPod.close();

  // A changed Secret reaches the mounted file without a restart, as with a kubelet.
  await hub.apply(
    `/api/v1/namespaces/${ns}/secrets/probe-secret`,
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'probe-secret', namespace: ns },
      stringData: { value: 'v2' },
    },
    'e2e',
  );
  await waitFor('the mounted Secret to update', async () => (await fetchProbe()).secret === 'v2');
});

test('deleting the Deployment stops its process', async () => {
  const proc = supervisor.processes.find((p) => p.name.endsWith('probe'));
  assert.ok(proc && !proc.exit, 'process running');
  await hub.delete(`/apis/apps/v1/namespaces/${ns}/deployments/probe`);
  await waitFor('the process to stop', () => proc.exit !== undefined);
  await assert.rejects(fetchProbe());
});

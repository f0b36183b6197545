/**
 * The node values (chart.ts) rendered by the real helm: what the environment's real nodes need of the
 * manager's Deployment (the image built here, never pulled) and nothing else of this machine's (the chart's
 * own Service for the gateway and the webhook). The environment's own manager Deployment
 * (addon-manager.ts) is checked beside it: the same image for the manager and its agents, in-cluster.
 * The installs themselves are proven by `npm start` and e2e/chart-install.test.ts, e2e/addon-lifecycle.test.ts.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { addonManagerManifests, managerName, managerNamespace } from './addon-manager.ts';
import { binaryPath } from './binaries.ts';
import { chartDir, nodeChartValues, nodeChartValuesFile } from './chart.ts';
import { credentialNamespace } from './gateway.ts';

const run = promisify(execFile);
/** binaryPath throws when helm is not built: the tests are skipped then, saying why. */
let helm = '';
let helmMissing: string | false = false;
try {
  helm = binaryPath('helm');
} catch (err) {
  helmMissing = (err as Error).message;
}

const image = 'localhost/cluster-gateway-ts:dev-0123456789abcdef';

type Container = {
  image: string;
  imagePullPolicy?: string;
  args: string[];
  ports: { name?: string; containerPort: number }[];
};
type Manifest = {
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: {
    selector?: Record<string, string>;
    ports?: { port: number; targetPort: string | number }[];
    template?: { metadata?: { labels?: Record<string, string> }; spec: { containers: Container[] } };
  };
};

async function render(values: string[]): Promise<Manifest[]> {
  const { stdout } = await run(helm, ['template', 'cg', chartDir, '--namespace', 'cg-system', ...values]);
  return parseAllDocuments(stdout)
    .map((d) => d.toJS() as Manifest)
    .filter(Boolean);
}

const managerOf = (objects: Manifest[]) =>
  objects.find((o) => o.kind === 'Deployment')?.spec?.template?.spec.containers[0];

describe('nodeChartValues', { skip: helmMissing }, () => {
  test('the manager and its agents and gateway run the image built here, never pulled; the rest is the chart', async () => {
    const objects = await render(nodeChartValues({ image }));
    const manager = managerOf(objects);
    assert.ok(manager, 'a manager Deployment is rendered');
    assert.equal(manager.image, image);
    assert.equal(manager.imagePullPolicy, 'Never');
    for (const arg of [
      `--agent-image=${image}`,
      `--gateway-image=${image}`,
      '--gateway-image-pull-policy=Never',
      // The chart's defaults: the gateway behind a ClusterIP Service, the webhook behind the manager's.
      '--gateway-host-port=0',
      '--gateway-service-external-name=',
      `--webhook-service=cg-cluster-gateway-addon-manager`,
      `--gateway-credential-namespace=${credentialNamespace}`,
    ]) {
      assert.ok(manager.args.includes(arg), `${arg} in ${manager.args.join(' ')}`);
    }
    assert.ok(!manager.args.some((a) => a.startsWith('--webhook-url=')), manager.args.join(' '));
    // The environment owns the credential namespace: helm must not make it (nor delete it on uninstall).
    assert.equal(
      objects.find((o) => o.kind === 'Namespace' && o.metadata.name === credentialNamespace),
      undefined,
    );
  });

  test('overrides come last and win', async () => {
    const values = nodeChartValues({ image }, ['gateway.replicas=1', 'image.tag=dev']);
    assert.deepEqual(values.slice(-4), ['--set', 'gateway.replicas=1', '--set', 'image.tag=dev']);
    const manager = managerOf(await render(values));
    assert.equal(manager?.image, 'localhost/cluster-gateway-ts:dev');
    assert.ok(manager?.args.includes('--gateway-replicas=1'));
  });
});

describe("nodeChartValuesFile (npm start: the VALUES of docs/install.md's helm step)", {
  skip: helmMissing,
}, () => {
  test("the image built here, never pulled; the credential namespace is the chart's to make", async () => {
    const file = path.join(tmpdir(), `cg-values-${process.pid}.yaml`);
    writeFileSync(file, nodeChartValuesFile({ image }));
    const objects = await render(['--values', file]);
    const manager = managerOf(objects);
    assert.equal(manager?.image, image);
    assert.equal(manager?.imagePullPolicy, 'Never');
    assert.ok(manager?.args.includes('--gateway-image-pull-policy=Never'), manager?.args.join(' '));
    assert.ok(objects.some((o) => o.kind === 'Namespace' && o.metadata.name === credentialNamespace));
  });
});

describe("the environment's addon manager Deployment (addon-manager.ts)", () => {
  const objects = addonManagerManifests({ image, args: ['--health-mode=Lease'] }) as Manifest[];
  const deployment = objects.find((o) => o.kind === 'Deployment');
  const manager = deployment?.spec?.template?.spec.containers[0];

  test('runs the image the nodes hold, never pulled, and deploys its agents from it; extra flags last', () => {
    assert.ok(manager);
    assert.equal(manager.image, image);
    assert.equal(manager.imagePullPolicy, 'Never');
    assert.ok(manager.args.includes(`--agent-image=${image}`));
    assert.equal(manager.args.at(-1), '--health-mode=Lease');
    // In the cluster: no kubeconfig (its ServiceAccount), no webhook URL on this machine.
    assert.ok(!manager.args.some((a) => /^--(kubeconfig|webhook-url)=/.test(a)), manager.args.join(' '));
  });

  test('the hub apiserver reaches its webhook through a Service that selects its pods', () => {
    assert.ok(manager);
    assert.ok(manager.args.includes(`--webhook-service=${managerName}`));
    const service = objects.find((o) => o.kind === 'Service');
    assert.equal(service?.metadata.name, managerName);
    assert.equal(service?.metadata.namespace, managerNamespace);
    const labels = deployment?.spec?.template?.metadata?.labels ?? {};
    for (const [key, value] of Object.entries(service?.spec?.selector ?? {}))
      assert.equal(labels[key], value);
    const webhookPort = manager.ports.find((p) => p.name === 'webhook')?.containerPort;
    assert.ok(manager.args.includes(`--webhook-port=${webhookPort}`));
    assert.deepEqual(
      service?.spec?.ports?.map((p) => [p.port, p.targetPort]),
      [[443, 'webhook']],
    );
  });
});

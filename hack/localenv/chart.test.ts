/**
 * The local values (chart.ts) rendered by the real helm: what the process runners and this machine's
 * missing pod network need of the manager's Deployment. The install itself is proven by `npm start` and
 * e2e/chart-install.test.ts.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { imagePrefix } from './addon-manager.ts';
import { binaryPath } from './binaries.ts';
import { chartDir, localChartValues } from './chart.ts';
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

type Container = {
  image: string;
  args: string[];
  ports: { containerPort: number }[];
};
type Manifest = {
  kind: string;
  metadata: { name: string };
  spec?: { template?: { spec: { containers: Container[] } } };
};

async function render(values: string[]): Promise<Manifest[]> {
  const { stdout } = await run(helm, ['template', 'cg', chartDir, '--namespace', 'cg-system', ...values]);
  return parseAllDocuments(stdout)
    .map((d) => d.toJS() as Manifest)
    .filter(Boolean);
}

describe('localChartValues', { skip: helmMissing }, () => {
  test('the manager runs the local image on the host port given, the webhook on this machine', async () => {
    const objects = await render(localChartValues({ hostPort: 31234 }));
    const manager = objects.find((o) => o.kind === 'Deployment')?.spec?.template?.spec.containers[0];
    assert.ok(manager, 'a manager Deployment is rendered');
    // The process runners run only Deployments whose image starts with the project's prefix.
    assert.equal(manager.image, `${imagePrefix}:local`);
    for (const arg of [
      '--gateway-host-port=31234',
      '--gateway-service-external-name=localhost',
      `--gateway-credential-namespace=${credentialNamespace}`,
      '--webhook-url=https://127.0.0.1:9444',
      `--agent-image=${imagePrefix}:local`,
    ]) {
      assert.ok(manager.args.includes(arg), `${arg} in ${manager.args.join(' ')}`);
    }
    // The environment owns the credential namespace: helm must not make it (nor delete it on uninstall).
    assert.equal(
      objects.find((o) => o.kind === 'Namespace' && o.metadata.name === credentialNamespace),
      undefined,
    );
    // The runner remaps a declared container port wherever an argument ends with it
    // (hack/runner/pod-spec.ts): only the arguments naming that port may end with one.
    for (const { containerPort } of manager.ports) {
      const ending: string[] = manager.args.filter((a) => new RegExp(`[=:]${containerPort}$`).test(a));
      assert.deepEqual(
        ending.filter((a) => !/^--(http-port|webhook-port|webhook-url)=/.test(a)),
        [],
        `arguments ending in container port ${containerPort}`,
      );
    }
  });

  test('overrides come last and win', async () => {
    const values = localChartValues({ hostPort: 31234, overrides: ['gateway.replicas=1', 'image.tag=dev'] });
    assert.deepEqual(values.slice(-4), ['--set', 'gateway.replicas=1', '--set', 'image.tag=dev']);
    const manager = (await render(values)).find((o) => o.kind === 'Deployment')?.spec?.template?.spec
      .containers[0];
    assert.equal(manager?.image, `${imagePrefix}:dev`);
    assert.ok(manager?.args.includes('--gateway-replicas=1'));
  });
});

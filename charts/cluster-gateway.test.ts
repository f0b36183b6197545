/**
 * The chart, rendered by the real helm (hack/install-binaries.sh builds it):
 * `helm lint` and `helm template` with default and non-default values,
 * asserting the fields that matter rather than whole manifests; the values
 * schema and the chart's own checks refusing bad values with a message that
 * names them; the manager's arguments accepted by the manager's own parser;
 * the chart's RBAC covering what the manager does and grants; and the
 * chart's CRDs equal to crds/.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { accessSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { addonManagerManifests, managerNamespace } from '../hack/localenv/addon-manager.ts';
import { binaryPath, repoRoot } from '../hack/localenv/binaries.ts';
import { chartCrdDir, crdFiles, sourceCrdDir } from '../hack/sync-chart-crds.ts';
import { gatewayNames } from '../manager/addon/gateway-deploy/names.ts';
import { gatewayRbac } from '../manager/addon/gateway-deploy/rbac.ts';
import { type AddonManagerOptions, parseOptions } from '../manager/addon/options.ts';

const run = promisify(execFile);
const chart = path.join(repoRoot, 'charts', 'cluster-gateway');
const helm = binaryPath('helm');
const helmMissing = (() => {
  try {
    accessSync(helm);
    return false;
  } catch {
    return `helm is not built (${helm}): run npm run binaries`;
  }
})();

// biome-ignore lint/suspicious/noExplicitAny: rendered manifests are read field by field.
type Manifest = any;
interface Rule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  verbs: string[];
  nonResourceURLs?: string[];
}

async function template(...args: string[]): Promise<Manifest[]> {
  const { stdout } = await run(helm, ['template', 'cg', chart, '--namespace', 'cg-system', ...args]);
  return parseAllDocuments(stdout)
    .map((d) => d.toJS())
    .filter(Boolean);
}

async function refused(...args: string[]): Promise<string> {
  try {
    await run(helm, ['template', 'cg', chart, '--namespace', 'cg-system', ...args]);
  } catch (err) {
    return (err as { stderr: string }).stderr;
  }
  assert.fail(`helm template ${args.join(' ')} should have failed`);
}

const find = (objects: Manifest[], kind: string, name?: string, namespace?: string) =>
  objects.find(
    (o) =>
      o.kind === kind &&
      (name === undefined || o.metadata.name === name) &&
      (namespace === undefined || o.metadata.namespace === namespace),
  );
const managerName = 'cg-cluster-gateway-addon-manager';
const managerArgs = (objects: Manifest[]): string[] =>
  find(objects, 'Deployment', managerName).spec.template.spec.containers[0].args;

/** The manager's options as it would parse the rendered arguments in its pod. */
function managerOptions(objects: Manifest[]): AddonManagerOptions {
  const options = parseOptions(managerArgs(objects), { POD_NAMESPACE: 'cg-system' }, () => undefined);
  assert.notEqual(options, 'help');
  return options as AddonManagerOptions;
}

/** Does one of `rules` allow `verb` on `group/resource` (named `name`, if given)? */
function allows(rules: Rule[], group: string, resource: string, verb: string, name?: string): boolean {
  return rules.some(
    (r) =>
      r.apiGroups?.includes(group) &&
      r.resources?.includes(resource) &&
      r.verbs.includes(verb) &&
      (!r.resourceNames || (name !== undefined && r.resourceNames.includes(name))),
  );
}

describe('chart cluster-gateway', { skip: helmMissing }, () => {
  test('helm lint --strict passes with default and with non-default values', async () => {
    await run(helm, ['lint', '--strict', chart]);
    await run(helm, [
      'lint',
      '--strict',
      chart,
      '--set',
      'addon.installStrategy=Placements,addon.everyCluster.enabled=true,gateway.enabled=false',
    ]);
  });

  test('defaults: the manager Deployment, hardened, deploying the gateway, owning it through its ClusterRole', async () => {
    const objects = await template();
    const deployment = find(objects, 'Deployment', managerName);
    const pod = deployment.spec.template.spec;
    const [container] = pod.containers;
    assert.equal(deployment.metadata.namespace, 'cg-system');
    assert.equal(pod.serviceAccountName, managerName);
    assert.deepEqual(pod.securityContext.seccompProfile, { type: 'RuntimeDefault' });
    assert.equal(pod.securityContext.runAsNonRoot, true);
    assert.deepEqual(container.securityContext, {
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    assert.equal(container.image, 'ghcr.io/oam-dev/cluster-gateway-ts:0.1.0');
    assert.deepEqual(container.command, ['node', '/app/manager/addon/main.ts']);
    const options = managerOptions(objects);
    assert.equal(options.addonName, 'cluster-gateway');
    assert.deepEqual(options.installPlacements, [], 'installStrategy Manual');
    assert.equal(options.healthMode, 'Customized');
    assert.deepEqual(options.webhookTarget, { service: managerName });
    assert.equal(options.gateway.enabled, true);
    assert.equal(options.gateway.replicas, 2);
    assert.equal(options.gateway.caValiditySeconds, 5 * 365 * 86400);
    assert.equal(options.gateway.certificateValiditySeconds, 90 * 86400);
    assert.equal(options.gateway.rotationSchedule, '', 'rotate as soon as due');
    assert.equal(options.gateway.image, container.image, 'one image for the manager, the gateway, the agent');
    assert.equal(options.agentImage, container.image);
    assert.deepEqual(options.gateway.args, [
      '--log-level=info',
      '--agent-tunnels=true',
      '--ocm-integration=true',
      '--feature-gates=HealthinessCheck=true',
      '--health-check-interval=10',
      '--reject-unhealthy=false',
    ]);
    // The owner the garbage collector removes the gateway with is a ClusterRole the chart makes.
    assert.ok(find(objects, 'ClusterRole', options.gateway.ownerClusterRole));
    assert.ok(find(objects, 'Service', managerName), 'the webhook Service');
    const adc = find(objects, 'AddOnDeploymentConfig', 'cluster-gateway-default');
    assert.equal(adc.metadata.namespace, 'cg-system', 'where the ClusterManagementAddOn points at it');
    assert.equal(adc.spec.agentInstallNamespace, '');
    const credentials = find(objects, 'Namespace', 'open-cluster-management-credentials');
    assert.equal(credentials.metadata.annotations['helm.sh/resource-policy'], 'keep');
    assert.equal(find(objects, 'Placement'), undefined);
  });

  test('non-default values reach the manager and the objects', async () => {
    const objects = await template(
      '--set',
      [
        'image.registry=registry.example.com',
        'image.repository=mirror/cg',
        'image.tag=1.2.3',
        'image.pullSecrets={pull}',
        'addon.installStrategy=Placements',
        'addon.placements[0].name=prod',
        'addon.everyCluster.enabled=true',
        'addon.healthMode=Lease',
        'manager.webhook.url=https://127.0.0.1:9444',
        'manager.replicas=2',
        'gateway.replicas=3',
        'gateway.credentialNamespace.name=creds',
        'gateway.credentialNamespace.create=false',
        'gateway.agentTunnels=false',
        'gateway.logLevel=debug',
        'gateway.hostPort=30443',
        'gateway.serviceExternalName=localhost',
        'gateway.extraArgs={--authorize-proxy-subpath=true}',
        'gateway.resources.limits.memory=1Gi',
        'addon.deploymentConfig.agentLogLevel=debug',
        'gateway.certificate.caValiditySeconds=120',
        'gateway.certificate.validitySeconds=60',
      ].join(','),
      // Its own --set: a cron expression may hold commas, which separate --set values.
      '--set',
      'gateway.certificate.rotationSchedule=0 2 * * 6',
    );
    const options = managerOptions(objects);
    assert.equal(options.gateway.caValiditySeconds, 120);
    assert.equal(options.gateway.certificateValiditySeconds, 60);
    assert.equal(options.gateway.rotationSchedule, '0 2 * * 6', 'the maintenance window, as one argument');
    const image = 'registry.example.com/mirror/cg:1.2.3';
    assert.equal(options.agentImage, image);
    assert.equal(options.gateway.image, image);
    assert.deepEqual(options.gateway.imagePullSecrets, ['pull']);
    assert.deepEqual(
      options.installPlacements.map((p) => `${p.namespace}/${p.name}`),
      ['cg-system/prod', 'cg-system/cluster-gateway-every-cluster'],
    );
    assert.equal(options.healthMode, 'Lease');
    assert.deepEqual(options.webhookTarget, { url: 'https://127.0.0.1:9444' });
    assert.equal(find(objects, 'Service', managerName), undefined, 'no webhook Service with a URL');
    assert.equal(find(objects, 'Deployment', managerName).spec.replicas, 2);
    assert.equal(options.gateway.replicas, 3);
    assert.equal(options.gateway.credentialNamespace, 'creds');
    assert.equal(options.gateway.hostPort, 30443);
    assert.equal(options.gateway.serviceExternalName, 'localhost');
    assert.deepEqual(options.gateway.resources, {
      limits: { memory: '1Gi' },
      requests: { cpu: '50m', memory: '128Mi' },
    });
    assert.ok(options.gateway.args.includes('--agent-tunnels=false'));
    assert.ok(options.gateway.args.includes('--log-level=debug'));
    assert.equal(options.gateway.args.at(-1), '--authorize-proxy-subpath=true', "the user's flags last");
    assert.equal(find(objects, 'Namespace'), undefined, 'an existing credential namespace is left alone');
    assert.ok(find(objects, 'Role', managerName, 'cg-system'));
    assert.ok(find(objects, 'Role', managerName, 'creds'), 'the manager holds what it grants in creds');
    const placement = find(objects, 'Placement', 'cluster-gateway-every-cluster');
    assert.deepEqual(placement.spec.clusterSets, ['global']);
    assert.equal(find(objects, 'ManagedClusterSetBinding', 'global').spec.clusterSet, 'global');
    const adc = find(objects, 'AddOnDeploymentConfig');
    assert.deepEqual(adc.spec.customizedVariables, [{ name: 'LOG_LEVEL', value: 'debug' }]);
    assert.deepEqual(find(objects, 'Deployment', managerName).spec.template.spec.imagePullSecrets, [
      { name: 'pull' },
    ]);
  });

  test('gateway.enabled false: the manager does not deploy it and holds none of its hub-wide permissions', async () => {
    const objects = await template('--set', 'gateway.enabled=false');
    assert.equal(managerOptions(objects).gateway.enabled, false);
    const rules: Rule[] = find(objects, 'ClusterRole', managerName).rules;
    assert.ok(!allows(rules, 'apiregistration.k8s.io', 'apiservices', 'create'));
    assert.ok(!allows(rules, 'cluster.open-cluster-management.io', 'managedclusters', 'patch'));
    // The agents still keep their cluster's credential there, for a gateway installed some other way.
    assert.ok(find(objects, 'Role', managerName, 'open-cluster-management-credentials'));
  });

  test('RBAC: no wildcard, every rule commented, covering what the local manager needs', async () => {
    const { stdout } = await run(helm, ['template', 'cg', chart, '--namespace', 'cg-system']);
    const lines = stdout.split('\n');
    lines.forEach((line, i) => {
      if (/^\s+- (apiGroups|nonResourceURLs):/.test(line)) {
        assert.match(lines[i - 1] ?? '', /^\s+#/, `rule without a comment saying why: "${line.trim()}"`);
      }
    });
    const objects = parseAllDocuments(stdout).map((d) => d.toJS());
    const roles = objects.filter((o) => o?.kind === 'ClusterRole' || o?.kind === 'Role');
    for (const role of roles) {
      for (const rule of role.rules as Rule[]) {
        for (const list of [rule.apiGroups, rule.resources, rule.verbs, rule.nonResourceURLs]) {
          assert.ok(!list?.includes('*'), `no '*' in ${role.kind} ${role.metadata.name}`);
        }
      }
    }
    // The local environment's manager RBAC (hack/localenv/addon-manager.ts) is what the manager's
    // controllers were tested with: the chart allows every verb of it, namespace by namespace (the local
    // manager's namespace is the release's).
    const clusterRules: Rule[] = find(objects, 'ClusterRole', managerName).rules;
    const chartRulesIn = (namespace: string): Rule[] => [
      ...clusterRules,
      ...objects
        .filter(
          (o) => o?.kind === 'Role' && o.metadata.name === managerName && o.metadata.namespace === namespace,
        )
        .flatMap((o) => o.rules as Rule[]),
    ];
    for (const local of addonManagerManifests().filter(
      (o) => o.kind === 'ClusterRole' || o.kind === 'Role',
    )) {
      const ns = local.metadata?.namespace;
      const chartRules =
        local.kind === 'ClusterRole'
          ? clusterRules
          : chartRulesIn(ns === managerNamespace ? 'cg-system' : (ns ?? ''));
      for (const rule of local.rules as Rule[]) {
        for (const group of rule.apiGroups ?? []) {
          for (const resource of rule.resources ?? []) {
            for (const verb of rule.verbs) {
              for (const name of rule.resourceNames ?? [undefined]) {
                assert.ok(
                  allows(chartRules, group, resource, verb, name),
                  `chart lets the manager ${verb} ${group}/${resource}${name ? ` ${name}` : ''}${ns ? ` in ${ns}` : ''}`,
                );
              }
            }
          }
        }
      }
    }
  });

  test('RBAC: the manager holds every permission it grants the gateway, or may bind the role', async () => {
    const objects = await template();
    const cluster: Rule[] = find(objects, 'ClusterRole', managerName).rules;
    const inCredentials: Rule[] = objects.find(
      (o) => o.kind === 'Role' && o.metadata.namespace === 'open-cluster-management-credentials',
    ).rules;
    const granted = gatewayRbac(
      gatewayNames('cg-system', 'cluster-gateway', 'open-cluster-management-credentials'),
      {},
    );
    for (const obj of granted) {
      if (obj.kind === 'ClusterRoleBinding' || obj.kind === 'RoleBinding') {
        const ref = obj.roleRef as { kind: string; name: string };
        const resource = ref.kind === 'ClusterRole' ? 'clusterroles' : 'roles';
        const own = ref.name.startsWith('cluster-gateway:');
        assert.ok(
          own || allows(cluster, 'rbac.authorization.k8s.io', resource, 'bind', ref.name),
          `bind ${ref.name}`,
        );
        continue;
      }
      const held = obj.kind === 'Role' ? [...cluster, ...inCredentials] : cluster;
      for (const rule of obj.rules as Rule[]) {
        for (const group of rule.apiGroups ?? []) {
          for (const resource of rule.resources ?? []) {
            for (const verb of rule.verbs) {
              assert.ok(allows(held, group, resource, verb), `manager holds ${verb} ${group}/${resource}`);
            }
          }
        }
      }
    }
  });

  test('the values schema refuses unknown keys and wrong types, naming the value', async () => {
    const cases: [string, RegExp][] = [
      ['gateway.replica=3', /at '\/gateway': additional properties 'replica' not allowed/],
      ['typo=1', /additional properties 'typo' not allowed/],
      ['gateway.replicas=many', /at '\/gateway\/replicas': got string, want integer/],
      ['gateway.replicas=0', /at '\/gateway\/replicas'/],
      ['addon.healthMode=Leases', /at '\/addon\/healthMode'/],
      ['gateway.name=Gateway', /at '\/gateway\/name'/],
      ['gateway.extraArgs={debug}', /at '\/gateway\/extraArgs\/0'/],
      ['manager.webhook.url=http://x', /at '\/manager\/webhook\/url'/],
      ['image.pullPolicy=Sometimes', /at '\/image\/pullPolicy'/],
      ['gateway.certificate.validitySeconds=59', /at '\/gateway\/certificate\/validitySeconds'/],
      ['gateway.certificate.rotationSchedule=daily', /at '\/gateway\/certificate\/rotationSchedule'/],
    ];
    for (const [set, message] of cases) assert.match(await refused('--set', set), message, set);
  });

  test("the chart's own checks refuse contradictory values with what to change", async () => {
    assert.match(
      await refused('--set', 'addon.installStrategy=Placements'),
      /installStrategy Placements needs addon.placements or addon.everyCluster.enabled/,
    );
    assert.match(
      await refused('--set', 'addon.placements[0].name=prod'),
      /apply with addon.installStrategy Placements only/,
    );
    assert.match(
      await refused('--set', 'gateway.serviceExternalName=localhost'),
      /gateway.serviceExternalName needs gateway.hostPort/,
    );
    assert.match(
      await refused(
        '--set',
        'gateway.certificate.caValiditySeconds=3600,gateway.certificate.validitySeconds=7200',
      ),
      /gateway.certificate.validitySeconds \(7200\) must not be longer than gateway.certificate.caValiditySeconds \(3600\)/,
    );
  });
});

test('the chart installs the CRDs of crds/, unchanged (node hack/sync-chart-crds.ts copies them)', () => {
  const files = crdFiles(sourceCrdDir);
  assert.ok(files.length > 0);
  assert.deepEqual(crdFiles(chartCrdDir), files, 'the same CRD files');
  for (const file of files) {
    assert.equal(
      readFileSync(path.join(chartCrdDir, file), 'utf8'),
      readFileSync(path.join(sourceCrdDir, file), 'utf8'),
      `charts/cluster-gateway/crds/${file} equals crds/${file}: run node hack/sync-chart-crds.ts`,
    );
  }
});

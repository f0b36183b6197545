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
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { chartCrdDir, crdFiles, sourceCrdDir } from '../hack/sync-chart-crds.ts';
import { gatewayNames } from '../manager/addon/gateway-deploy/names.ts';
import { gatewayRbac } from '../manager/addon/gateway-deploy/rbac.ts';
import { type AddonManagerOptions, parseOptions } from '../manager/addon/options.ts';
import {
  agentAttachClusterRole,
  agentCredentialRole,
  agentHubRole,
} from '../manager/addon/registration/hub-permissions.ts';

import { chart, helm, helmMissing } from './chart-under-test.ts';

const run = promisify(execFile);

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

/** The manager's rules that apply in `namespace` (its ClusterRole, and its Roles there), or hub-wide. */
function managerRules(objects: Manifest[]): (namespace?: string) => Rule[] {
  const clusterRules: Rule[] = find(objects, 'ClusterRole', managerName).rules;
  return (namespace) => [
    ...clusterRules,
    ...(namespace === undefined
      ? []
      : objects
          .filter(
            (o) => o.kind === 'Role' && o.metadata.name === managerName && o.metadata.namespace === namespace,
          )
          .flatMap((o) => o.rules as Rule[])),
  ];
}

/** [verb, group, resource, namespace (none: cluster-scoped or across namespaces), name (none: unnamed), why]. */
type Request = [string, string, string, string | undefined, string | undefined, string];
const addonGroup = 'addon.open-cluster-management.io';
const rbacGroup = 'rbac.authorization.k8s.io';
const leases = 'coordination.k8s.io';
const credentials = 'open-cluster-management-credentials';
const agentGrant = 'open-cluster-management:cluster-gateway:agent';
/**
 * What the manager's code asks of the hub with the chart's default values (addon and gateway cluster-gateway,
 * release namespace cg-system, a cluster cluster1), read from the code each line names. A request the code
 * makes by name carries it (server-side apply creates are authorized with the name; POST creates, lists and
 * watches without a metadata.name field selector are not).
 */
const managerRequests: Request[] = [
  ...['list', 'watch'].flatMap((verb): Request[] => [
    [verb, addonGroup, 'managedclusteraddons', undefined, 'cluster-gateway', 'main.ts informer (by name)'],
    [verb, addonGroup, 'clustermanagementaddons', undefined, 'cluster-gateway', 'main.ts informer (by name)'],
    [verb, addonGroup, 'addondeploymentconfigs', undefined, undefined, 'main.ts informer'],
    [verb, 'work.open-cluster-management.io', 'manifestworks', undefined, undefined, 'main.ts informer'],
    [verb, 'cluster.open-cluster-management.io', 'managedclusters', undefined, undefined, 'main.ts informer'],
    [verb, 'certificates.k8s.io', 'certificatesigningrequests', undefined, undefined, 'main.ts informer'],
    [verb, leases, 'leases', undefined, undefined, 'main.ts heartbeat informer'],
    [verb, 'cluster.core.oam.dev', 'clustergateways', undefined, undefined, 'main.ts informer'],
    [verb, 'apps', 'deployments', 'cg-system', undefined, 'gateway-deploy/informers.ts'],
    [verb, '', 'services', 'cg-system', undefined, 'gateway-deploy/informers.ts'],
    [verb, '', 'serviceaccounts', 'cg-system', undefined, 'gateway-deploy/informers.ts'],
    [verb, 'policy', 'poddisruptionbudgets', 'cg-system', undefined, 'gateway-deploy/informers.ts'],
    [verb, '', 'secrets', 'cg-system', 'cluster-gateway-tls', 'gateway-deploy/informers.ts (by name)'],
    ...['clusterroles', 'clusterrolebindings', 'roles', 'rolebindings'].map(
      (r): Request => [verb, rbacGroup, r, undefined, undefined, 'gateway-deploy/informers.ts (by label)'],
    ),
    [
      verb,
      'apiregistration.k8s.io',
      'apiservices',
      undefined,
      'v1alpha1.cluster.core.oam.dev',
      'informers.ts',
    ],
    [verb, rbacGroup, 'clusterroles', undefined, managerName, 'uninstall/release-owner.ts owner informer'],
  ]),
  ['create', addonGroup, 'clustermanagementaddons', undefined, undefined, 'cma/cma-controller.ts POST'],
  ['patch', addonGroup, 'clustermanagementaddons', undefined, 'cluster-gateway', 'cma-controller.ts apply'],
  ['get', addonGroup, 'clustermanagementaddons', undefined, 'cluster-gateway', 'uninstall/release-owner.ts'],
  ['create', addonGroup, 'addondeploymentconfigs', 'cg-system', undefined, 'cma/cma-controller.ts POST'],
  [
    'patch',
    addonGroup,
    'clustermanagementaddons/status',
    undefined,
    'cluster-gateway',
    'spec-hash-controller',
  ],
  ['patch', addonGroup, 'managedclusteraddons/status', 'cluster1', 'cluster-gateway', 'core/addon-status.ts'],
  ...['create', 'patch', 'delete'].map(
    (verb): Request => [
      verb,
      'work.open-cluster-management.io',
      'manifestworks',
      'cluster1',
      'addon-cluster-gateway-deploy-0',
      'deploy/deploy-controller.ts apply, delete',
    ],
  ),
  [
    'update',
    'certificates.k8s.io',
    'certificatesigningrequests/approval',
    undefined,
    undefined,
    'csr-approver',
  ],
  [
    'approve',
    'certificates.k8s.io',
    'signers',
    undefined,
    'kubernetes.io/kube-apiserver-client',
    'csr-approver',
  ],
  ['delete', 'certificates.k8s.io', 'certificatesigningrequests', undefined, undefined, 'csr-approver'],
  ...['create', 'patch'].flatMap((verb): Request[] => [
    [verb, rbacGroup, 'roles', 'cluster1', agentGrant, 'registration-controller.ts apply'],
    [verb, rbacGroup, 'rolebindings', 'cluster1', agentGrant, 'registration-controller.ts apply'],
  ]),
  ['get', leases, 'leases', 'cluster1', 'cluster-gateway', 'registration-controller.ts heartbeat'],
  ['patch', leases, 'leases', 'cluster1', 'cluster-gateway', 'registration-controller.ts heartbeat owner'],
  ['create', leases, 'leases', 'cluster1', undefined, 'registration-controller.ts heartbeat POST'],
  ...['create', 'patch', 'delete'].flatMap((verb): Request[] => [
    [verb, rbacGroup, 'clusterroles', undefined, `${agentGrant}:cluster1:attach`, 'registration attach'],
    [
      verb,
      rbacGroup,
      'clusterrolebindings',
      undefined,
      `${agentGrant}:cluster1:attach`,
      'registration attach',
    ],
    [verb, rbacGroup, 'roles', credentials, `${agentGrant}:cluster1:credential`, 'registration credential'],
    [verb, rbacGroup, 'rolebindings', credentials, `${agentGrant}:cluster1:credential`, 'registration'],
    [verb, rbacGroup, 'clusterroles', undefined, 'cluster-gateway:gateway', 'gateway-controller.ts'],
    [verb, rbacGroup, 'clusterrolebindings', undefined, 'cluster-gateway:gateway', 'gateway-controller.ts'],
    [
      verb,
      rbacGroup,
      'clusterrolebindings',
      undefined,
      'cluster-gateway:auth-delegator',
      'gateway-controller',
    ],
    [verb, rbacGroup, 'rolebindings', 'kube-system', 'cluster-gateway:auth-reader', 'gateway-controller.ts'],
    [verb, rbacGroup, 'roles', credentials, 'cluster-gateway:credentials', 'gateway-controller.ts'],
    [verb, rbacGroup, 'rolebindings', credentials, 'cluster-gateway:credentials', 'gateway-controller.ts'],
    [verb, rbacGroup, 'roles', 'cg-system', 'cluster-gateway:tunnel-leases', 'gateway-controller.ts'],
    [verb, rbacGroup, 'rolebindings', 'cg-system', 'cluster-gateway:tunnel-leases', 'gateway-controller.ts'],
    [verb, 'apiregistration.k8s.io', 'apiservices', undefined, 'v1alpha1.cluster.core.oam.dev', 'apply'],
    [verb, 'apps', 'deployments', 'cg-system', 'cluster-gateway', 'gateway-controller.ts'],
    [verb, '', 'services', 'cg-system', 'cluster-gateway', 'gateway-controller.ts'],
    [verb, '', 'serviceaccounts', 'cg-system', 'cluster-gateway', 'gateway-controller.ts'],
    [verb, 'policy', 'poddisruptionbudgets', 'cg-system', 'cluster-gateway', 'gateway-controller.ts'],
    [
      verb,
      'admissionregistration.k8s.io',
      'mutatingwebhookconfigurations',
      undefined,
      'cluster-gateway-addon-available',
      'lease-not-found-webhook.ts',
    ],
  ]),
  [
    'get',
    'admissionregistration.k8s.io',
    'mutatingwebhookconfigurations',
    undefined,
    'cluster-gateway-addon-available',
    'release-owner.ts',
  ],
  ['get', '', 'secrets', credentials, 'cluster1', 'registration-controller.ts credential removal'],
  ['delete', '', 'secrets', credentials, 'cluster1', 'registration-controller.ts credential removal'],
  ['create', leases, 'leases', 'cg-system', undefined, 'leader election POST'],
  ['get', leases, 'leases', 'cg-system', 'cluster-gateway-addon-manager', 'leader election'],
  ['update', leases, 'leases', 'cg-system', 'cluster-gateway-addon-manager', 'leader election'],
  ['get', '', 'secrets', 'cg-system', 'cluster-gateway-addon-manager-webhook', 'core/webhook-certificate.ts'],
  [
    'update',
    '',
    'secrets',
    'cg-system',
    'cluster-gateway-addon-manager-webhook',
    'core/webhook-certificate.ts',
  ],
  ['create', '', 'secrets', 'cg-system', undefined, 'core/webhook-certificate.ts POST'],
  ['create', '', 'secrets', 'cg-system', 'cluster-gateway-tls', 'gateway-controller.ts apply'],
  ['patch', '', 'secrets', 'cg-system', 'cluster-gateway-tls', 'gateway-controller.ts apply'],
  ['create', '', 'events', 'cg-system', undefined, 'gateway-deploy/events.ts'],
  ['bind', rbacGroup, 'clusterroles', undefined, 'system:auth-delegator', 'gateway-deploy/rbac.ts'],
  ['bind', rbacGroup, 'roles', 'kube-system', 'extension-apiserver-authentication-reader', 'rbac.ts'],
];

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
      '--reject-unhealthy=true',
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
    assert.deepEqual(
      adc.spec.customizedVariables,
      [
        { name: 'LOG_LEVEL', value: 'debug' },
        { name: 'TUNNEL_TRUST_MODEL', value: 'HubCredential' },
        { name: 'HUB_CREDENTIAL_CLUSTER_ROLE', value: 'cluster-admin' },
      ],
      'the default trust model: the agent provisions the hub credential',
    );
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

  test('RBAC: no wildcard, every rule commented', async () => {
    const { stdout } = await run(helm, ['template', 'cg', chart, '--namespace', 'cg-system']);
    // Every rule of a Role or ClusterRole (not the admission policies' resource rules).
    for (const doc of stdout.split(/^---$/m).filter((d) => /^kind: (Cluster)?Role$/m.test(d))) {
      const lines = doc.split('\n');
      lines.forEach((line, i) => {
        if (/^\s+- (apiGroups|nonResourceURLs):/.test(line)) {
          assert.match(lines[i - 1] ?? '', /^\s+#/, `rule without a comment saying why: "${line.trim()}"`);
        }
      });
    }
    const objects = parseAllDocuments(stdout).map((d) => d.toJS());
    const roles = objects.filter((o) => o?.kind === 'ClusterRole' || o?.kind === 'Role');
    for (const role of roles) {
      for (const rule of role.rules as Rule[]) {
        for (const list of [rule.apiGroups, rule.resources, rule.verbs, rule.nonResourceURLs]) {
          assert.ok(!list?.includes('*'), `no '*' in ${role.kind} ${role.metadata.name}`);
        }
      }
    }
  });

  test("RBAC: every request of the manager's code is allowed, by name where the code knows it", async () => {
    const held = managerRules(await template());
    for (const [verb, group, resource, namespace, name, why] of managerRequests) {
      assert.ok(
        allows(held(namespace), group, resource, verb, name),
        `${why}: ${verb} ${group}/${resource}${name ? ` ${name}` : ''}${namespace ? ` in ${namespace}` : ''}`,
      );
    }
  });

  test('RBAC: what issue 30 found the manager could do is refused (the rest is the admission policies)', async () => {
    const held = managerRules(await template());
    const refusedRequests: Request[] = [
      ['get', '', 'secrets', 'cg-system', 'someone-elses', 'a Secret of the release namespace not its own'],
      ['list', '', 'secrets', 'cg-system', undefined, 'every Secret of the release namespace'],
      ['get', '', 'secrets', 'kube-system', 'any', 'a Secret elsewhere'],
      ['update', 'coordination.k8s.io', 'leases', 'kube-system', 'kube-scheduler', 'a Lease in kube-system'],
      ['get', 'coordination.k8s.io', 'leases', 'kube-system', 'kube-scheduler', 'a Lease in kube-system'],
      [
        'create',
        'admissionregistration.k8s.io',
        'mutatingwebhookconfigurations',
        undefined,
        'other',
        'a webhook',
      ],
      [
        'create',
        'admissionregistration.k8s.io',
        'mutatingwebhookconfigurations',
        undefined,
        undefined,
        'a webhook',
      ],
      ['create', 'apiregistration.k8s.io', 'apiservices', undefined, undefined, 'an APIService'],
      ['delete', 'apiregistration.k8s.io', 'apiservices', undefined, 'v1.', 'an APIService'],
      ['patch', 'work.open-cluster-management.io', 'manifestworks', 'cluster1', 'other', 'a ManifestWork'],
      [
        'patch',
        'addon.open-cluster-management.io',
        'managedclusteraddons/status',
        'cluster1',
        'other',
        'status',
      ],
      [
        'delete',
        'rbac.authorization.k8s.io',
        'roles',
        'kube-system',
        'system:controller:bootstrap-signer',
        'a Role',
      ],
      ['delete', 'rbac.authorization.k8s.io', 'rolebindings', 'cg-system', 'other', 'a RoleBinding'],
      [
        'bind',
        'rbac.authorization.k8s.io',
        'clusterroles',
        undefined,
        'cluster-admin',
        'binding cluster-admin',
      ],
    ];
    for (const [verb, group, resource, namespace, name, what] of refusedRequests) {
      assert.ok(
        !allows(held(namespace), group, resource, verb, name),
        `${what}: ${verb} ${group}/${resource}${name ? ` ${name}` : ''}${namespace ? ` in ${namespace}` : ''} is refused`,
      );
    }
  });

  test('RBAC: the manager holds every permission it grants the gateway and the agents, or may bind the role', async () => {
    const objects = await template();
    const held = managerRules(objects);
    const cluster: Rule[] = find(objects, 'ClusterRole', managerName).rules;
    const owner = {
      apiVersion: 'addon.open-cluster-management.io/v1alpha1',
      name: 'cluster-gateway',
      uid: 'u',
    };
    const agent = { ...owner, namespace: 'cluster1' };
    const granted = [
      ...gatewayRbac(gatewayNames('cg-system', 'cluster-gateway', 'open-cluster-management-credentials'), {}),
      agentHubRole(agent),
      agentAttachClusterRole(agent, owner),
      agentCredentialRole(agent, 'open-cluster-management-credentials', owner),
    ];
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
      const where = obj.kind === 'Role' ? obj.metadata?.namespace : undefined;
      for (const rule of obj.rules as Rule[]) {
        for (const group of rule.apiGroups ?? []) {
          for (const resource of rule.resources ?? []) {
            for (const verb of rule.verbs) {
              for (const name of rule.resourceNames ?? [undefined]) {
                assert.ok(
                  allows(held(where), group, resource, verb, name),
                  `manager holds ${verb} ${group}/${resource}${name ? ` ${name}` : ''}${where ? ` in ${where}` : ''} (granted by ${obj.kind} ${obj.metadata?.name})`,
                );
              }
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

/**
 * The chart in the setups platform teams run it in, rendered by the real helm: as a subchart of a
 * parent chart (`global` values), the ClusterManagementAddOn it declares equal to the one the manager
 * builds from the same values, affinity / priorityClassName / pod annotations and labels reaching all
 * three workloads, and the opt-in ServiceMonitors and NetworkPolicies.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { clusterManagementAddOn } from '../manager/addon/cma/cluster-management-addon.ts';
import { defineAddon } from '../manager/addon/core/addon.ts';
import { agentDeployment, ocmImagePullSecret } from '../manager/addon/deploy/agent-manifests.ts';
import { gatewayNames } from '../manager/addon/gateway-deploy/names.ts';
import { deployment as gatewayDeployment, labelsOf } from '../manager/addon/gateway-deploy/workload.ts';
import { type AddonManagerOptions, parseOptions } from '../manager/addon/options.ts';

import { chart, helm, helmMissing } from './chart-under-test.ts';

const run = promisify(execFile);

// biome-ignore lint/suspicious/noExplicitAny: rendered manifests are read field by field.
type Manifest = any;

const parse = (stdout: string): Manifest[] =>
  parseAllDocuments(stdout)
    .map((d) => d.toJS())
    .filter(Boolean);

async function template(...args: string[]): Promise<Manifest[]> {
  const { stdout } = await run(helm, ['template', 'cg', chart, '--namespace', 'cg-system', ...args]);
  return parse(stdout);
}

async function refused(...args: string[]): Promise<string> {
  try {
    await run(helm, ['template', 'cg', chart, '--namespace', 'cg-system', ...args]);
  } catch (err) {
    return (err as { stderr: string }).stderr;
  }
  assert.fail(`helm template ${args.join(' ')} should have failed`);
}

const find = (objects: Manifest[], kind: string, name?: string) =>
  objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
const managerName = 'cg-cluster-gateway-addon-manager';

function managerOptions(objects: Manifest[]): AddonManagerOptions {
  const args = find(objects, 'Deployment', managerName).spec.template.spec.containers[0].args;
  const options = parseOptions(args, { POD_NAMESPACE: 'cg-system' }, () => undefined);
  assert.notEqual(options, 'help');
  return options as AddonManagerOptions;
}

/** The ClusterManagementAddOn the manager would make from the rendered Deployment's arguments. */
function managerCma(objects: Manifest[]) {
  const o = managerOptions(objects);
  return clusterManagementAddOn(defineAddon({ ...o, credentialNamespace: o.gateway.credentialNamespace }));
}

describe('the chart in common setups', { skip: helmMissing }, () => {
  test('a subchart of a parent chart (file:// dependency) with global values: helm template renders it', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cg-parent-'));
    try {
      const parent = path.join(dir, 'platform');
      mkdirSync(parent);
      writeFileSync(
        path.join(parent, 'Chart.yaml'),
        [
          'apiVersion: v2',
          'name: platform',
          'version: 1.0.0',
          'dependencies:',
          '  - name: cluster-gateway',
          '    version: ">=0.0.0-0"',
          `    repository: file://${chart}`,
          '',
        ].join('\n'),
      );
      // A parent's values: globals (every subchart gets them) and this chart's under its name.
      writeFileSync(
        path.join(parent, 'values.yaml'),
        [
          'global:',
          '  imageRegistry: registry.example.com',
          '  imagePullSecrets: [platform-pull]',
          'cluster-gateway:',
          '  gateway:',
          '    replicas: 3',
          '',
        ].join('\n'),
      );
      await run(helm, ['dependency', 'update', parent]);
      const { stdout } = await run(helm, [
        'template',
        'platform',
        parent,
        '--namespace',
        'platform-system',
        '--set',
        'global.storageClass=fast',
      ]);
      const objects = parse(stdout);
      const manager = find(objects, 'Deployment', 'platform-cluster-gateway-addon-manager');
      assert.ok(manager, 'the manager Deployment is rendered under the parent release');
      assert.ok(find(objects, 'ClusterManagementAddOn', 'cluster-gateway'));
      const options = parseOptions(
        manager.spec.template.spec.containers[0].args,
        { POD_NAMESPACE: 'platform-system' },
        () => undefined,
      ) as AddonManagerOptions;
      assert.equal(options.gateway.replicas, 3, "the parent's values for this chart reach it");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the ClusterManagementAddOn is rendered, the same object the manager builds from the same values', async () => {
    for (const set of [
      [],
      [
        'addon.name=gw',
        'addon.displayName=GW',
        'addon.description=d',
        'addon.installStrategy=Placements',
        'addon.placements[0].name=prod',
        'addon.placements[1].name=edge',
        'addon.placements[1].namespace=edge-ns',
        'addon.everyCluster.enabled=true',
      ],
    ]) {
      const objects = await template(...set.flatMap((s) => ['--set', s]));
      const cmas = objects.filter((o) => o.kind === 'ClusterManagementAddOn');
      assert.equal(cmas.length, 1, set.join(','));
      const rendered = cmas[0];
      const built = managerCma(objects);
      assert.equal(rendered.apiVersion, built.apiVersion);
      assert.equal(rendered.metadata.name, built.metadata.name);
      assert.deepEqual(rendered.spec, built.spec, set.join(','));
      assert.equal(rendered.metadata.annotations, undefined, 'no lifecycle annotation, as the manager');
      // The label the manager recognises a declared ClusterManagementAddOn by (cma/cma-controller.ts).
      assert.equal(rendered.metadata.labels['app.kubernetes.io/managed-by'], 'Helm');
    }
  });

  test('affinity, priorityClassName, pod annotations and labels reach the manager, the gateway and the agent', async () => {
    const affinity = {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{ matchExpressions: [{ key: 'role', operator: 'In', values: ['infra'] }] }],
        },
      },
    };
    const values = path.join(mkdtempSync(path.join(tmpdir(), 'cg-values-')), 'values.yaml');
    const workload = (priority: string) => ({
      affinity,
      priorityClassName: priority,
      podAnnotations: { 'example.com/team': 'platform' },
      // The selector label is the chart's: the user's value for it is dropped.
      podLabels: { 'example.com/cost-center': 'c1', 'app.kubernetes.io/component': 'mine' },
    });
    writeFileSync(
      values,
      JSON.stringify({
        manager: workload('hub-critical'),
        gateway: workload('hub-critical'),
        addon: { agent: workload('agent-critical') },
      }),
    );
    const objects = await template('-f', values);
    rmSync(path.dirname(values), { recursive: true, force: true });

    const managerPod = find(objects, 'Deployment', managerName).spec.template;
    assert.deepEqual(managerPod.spec.affinity, affinity);
    assert.equal(managerPod.spec.priorityClassName, 'hub-critical');
    assert.equal(managerPod.metadata.annotations['example.com/team'], 'platform');
    assert.equal(managerPod.metadata.annotations['prometheus.io/scrape'], 'true', 'scrape annotations kept');
    assert.equal(managerPod.metadata.labels['example.com/cost-center'], 'c1');
    assert.equal(managerPod.metadata.labels['app.kubernetes.io/component'], 'addon-manager');

    const options = managerOptions(objects);
    const gateway = gatewayDeployment({
      names: gatewayNames('cg-system', options.gateway.name, options.gateway.credentialNamespace),
      options: options.gateway,
      addonName: options.addonName,
    }) as Manifest;
    const gatewayPod = gateway.spec.template;
    assert.deepEqual(gatewayPod.spec.affinity.nodeAffinity, affinity.nodeAffinity);
    assert.ok(gatewayPod.spec.affinity.podAntiAffinity, "the gateway's spread over nodes is kept");
    assert.equal(gatewayPod.spec.priorityClassName, 'hub-critical');
    assert.equal(gatewayPod.metadata.annotations['example.com/team'], 'platform');
    assert.equal(gatewayPod.metadata.labels['example.com/cost-center'], 'c1');
    assert.equal(gatewayPod.metadata.labels['app.kubernetes.io/component'], 'gateway', 'its selector wins');

    const addon = { ...defineAddon(options), agentPod: options.agentPod };
    const agent = agentDeployment(addon, 'cluster1', {
      installNamespace: 'open-cluster-management-agent-addon',
      image: options.agentImage,
      nodeSelector: {},
      tolerations: [],
      proxy: {},
      logLevel: 'info',
      resources: {},
      ignoredVariables: [],
    }) as Manifest;
    const agentPod = agent.spec.template;
    assert.deepEqual(agentPod.spec.affinity, affinity);
    assert.equal(agentPod.spec.priorityClassName, 'agent-critical');
    assert.equal(agentPod.metadata.annotations['example.com/team'], 'platform');
    assert.equal(agentPod.metadata.labels['example.com/cost-center'], 'c1');
    assert.deepEqual(agentPod.spec.imagePullSecrets, [{ name: ocmImagePullSecret }]);
  });

  test('defaults: no ServiceMonitor, no NetworkPolicy, no pod settings', async () => {
    const objects = await template();
    for (const kind of ['ServiceMonitor', 'NetworkPolicy']) assert.equal(find(objects, kind), undefined);
    const options = managerOptions(objects);
    assert.deepEqual(options.agentPod, {
      affinity: {},
      priorityClassName: '',
      podAnnotations: {},
      podLabels: {},
    });
    assert.deepEqual(options.gateway.pod, options.agentPod);
    const pod = find(objects, 'Deployment', managerName).spec.template.spec;
    assert.equal(pod.affinity, undefined);
    assert.equal(pod.priorityClassName, undefined);
  });

  test('metrics.serviceMonitor: the manager and the gateway scraped, the gateway over verified TLS and authorized', async () => {
    const objects = await template(
      '--set',
      'metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.interval=30s,metrics.serviceMonitor.labels.release=prom,metrics.serviceMonitor.scraperServiceAccount.name=prometheus,metrics.serviceMonitor.scraperServiceAccount.namespace=monitoring',
    );
    const monitors = objects.filter((o) => o.kind === 'ServiceMonitor');
    assert.deepEqual(monitors.map((m) => m.apiVersion).sort(), [
      'monitoring.coreos.com/v1',
      'monitoring.coreos.com/v1',
    ]);
    const manager = find(objects, 'ServiceMonitor', managerName);
    const metricsService = find(objects, 'Service', `${managerName}-metrics`);
    assert.deepEqual(
      manager.spec.selector.matchLabels,
      metricsService.metadata.labels && {
        'app.kubernetes.io/name': managerName,
        'app.kubernetes.io/component': 'addon-manager',
      },
    );
    assert.equal(metricsService.spec.ports[0].targetPort, 'http');
    assert.equal(manager.metadata.labels.release, 'prom');
    const gateway = find(objects, 'ServiceMonitor', 'cg-cluster-gateway-gateway');
    const [endpoint] = gateway.spec.endpoints;
    assert.equal(endpoint.scheme, 'https');
    assert.equal(endpoint.interval, '30s');
    assert.equal(endpoint.tlsConfig.insecureSkipVerify, undefined, 'verified');
    assert.deepEqual(endpoint.tlsConfig.ca.secret, { name: 'cluster-gateway-tls', key: 'ca.crt' });
    assert.equal(endpoint.tlsConfig.serverName, 'cluster-gateway.cg-system.svc');
    assert.ok(endpoint.bearerTokenFile, "the scraper's token, for the gateway's authorization");
    // The gateway's Service carries the labels the ServiceMonitor selects (the manager makes it).
    const options = managerOptions(objects);
    const serviceLabels = labelsOf(gatewayNames('cg-system', options.gateway.name, 'x'));
    for (const [k, v] of Object.entries(gateway.spec.selector.matchLabels))
      assert.equal(serviceLabels[k], v, k);
    const binding = find(objects, 'ClusterRoleBinding', 'cg-cluster-gateway-metrics-reader');
    assert.deepEqual(binding.roleRef.name, 'cg-cluster-gateway-metrics-reader');
    assert.ok(find(objects, 'ClusterRole', 'cg-cluster-gateway-metrics-reader'));
    assert.deepEqual(binding.subjects, [
      { kind: 'ServiceAccount', name: 'prometheus', namespace: 'monitoring' },
    ]);
    assert.match(
      await refused(
        '--set',
        'metrics.serviceMonitor.enabled=true,gateway.hostPort=9443,gateway.serviceExternalName=localhost',
      ),
      /metrics.serviceMonitor needs a ClusterIP gateway Service/,
    );
  });

  test('networkPolicy: the hub apiserver to the gateway and the webhook, gateway replicas to the peer port, metrics from a selector', async () => {
    const objects = await template(
      '--set',
      'networkPolicy.enabled=true,networkPolicy.apiServer[0].ipBlock.cidr=10.0.0.0/24,networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=monitoring',
    );
    const apiServer = { ipBlock: { cidr: '10.0.0.0/24' } };
    const scrapers = { namespaceSelector: { matchLabels: { team: 'monitoring' } } };
    const manager = find(objects, 'NetworkPolicy', managerName);
    assert.deepEqual(manager.spec.podSelector.matchLabels, {
      'app.kubernetes.io/name': managerName,
      'app.kubernetes.io/component': 'addon-manager',
    });
    assert.deepEqual(manager.spec.policyTypes, ['Ingress']);
    assert.deepEqual(manager.spec.ingress, [
      { ports: [{ port: 9443, protocol: 'TCP' }], from: [apiServer] },
      { ports: [{ port: 8000, protocol: 'TCP' }], from: [scrapers] },
    ]);
    const gateway = find(objects, 'NetworkPolicy', 'cg-cluster-gateway-gateway');
    const selector = {
      'app.kubernetes.io/name': 'cluster-gateway',
      'app.kubernetes.io/component': 'gateway',
    };
    assert.deepEqual(gateway.spec.podSelector.matchLabels, selector);
    assert.deepEqual(gateway.spec.ingress, [
      { ports: [{ port: 9443, protocol: 'TCP' }], from: [apiServer, scrapers] },
      { ports: [{ port: 9444, protocol: 'TCP' }], from: [{ podSelector: { matchLabels: selector } }] },
    ]);
    // The manager's own pods and the gateway's match the selectors (their templates' labels).
    const managerPodLabels = find(objects, 'Deployment', managerName).spec.template.metadata.labels;
    for (const [k, v] of Object.entries(manager.spec.podSelector.matchLabels))
      assert.equal(managerPodLabels[k], v);
    // Without metricsFrom, nobody reaches the manager's unauthenticated /metrics.
    const closed = find(await template('--set', 'networkPolicy.enabled=true'), 'NetworkPolicy', managerName);
    assert.deepEqual(closed.spec.ingress[1], { ports: [{ port: 8000, protocol: 'TCP' }], from: [] });
    assert.deepEqual(
      closed.spec.ingress[0],
      { ports: [{ port: 9443, protocol: 'TCP' }] },
      'the webhook: any source',
    );
  });

  test('the schema checks the new values, naming them', async () => {
    const cases: [string, RegExp][] = [
      ['manager.affinity.nodeAfinity.x=1', /at '\/manager\/affinity': additional properties 'nodeAfinity'/],
      ['gateway.priorityClassName=High_Priority', /at '\/gateway\/priorityClassName'/],
      ['addon.agent.podLabels.team=a b', /at '\/addon\/agent\/podLabels\/team'/],
      ['addon.agent.extra=1', /at '\/addon\/agent': additional properties 'extra'/],
      ['metrics.serviceMonitor.interval=often', /at '\/metrics\/serviceMonitor\/interval'/],
      ['networkPolicy.apiServer[0].cidr=10.0.0.0/8', /at '\/networkPolicy\/apiServer\/0'/],
    ];
    for (const [set, message] of cases) assert.match(await refused('--set', set), message, set);
    // global: anything a parent chart passes.
    await template('--set', 'global.anything.nested=1,global.imagePullSecrets[0]=x');
  });
});

test('credentials in the release namespace (KubeVela keeps them in vela-system): every object has a name of its own', {
  skip: helmMissing,
}, async () => {
  const objects = await template(
    '--set',
    'gateway.credentialNamespace.name=cg-system',
    '--set',
    'gateway.credentialNamespace.create=false',
  );
  const keys = objects.map((o) => `${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`);
  assert.deepEqual(
    keys.filter((k, i) => keys.indexOf(k) !== i),
    [],
    'helm install would fail with "already exists"',
  );
  const credentials = find(objects, 'Role', `${managerName}-credentials`);
  assert.equal(credentials?.metadata.namespace, 'cg-system');
  assert.ok(credentials.rules.some((r: Manifest) => r.resources.includes('secrets')));
  const binding = find(objects, 'RoleBinding', `${managerName}-credentials`);
  assert.equal(binding?.roleRef.name, `${managerName}-credentials`);
});

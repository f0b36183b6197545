import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { expandContainerEnv } from '../../../shared/cli-flags.ts';
import { checkGatewayArgs } from '../../gateway/options.ts';
import { gatewayNames } from './names.ts';
import { managedGatewayFlags, parseGatewayOptions } from './options.ts';
import { gatewayRbac } from './rbac.ts';
import {
  apiServicePort,
  checkGatewayCommandLine,
  deployment,
  type GatewaySpec,
  gatewayArgs,
  podDisruptionBudget,
  service,
  servingHosts,
} from './workload.ts';

const spec = (values: Record<string, string> = {}): GatewaySpec => ({
  names: gatewayNames('cg-system', 'cluster-gateway', 'creds'),
  options: parseGatewayOptions(values, 'ghcr.io/oam-dev/cluster-gateway-ts:1.0.0'),
  addonName: 'cluster-gateway',
});

// biome-ignore lint/suspicious/noExplicitAny: reading into built manifests.
type Loose = any;

describe('gateway workload', () => {
  test("the Deployment: the chart's security context, spread over nodes, no replica lost in a rollout", () => {
    const d = deployment(spec()) as Loose;
    assert.equal(d.spec.replicas, 2);
    assert.deepEqual(d.spec.strategy.rollingUpdate, { maxUnavailable: 0, maxSurge: 1 });
    const pod = d.spec.template.spec;
    assert.deepEqual(pod.securityContext, {
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    const [container] = pod.containers;
    assert.deepEqual(container.securityContext, {
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    const term =
      pod.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm;
    assert.equal(term.topologyKey, 'kubernetes.io/hostname');
    assert.deepEqual(term.labelSelector.matchLabels, d.spec.selector.matchLabels);
    assert.equal(pod.serviceAccountName, 'cluster-gateway');
    assert.deepEqual(container.command, [
      'node',
      '--max-semi-space-size=2',
      '--expose-gc',
      '/app/manager/gateway/main.ts',
    ]);
    assert.equal(container.readinessProbe.httpGet.scheme, 'HTTPS');
    // The serving pair and the verdict key are mounted: the CA key (and the CA bundle, no peer trust) stay
    // in the Secret.
    assert.deepEqual(
      pod.volumes[0].secret.items.map((i: { key: string; path: string }) => [i.key, i.path]),
      [
        ['tls.crt', 'tls.crt'],
        ['tls.key', 'tls.key'],
        ['verdict.key', 'verdict.key'],
      ],
    );
    assert.equal(pod.volumes.length, 2, 'the TLS Secret and /tmp, nothing else');
    assert.equal(
      pod.automountServiceAccountToken,
      undefined,
      "the kubelet's bound token (pod-name extra) is mounted",
    );
  });

  test('agent tunnels on (the default): replicas share tunnels over the peer port, found through Leases, proven by the hub signer', () => {
    const d = deployment(spec()) as Loose;
    const [container] = d.spec.template.spec.containers;
    const peerArgs = container.args.filter((a: string) => /^--tunnel-(peer|lease)/.test(a));
    assert.deepEqual(peerArgs, [
      '--tunnel-peer-port=9444',
      '--tunnel-peer-address=$(POD_IP):9444',
      '--tunnel-lease-namespace=cg-system',
    ]);
    // No peer certificate from files: the serving pair is no peer credential.
    assert.ok(!container.args.some((a: string) => /^--tunnel-peer-(cert|key|ca)=/.test(a)));
    const env = Object.fromEntries(
      container.env.map((e: Loose) => [e.name, e.valueFrom?.fieldRef?.fieldPath ?? e.value]),
    );
    assert.equal(env.POD_IP, 'status.podIP', 'the kubelet expands $(POD_IP) in args from this env var');
    assert.equal(env.POD_NAME, 'metadata.name', "the replica's name in its Leases and peer certificate");
    assert.deepEqual(
      container.ports.map((p: Loose) => [p.name, p.containerPort]),
      [
        ['https', 9443],
        ['tunnel-peer', 9444],
      ],
    );
    const leases = gatewayRbac(spec().names, {}).find(
      (o) => o.kind === 'Role' && /tunnel-leases/.test(o.metadata?.name ?? ''),
    );
    assert.equal(leases?.metadata?.namespace, 'cg-system');
    assert.deepEqual((leases as Loose).rules, [
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        verbs: ['get', 'list', 'watch', 'create', 'update'],
      },
    ]);
  });

  test('agent tunnels turned off in --gateway-args: no peer flags, no peer port', () => {
    const container = (deployment(spec({ 'gateway-args': '["--agent-tunnels=false"]' })) as Loose).spec
      .template.spec.containers[0];
    assert.ok(!container.args.some((a: string) => a.startsWith('--tunnel-peer')));
    assert.deepEqual(
      container.ports.map((p: Loose) => p.name),
      ['https'],
    );
    // Turned back on by a later flag: the last one wins, as the gateway's parser reads them.
    const again = (
      deployment(spec({ 'gateway-args': '["--agent-tunnels=false","--agent-tunnels=true"]' })) as Loose
    ).spec.template.spec.containers[0];
    assert.ok(again.args.includes('--tunnel-peer-port=9444'));
    assert.throws(
      () => spec({ 'gateway-args': '["--tunnel-peer-port=1234"]' }),
      /--tunnel-peer-port is set by the manager/,
    );
  });

  test("the manager's gateway flags first, the user's after them", () => {
    const args = (
      deployment(spec({ 'gateway-args': '["--log-level=debug","--agent-tunnels=false"]' })) as Loose
    ).spec.template.spec.containers[0].args;
    assert.deepEqual(args, [
      '--secure-port=9443',
      '--bind-address=0.0.0.0',
      '--tls-cert-file=/etc/cluster-gateway/tls/tls.crt',
      '--tls-private-key-file=/etc/cluster-gateway/tls/tls.key',
      '--secret-namespace=creds',
      '--tunnel-addon-name=cluster-gateway',
      '--probe-verdict-key-file=/etc/cluster-gateway/tls/verdict.key',
      '--log-level=debug',
      '--agent-tunnels=false',
    ]);
  });

  test("the gateway's own parser reads the manager's flags as meant, $(POD_IP) expanded as the kubelet does", () => {
    const env = { POD_IP: '10.1.2.3', POD_NAME: 'cluster-gateway-abc' };
    const o = checkGatewayArgs(expandContainerEnv(gatewayArgs(spec()), env));
    assert.equal(o.securePort, 9443);
    assert.equal(o.tlsCertFile, '/etc/cluster-gateway/tls/tls.crt');
    assert.equal(o.secretNamespace, 'creds');
    assert.equal(o.tunnelAddonName, 'cluster-gateway');
    // Where the tls volume puts the Secret's verdict.key (not read here: the file is the pod's).
    assert.equal(o.probeVerdictKeyFile, '/etc/cluster-gateway/tls/verdict.key');
    assert.equal(o.tunnelPeers?.address, '10.1.2.3:9444');
    assert.equal(o.tunnelPeers?.leaseNamespace, 'cg-system');
    assert.equal(
      o.tunnelPeers?.namespace,
      'cg-system',
      'the peer certificate names the Lease (and pod) namespace',
    );
    assert.equal(o.tunnelPeers?.files, undefined, 'the peer certificate comes from the hub');
    const off = checkGatewayArgs(gatewayArgs(spec({ 'gateway-args': '["--agent-tunnels=false"]' })));
    assert.equal(off.tunnelPeers, undefined);
    checkGatewayCommandLine(spec({ 'gateway-args': '["--log-level=debug","--tunnel-lease-duration=20"]' }));
    assert.throws(
      () => checkGatewayCommandLine(spec({ 'gateway-args': '["--tunnel-lease-duration=1"]' })),
      /^Error: --gateway-args: --tunnel-lease-duration: "1" is not a whole number between 3 and 300/,
    );
  });

  test('every flag the manager sets is one --gateway-args may not repeat', () => {
    const set = gatewayArgs(spec()).map((a) => a.slice(2).split('=')[0]);
    for (const flag of set) assert.ok((managedGatewayFlags as readonly string[]).includes(flag ?? ''), flag);
  });

  test('optional pod settings appear only when set', () => {
    const plain = (deployment(spec()) as Loose).spec.template.spec;
    for (const field of ['nodeSelector', 'tolerations', 'imagePullSecrets'])
      assert.equal(plain[field], undefined);
    assert.equal(plain.containers[0].resources, undefined);
    assert.equal(plain.containers[0].ports[0].hostPort, undefined);
    const set = (
      deployment(
        spec({
          'gateway-node-selector': '{"a":"b"}',
          'gateway-image-pull-secrets': 'pull',
          'gateway-resources': '{"requests":{"cpu":"50m"}}',
          'gateway-host-port': '30443',
        }),
      ) as Loose
    ).spec.template.spec;
    assert.deepEqual(set.nodeSelector, { a: 'b' });
    assert.deepEqual(set.imagePullSecrets, [{ name: 'pull' }]);
    assert.deepEqual(set.containers[0].resources, { requests: { cpu: '50m' } });
    assert.equal(set.containers[0].ports[0].hostPort, 30443);
  });

  test('Service, APIService port and certificate names: ClusterIP on 443, or an external name on the gateway port', () => {
    const clusterIp = service(spec()) as Loose;
    assert.equal(clusterIp.spec.type, 'ClusterIP');
    assert.deepEqual(clusterIp.spec.ports, [
      { name: 'https', port: 443, targetPort: 'https', protocol: 'TCP' },
    ]);
    assert.equal(apiServicePort(spec()), 443);
    assert.ok(servingHosts(spec()).includes('cluster-gateway.cg-system.svc'));
    const external = spec({ 'gateway-service-external-name': 'localhost', 'gateway-host-port': '30443' });
    assert.equal((service(external) as Loose).spec.type, 'ExternalName');
    assert.equal(apiServicePort(external), 30443);
    assert.ok(servingHosts(external).includes('localhost'));
  });

  test('the PodDisruptionBudget lets one replica go at a time', () => {
    assert.deepEqual((podDisruptionBudget(spec()) as Loose).spec, {
      maxUnavailable: 1,
      selector: {
        matchLabels: {
          'app.kubernetes.io/name': 'cluster-gateway',
          'app.kubernetes.io/component': 'gateway',
        },
      },
    });
  });

  test("RBAC: no wildcard, Secrets in the credential namespace only, Kubernetes' own roles for auth", () => {
    const objects = gatewayRbac(spec().names, {}) as Loose[];
    for (const obj of objects) {
      for (const rule of obj.rules ?? []) {
        for (const list of [rule.apiGroups, rule.resources, rule.verbs]) assert.ok(!list.includes('*'));
      }
    }
    const secretRules = objects.filter((o) => o.rules?.some((r: Loose) => r.resources.includes('secrets')));
    assert.deepEqual(
      secretRules.map((o) => `${o.kind} ${o.metadata.namespace}`),
      ['Role creds'],
    );
    const refs = objects.filter((o) => o.roleRef).map((o) => o.roleRef.name);
    assert.ok(refs.includes('system:auth-delegator'));
    assert.ok(refs.includes('extension-apiserver-authentication-reader'));
    assert.ok(
      objects.every((o) => !o.metadata.name.startsWith('cluster-gateway') || o.metadata.name.includes(':')),
    );
  });
});

describe('gateway pod settings (--gateway-affinity, -priority-class-name, -pod-annotations, -pod-labels)', () => {
  test("the user's reach the pod template; the gateway's labels and its spread over nodes stay unless replaced", () => {
    const d = deployment(
      spec({
        'gateway-affinity': JSON.stringify({ nodeAffinity: { x: 1 } }),
        'gateway-priority-class-name': 'hub-critical',
        'gateway-pod-annotations': JSON.stringify({ 'example.com/team': 'platform' }),
        'gateway-pod-labels': JSON.stringify({ team: 'platform', 'app.kubernetes.io/name': 'other' }),
      }),
    ) as Loose;
    const pod = d.spec.template;
    assert.deepEqual(pod.spec.affinity.nodeAffinity, { x: 1 });
    assert.ok(pod.spec.affinity.podAntiAffinity, 'replicas still spread over nodes');
    assert.equal(pod.spec.priorityClassName, 'hub-critical');
    assert.deepEqual(pod.metadata.annotations, { 'example.com/team': 'platform' });
    assert.equal(pod.metadata.labels.team, 'platform');
    assert.equal(pod.metadata.labels['app.kubernetes.io/name'], 'cluster-gateway', 'the selector wins');
    assert.deepEqual(d.spec.selector.matchLabels, {
      'app.kubernetes.io/name': 'cluster-gateway',
      'app.kubernetes.io/component': 'gateway',
    });
    const replaced = deployment(
      spec({ 'gateway-affinity': JSON.stringify({ podAntiAffinity: { required: true } }) }),
    ) as Loose;
    assert.deepEqual(replaced.spec.template.spec.affinity, { podAntiAffinity: { required: true } });
    const plain = deployment(spec()) as Loose;
    assert.equal(plain.spec.template.spec.priorityClassName, undefined);
    assert.equal(plain.spec.template.metadata.annotations, undefined);
  });

  test('bad values say which flag and what to fix', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ 'gateway-affinity': '[]' }, /--gateway-affinity: must be a JSON object/],
      [{ 'gateway-affinity': '{"nodeAfinity":{}}' }, /--gateway-affinity: "nodeAfinity" is not nodeAffinity/],
      [{ 'gateway-priority-class-name': 'High' }, /--gateway-priority-class-name: "High"/],
      [{ 'gateway-pod-labels': '{"a":"b c"}' }, /--gateway-pod-labels: the value of "a"/],
      [
        { 'gateway-pod-annotations': '{"a":1}' },
        /--gateway-pod-annotations: the value of "a" must be a string/,
      ],
      [{ 'gateway-pod-annotations': '{"bad key":"x"}' }, /not a label or annotation key/],
    ];
    for (const [values, message] of cases) assert.throws(() => spec(values), message);
  });
});

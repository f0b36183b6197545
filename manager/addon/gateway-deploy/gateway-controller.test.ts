import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { describe, test } from 'node:test';
import pino from 'pino';
import type { KubeObject } from '../../../shared/kube/client.ts';
import { type Informer, objectKey } from '../../../shared/kube/informer.ts';
import { StatusError } from '../../../shared/kube/status.ts';
import { differs, firstDifference, GatewayController, specHashAnnotation } from './gateway-controller.ts';
import type { GatewayInformers } from './informers.ts';
import { apiServiceName } from './names.ts';
import { type GatewayDeployOptions, parseGatewayOptions } from './options.ts';
import { encodeSecretData, servingCertificate } from './serving-certificate.ts';

const day = 86400_000;

interface PodSpecView {
  containers: { args: string[] }[];
  volumes: { name: string; secret?: { items?: { key: string; path: string }[] } }[];
}

/** The hosts the controller's serving certificate names (workload.ts servingHosts), without an external name. */
function servingHostsOf(name: string, namespace: string): string[] {
  const svc = `${name}.${namespace}`;
  return [name, svc, `${svc}.svc`, `${svc}.svc.cluster.local`];
}

function specOf<T>(obj: KubeObject | undefined): T {
  assert.ok(obj?.spec, 'the object exists');
  return obj.spec as T;
}

function dataOf(obj: KubeObject | undefined): Record<string, string> {
  assert.ok(obj?.data, 'the Secret exists');
  return obj.data as Record<string, string>;
}

/** An informer over a Map: what the controller reads. */
function store() {
  const map = new Map<string, KubeObject>();
  const informer = {
    get: (k: string) => map.get(k),
    list: () => [...map.values()],
    on: () => () => {},
    synced: Promise.resolve(),
  } as unknown as Informer<KubeObject>;
  return { map, informer };
}

const storeOfKind: Record<string, keyof GatewayInformers> = {
  Deployment: 'deployments',
  Service: 'services',
  PodDisruptionBudget: 'podDisruptionBudgets',
  ServiceAccount: 'serviceAccounts',
  Secret: 'secrets',
  ClusterRole: 'clusterRoles',
  ClusterRoleBinding: 'clusterRoleBindings',
  Role: 'roles',
  RoleBinding: 'roleBindings',
  APIService: 'apiServices',
};

/** A hub whose writes land in the stores (with a uid, as the apiserver would), recorded in order. */
function setup(
  options: Partial<GatewayDeployOptions> = {},
  now = () => Date.now(),
  /** The Secret reaches the informer this long after its write (as a watch event would), with a resourceVersion. */
  secretCacheDelayMs?: number,
) {
  const stores = Object.fromEntries(
    [...Object.values(storeOfKind), 'owner'].map((k) => [k, store()]),
  ) as Record<keyof GatewayInformers, ReturnType<typeof store>>;
  stores.owner.map.set('cg-manager', {
    kind: 'ClusterRole',
    metadata: { name: 'cg-manager', uid: 'owner-uid' },
  });
  const writes: string[] = [];
  /** Paths whose delete the hub refuses (403), as RBAC or an admission policy would. */
  const forbidden = new Set<string>();
  const events: { type: string; reason: string; message: string }[] = [];
  let uid = 0;
  const hub = {
    async apply(path: string, body: KubeObject) {
      writes.push(`apply ${body.kind} ${objectKey(body)}`);
      const s = stores[storeOfKind[body.kind ?? ''] as keyof GatewayInformers];
      const existing = s.map.get(objectKey(body));
      const stored = structuredClone({ ...existing, ...body }) as KubeObject;
      stored.metadata = { ...stored.metadata, uid: existing?.metadata?.uid ?? `uid-${++uid}` };
      if (secretCacheDelayMs !== undefined && body.kind === 'Secret') {
        stored.metadata.resourceVersion = String(++uid);
        setTimeout(() => s.map.set(objectKey(body), stored), secretCacheDelayMs);
        return stored;
      }
      s.map.set(objectKey(body), stored);
      assert.ok(path.endsWith(`/${body.metadata?.name}`), path);
      return stored;
    },
    async delete(path: string) {
      writes.push(`delete ${path}`);
      if (forbidden.has(path)) throw StatusError.fromResponse(403, '', `DELETE ${path}`);
      for (const s of Object.values(stores)) {
        for (const [k, v] of s.map) if (path.endsWith(`/${v.metadata?.name}`)) s.map.delete(k);
      }
    },
  };
  const informers = Object.fromEntries(
    Object.entries(stores).map(([k, s]) => [k, s.informer]),
  ) as unknown as GatewayInformers;
  const controller = new GatewayController({
    hub: hub as never,
    addonName: 'cluster-gateway',
    namespace: 'cg-system',
    options: {
      ...parseGatewayOptions({ 'deploy-gateway': 'true', 'owner-cluster-role': 'cg-manager' }, 'img:1'),
      ...options,
    },
    informers,
    log: pino({ level: 'silent' }),
    events: { record: async (_o, e) => void events.push(e) },
    now,
  });
  const deployment = () => stores.deployments.map.get('cg-system/cluster-gateway');
  const markAvailable = (available: number) => {
    const d = deployment();
    assert.ok(d, 'the Deployment exists');
    d.status = { availableReplicas: available, replicas: 2 };
  };
  const forbid = (path: string) => void forbidden.add(path);
  return { controller, stores, writes, events, deployment, markAvailable, forbid };
}

describe('GatewayController.reconcile', () => {
  test('a fresh hub: everything but the APIService, which waits for an available replica and says why', async () => {
    const t = setup();
    await t.controller.reconcile();
    assert.deepEqual(t.writes, [
      'apply ServiceAccount cg-system/cluster-gateway',
      'apply ClusterRole cluster-gateway:gateway',
      'apply ClusterRoleBinding cluster-gateway:gateway',
      'apply ClusterRoleBinding cluster-gateway:auth-delegator',
      'apply RoleBinding kube-system/cluster-gateway:auth-reader',
      'apply Role open-cluster-management-credentials/cluster-gateway:credentials',
      'apply RoleBinding open-cluster-management-credentials/cluster-gateway:credentials',
      'apply Role cg-system/cluster-gateway:tunnel-leases',
      'apply RoleBinding cg-system/cluster-gateway:tunnel-leases',
      'apply Secret cg-system/cluster-gateway-tls',
      'apply Service cg-system/cluster-gateway',
      'apply PodDisruptionBudget cg-system/cluster-gateway',
      'apply Deployment cg-system/cluster-gateway',
    ]);
    assert.equal(t.stores.apiServices.map.size, 0);
    assert.equal(t.events.at(-1)?.reason, 'APIServiceNotRegistered');
    assert.match(t.events.at(-1)?.message ?? '', /0\/2 gateway replicas available/);
    for (const s of Object.values(t.stores)) {
      for (const obj of s.map.values()) {
        if (obj.kind === 'ClusterRole' && obj.metadata?.name === 'cg-manager') continue;
        assert.deepEqual(
          ((obj.metadata?.ownerReferences ?? []) as { uid: string }[]).map((o) => o.uid),
          ['owner-uid'],
          `${obj.kind} owned by the owner ClusterRole`,
        );
      }
    }
  });

  test('registered once available: caBundle is the CA of the Secret; the gateway then also hangs off the APIService', async () => {
    const t = setup();
    await t.controller.reconcile();
    t.markAvailable(0);
    t.writes.length = 0;
    await t.controller.reconcile();
    assert.deepEqual(t.writes, [], 'unavailable: nothing registered, nothing else to write');
    t.markAvailable(1);
    await t.controller.reconcile();
    assert.deepEqual(t.writes, [`apply APIService ${apiServiceName}`]);
    const api = t.stores.apiServices.map.get(apiServiceName) as KubeObject & {
      spec: Record<string, unknown>;
    };
    const secret = t.stores.secrets.map.get('cg-system/cluster-gateway-tls') as KubeObject & {
      data: Record<string, string>;
    };
    const ca = Buffer.from(secret.data['ca.crt'] ?? '', 'base64').toString();
    assert.equal(Buffer.from(String(api.spec.caBundle), 'base64').toString(), `${ca.trimEnd()}\n`);
    assert.deepEqual(api.spec.service, { namespace: 'cg-system', name: 'cluster-gateway', port: 443 });
    assert.equal(api.spec.insecureSkipTLSVerify, false);
    const leaf = new X509Certificate(Buffer.from(secret.data['tls.crt'] ?? '', 'base64').toString());
    assert.ok(leaf.checkIssued(new X509Certificate(ca)), 'the serving certificate is signed by that CA');
    assert.ok(leaf.checkHost('cluster-gateway.cg-system.svc'), "names the aggregator's TLS ServerName");
    assert.equal(t.events.at(-1)?.reason, 'APIServiceRegistered');

    t.writes.length = 0;
    await t.controller.reconcile();
    assert.equal(t.writes.length, 13, 'every gateway object gains the APIService as second owner');
    const owners = (t.deployment()?.metadata?.ownerReferences ?? []) as { kind: string }[];
    assert.deepEqual(
      owners.map((o) => o.kind),
      ['ClusterRole', 'APIService'],
    );
    t.writes.length = 0;
    await t.controller.reconcile();
    assert.deepEqual(t.writes, [], 'converged: nothing to write');
  });

  test('drift is repaired: an edited Deployment, a deleted Service, a changed caBundle, a deleted APIService', async () => {
    const t = setup();
    await t.controller.reconcile();
    t.markAvailable(1);
    await t.controller.reconcile();
    await t.controller.reconcile();
    t.writes.length = 0;

    specOf<{ replicas: number }>(t.deployment()).replicas = 7;
    t.stores.services.map.clear();
    const api = t.stores.apiServices.map.get(apiServiceName) as KubeObject & { spec: { caBundle: string } };
    api.spec.caBundle = 'Cg==';
    await t.controller.reconcile();
    assert.deepEqual(t.writes, [
      `apply APIService ${apiServiceName}`,
      'apply Service cg-system/cluster-gateway',
      'apply Deployment cg-system/cluster-gateway',
    ]);
    assert.equal((t.deployment()?.spec as { replicas: number } | undefined)?.replicas, 2);
    assert.notEqual(
      (t.stores.apiServices.map.get(apiServiceName)?.spec as { caBundle: string } | undefined)?.caBundle,
      'Cg==',
    );

    t.stores.apiServices.map.clear();
    t.writes.length = 0;
    await t.controller.reconcile();
    assert.ok(t.writes.includes(`apply APIService ${apiServiceName}`), 'registered again at once');
  });

  test("someone else's APIService is taken over only once the gateway serves", async () => {
    const t = setup();
    t.stores.apiServices.map.set(apiServiceName, {
      kind: 'APIService',
      metadata: { name: apiServiceName, uid: 'theirs' },
      spec: { service: { namespace: 'elsewhere', name: 'their-gateway', port: 443 } },
    });
    await t.controller.reconcile();
    assert.ok(!t.writes.some((w) => w.includes('APIService')));
    assert.match(t.events.at(-1)?.message ?? '', /still points at another service/);
    t.markAvailable(1);
    await t.controller.reconcile();
    assert.ok(t.writes.includes(`apply APIService ${apiServiceName}`));
    assert.deepEqual(
      (t.stores.apiServices.map.get(apiServiceName)?.spec as { service: unknown } | undefined)?.service,
      {
        namespace: 'cg-system',
        name: 'cluster-gateway',
        port: 443,
      },
    );
  });

  test('the owner ClusterRole missing or being deleted (an uninstall): nothing is written', async () => {
    const t = setup();
    t.stores.owner.map.clear();
    await t.controller.reconcile();
    const deleting = setup();
    (deleting.stores.owner.map.get('cg-manager')?.metadata as Record<string, unknown>).deletionTimestamp =
      '2026-01-01T00:00:00Z';
    await deleting.controller.reconcile();
    assert.deepEqual([...t.writes, ...deleting.writes], []);
  });

  test('objects with the gateway labels that are no longer wanted are deleted', async () => {
    const t = setup();
    await t.controller.reconcile();
    const stale = structuredClone(
      t.stores.roles.map.get('open-cluster-management-credentials/cluster-gateway:credentials'),
    );
    assert.ok(stale?.metadata);
    stale.metadata.namespace = 'old-credentials';
    t.stores.roles.map.set('old-credentials/cluster-gateway:credentials', stale);
    t.writes.length = 0;
    await t.controller.reconcile();
    assert.deepEqual(t.writes, [
      'delete /apis/rbac.authorization.k8s.io/v1/namespaces/old-credentials/roles/cluster-gateway:credentials',
    ]);
  });

  test('an object with the gateway labels it may not delete (403) is left alone; the others still go', async () => {
    const t = setup();
    await t.controller.reconcile();
    const role = t.stores.clusterRoles.map.get('cluster-gateway:gateway');
    assert.ok(role?.metadata);
    const foreign = structuredClone(role);
    foreign.metadata = { ...foreign.metadata, name: 'someone-elses' };
    t.stores.clusterRoles.map.set('someone-elses', foreign);
    const stale = structuredClone(
      t.stores.roles.map.get('open-cluster-management-credentials/cluster-gateway:credentials'),
    );
    assert.ok(stale?.metadata);
    stale.metadata.namespace = 'old-credentials';
    t.stores.roles.map.set('old-credentials/cluster-gateway:credentials', stale);
    t.forbid('/apis/rbac.authorization.k8s.io/v1/clusterroles/someone-elses');
    t.writes.length = 0;
    await t.controller.reconcile();
    assert.deepEqual(t.writes, [
      'delete /apis/rbac.authorization.k8s.io/v1/clusterroles/someone-elses',
      'delete /apis/rbac.authorization.k8s.io/v1/namespaces/old-credentials/roles/cluster-gateway:credentials',
    ]);
    assert.ok(t.stores.clusterRoles.map.has('someone-elses'), 'still there');
  });

  test('a setting the manager drops is dropped on the object (the spec hash changes)', async () => {
    const t = setup({ resources: { limits: { memory: '256Mi' } } });
    await t.controller.reconcile();
    const before = t.deployment()?.metadata?.annotations?.[specHashAnnotation];
    const again = setup({ resources: {} });
    again.stores.deployments.map.set(
      'cg-system/cluster-gateway',
      structuredClone(t.deployment() as KubeObject),
    );
    await again.controller.reconcile();
    assert.ok(again.writes.includes('apply Deployment cg-system/cluster-gateway'));
    assert.notEqual(again.deployment()?.metadata?.annotations?.[specHashAnnotation], before);
  });

  test('CA rotation: a new CA when a third of its life is left, both CAs in the caBundle', async () => {
    let now = Date.now();
    const t = setup({ caValiditySeconds: 30 * 86400, certificateValiditySeconds: 10 * 86400 }, () => now);
    await t.controller.reconcile();
    t.markAvailable(1);
    await t.controller.reconcile();
    const caOf = () =>
      Buffer.from(
        dataOf(t.stores.secrets.map.get('cg-system/cluster-gateway-tls'))['ca.crt'] ?? '',
        'base64',
      ).toString();
    const oldCa = caOf();
    now += 25 * day; // 5 of 30 days left
    t.writes.length = 0;
    await t.controller.reconcile();
    // The aggregator learns the new CA before the gateway gets a certificate signed by it.
    assert.deepEqual(
      t.writes.filter((w) => /APIService|Secret/.test(w)),
      [`apply APIService ${apiServiceName}`, 'apply Secret cg-system/cluster-gateway-tls'],
    );
    const newCa = caOf();
    assert.notEqual(newCa, oldCa);
    const bundle = Buffer.from(
      String(
        (t.stores.apiServices.map.get(apiServiceName)?.spec as { caBundle: string } | undefined)?.caBundle,
      ),
      'base64',
    ).toString();
    assert.ok(bundle.includes(newCa.trim()) && bundle.includes(oldCa.trim()), 'both CAs trusted');
  });

  test('the verdict key in the TLS Secret: added to a Secret without one, the same through leaf renewal and CA rotation', async () => {
    let now = Date.now();
    const t = setup({ caValiditySeconds: 30 * 86400, certificateValiditySeconds: 10 * 86400 }, () => now);
    // A Secret an older manager wrote: valid certificates, no verdict key.
    const older = await servingCertificate(
      {},
      {
        hosts: servingHostsOf(t.controller.names.name, t.controller.names.namespace),
        subject: 'cluster-gateway.cg-system',
        caValidForMs: 30 * day,
        servingValidForMs: 10 * day,
      },
      now,
    );
    const { 'verdict.key': _none, ...certificatesOnly } = older.data;
    t.stores.secrets.map.set('cg-system/cluster-gateway-tls', {
      kind: 'Secret',
      metadata: { name: 'cluster-gateway-tls', namespace: 'cg-system', resourceVersion: '0' },
      data: encodeSecretData(certificatesOnly),
    });
    await t.controller.reconcile();
    t.markAvailable(1);
    await t.controller.reconcile();
    const secretData = () => dataOf(t.stores.secrets.map.get('cg-system/cluster-gateway-tls'));
    const decoded = (k: string) => Buffer.from(secretData()[k] ?? '', 'base64').toString();
    const key = decoded('verdict.key');
    assert.match(key, /^[0-9a-f]{64}$/, 'added');
    assert.equal(decoded('tls.crt'), certificatesOnly['tls.crt'], 'the certificates were left as they were');
    const firstCa = decoded('ca.crt');

    now += 7 * day; // the leaf (10 days) has a third of its life left
    await t.controller.reconcile();
    assert.notEqual(decoded('tls.crt'), certificatesOnly['tls.crt'], 'leaf renewed');
    assert.equal(decoded('verdict.key'), key, 'kept through the leaf renewal');
    now += 18 * day; // 5 of the CA's 30 days left
    await t.controller.reconcile();
    assert.notEqual(decoded('ca.crt'), firstCa, 'CA rotated');
    assert.equal(decoded('verdict.key'), key, 'kept through the CA rotation');

    // The pod gets it, and the gateway is told where.
    const pod = specOf<{ template: { spec: PodSpecView } }>(t.deployment()).template.spec;
    const tls = pod.volumes.find((v) => v.name === 'tls');
    assert.ok(tls?.secret?.items?.some((i) => i.key === 'verdict.key' && i.path === 'verdict.key'));
    assert.ok(
      pod.containers[0]?.args.includes('--probe-verdict-key-file=/etc/cluster-gateway/tls/verdict.key'),
    );
  });

  test('a rotation is waited for in the cache: the reconcile after it does not rotate again from the old data', async () => {
    const t = setup({ caValiditySeconds: 120, certificateValiditySeconds: 60 }, Date.now, 150);
    // A CA of a year, from before a helm upgrade lowered the validities: rotated at once.
    const before = await servingCertificate(
      {},
      { hosts: ['x'], subject: 'x', caValidForMs: 365 * day, servingValidForMs: 30 * day },
      Date.now(),
    );
    t.stores.secrets.map.set('cg-system/cluster-gateway-tls', {
      kind: 'Secret',
      metadata: { name: 'cluster-gateway-tls', namespace: 'cg-system', resourceVersion: '0' },
      data: encodeSecretData(before.data),
    });
    await t.controller.reconcile();
    t.markAvailable(1);
    const secretWrites = () => t.writes.filter((w) => w.startsWith('apply Secret')).length;
    assert.equal(secretWrites(), 1, 'the CA rotated');
    // An event (the Deployment's status, say) wakes the controller at once: it sees the new CA, not the old.
    await t.controller.reconcile();
    assert.equal(secretWrites(), 1, 'no second rotation');
    const bundle = Buffer.from(
      String(
        (t.stores.apiServices.map.get(apiServiceName)?.spec as { caBundle: string } | undefined)?.caBundle,
      ),
      'base64',
    ).toString();
    assert.equal((bundle.match(/BEGIN CERTIFICATE/g) ?? []).length, 2, 'the new CA and the one before it');
  });

  test('test validities: the requeue is the rotation point, not an immediate loop', async () => {
    const now = Date.now();
    const t = setup({ caValiditySeconds: 120, certificateValiditySeconds: 60 }, () => now);
    await t.controller.reconcile();
    t.markAvailable(1);
    const result = await t.controller.reconcile();
    const after = (result as { requeueAfterMs: number }).requeueAfterMs;
    assert.ok(after > 30_000 && after <= 38_000, `requeued after ${after} ms`);
  });

  test('a maintenance window: a due rotation waits for the tick', async () => {
    let now = Date.now();
    // Every hour at minute 0 (UTC); the leaf is due 20 days after issue, with 10 of its 30 days left.
    const t = setup(
      {
        caValiditySeconds: 365 * 86400,
        certificateValiditySeconds: 30 * 86400,
        rotationSchedule: '0 * * * *',
      },
      () => now,
    );
    await t.controller.reconcile();
    t.markAvailable(1);
    await t.controller.reconcile();
    const leafOf = () => dataOf(t.stores.secrets.map.get('cg-system/cluster-gateway-tls'))['tls.crt'];
    const first = leafOf();
    const due = now + 20 * day;
    const tick = Math.ceil((due + 1) / 3600_000) * 3600_000;
    now = tick - 1000; // due, before the window
    const waiting = await t.controller.reconcile();
    assert.equal(leafOf(), first, 'not yet');
    assert.equal((waiting as { requeueAfterMs: number }).requeueAfterMs, 1000, 'requeued for the tick');
    now = tick + 20;
    await t.controller.reconcile();
    assert.notEqual(leafOf(), first, 'rotated at the tick');
  });

  test('an external name: an ExternalName Service, the APIService on the host port', async () => {
    const t = setup({ serviceExternalName: 'localhost', hostPort: 31443 });
    await t.controller.reconcile();
    t.markAvailable(1);
    await t.controller.reconcile();
    const svc = t.stores.services.map.get('cg-system/cluster-gateway') as KubeObject & {
      spec: Record<string, unknown>;
    };
    assert.equal(svc.spec.type, 'ExternalName');
    assert.equal(svc.spec.externalName, 'localhost');
    assert.equal(
      specOf<{ service: { port: number } }>(t.stores.apiServices.map.get(apiServiceName)).service.port,
      31443,
    );
  });
});

describe('differs', () => {
  test('server defaults and status do not count; a changed or missing field does', () => {
    const desired = { kind: 'X', spec: { a: 1, list: [{ b: 2 }] } };
    assert.equal(
      differs(desired, { kind: 'X', spec: { a: 1, list: [{ b: 2, c: 3 }], d: 4 }, status: {} }),
      false,
    );
    assert.equal(differs(desired, { kind: 'X', spec: { a: 2, list: [{ b: 2 }] } }), true);
    assert.equal(differs(desired, { kind: 'X', spec: { list: [{ b: 2 }] } }), true);
  });

  test('apiVersion and kind do not count: list items lack them, watch events carry them', () => {
    const desired = { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'gw' } };
    assert.equal(differs(desired, { metadata: { name: 'gw', uid: 'u' } }), false);
  });

  test('insecureSkipTLSVerify false equals its omission, never a true', () => {
    const desired = { kind: 'APIService', spec: { caBundle: 'x', insecureSkipTLSVerify: false } };
    assert.equal(differs(desired, { kind: 'APIService', spec: { caBundle: 'x' } }), false);
    assert.equal(
      differs(desired, { kind: 'APIService', spec: { caBundle: 'x', insecureSkipTLSVerify: true } }),
      true,
    );
  });
});

test('firstDifference names the field that drifted', () => {
  const desired = { spec: { replicas: 2, template: { args: ['a', 'b'] } } };
  assert.equal(
    firstDifference(desired, { spec: { replicas: 2, template: { args: ['a', 'b'] }, x: 1 } }),
    undefined,
  );
  assert.equal(
    firstDifference(desired, { spec: { replicas: 7, template: { args: ['a', 'b'] } } }),
    'spec.replicas',
  );
  assert.equal(
    firstDifference(desired, { spec: { replicas: 2, template: { args: ['a'] } } }),
    'spec.template.args',
  );
  assert.equal(
    firstDifference(desired, { spec: { replicas: 2, template: { args: ['a', 'c'] } } }),
    'spec.template.args[1]',
  );
});

/**
 * Least privilege of the installed chart, through the real hub's RBAC and admission (issue 30, item 7):
 * charts/cluster-gateway installed as a user installs it (its own release and namespaces, one gateway
 * replica, OCM integration off), then server-side dry runs (`?dryRun=All`: authorized and admitted, never
 * stored) as the manager's and the gateway's real ServiceAccounts and as a namespace editor, by
 * impersonation from the environment's admin kubeconfig:
 *
 * - the manager may no longer delete clusterrolebinding/cluster-admin or clusterrole/system:auth-delegator
 *   (the chart's manager-writes policy), create or update a Lease in kube-system, read a Secret of the
 *   release namespace that is not its own, or create an unrelated MutatingWebhookConfiguration (RBAC by name);
 * - the gateway may change only annotations under status.cluster.core.oam.dev/ on a ManagedCluster: its
 *   spec (hubAcceptsClient, the client URL and CA), labels and other annotations are refused
 *   (managedcluster-annotations policy), while a health annotation is allowed;
 * - a user bound to the built-in `edit` ClusterRole in the gateway's namespace (who may write Leases there)
 *   may not create a Lease named like a tunnel Lease or carrying the tunnel Lease label, nor touch the
 *   prober's; the admin may not either; the gateway's ServiceAccount may (tunnel-leases policy);
 * - and the real manager and gateway still work: the manager made the gateway and registered its
 *   APIService, and the gateway keeps renewing its prober Lease (a tunnel-policy Lease) after the policies
 *   are in place.
 *
 * Like e2e/gateway-replicas.test.ts, the installed manager takes over the APIService; `after` deletes what the
 * install left and registers the environment's APIService again.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { nodeChartValues } from '../hack/localenv/chart.ts';
import { type Rollout, rolloutComplete } from '../hack/localenv/rollout.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import { apiServicePath } from '../manager/addon/gateway-deploy/names.ts';
import { KubeClient, type KubeObject } from '../shared/kube/client.ts';
import { StatusError } from '../shared/kube/status.ts';
import { environmentState, hubClient } from './support/environment.ts';
import { helm } from './support/helm.ts';
import { awaitInstallGone, restoreEnvironmentApiService } from './support/installed-chart.ts';

const release = 'cg-perms';
const namespace = 'cluster-gateway-perms';
const credentialNamespace = 'cluster-gateway-perms-credentials';
const addon = 'cluster-gateway';
const gatewayName = 'cluster-gateway';
const managerName = `${release}-cluster-gateway-addon-manager`;
const chart = path.join(import.meta.dirname, '..', 'charts', 'cluster-gateway');
const managerSA = `system:serviceaccount:${namespace}:${managerName}`;
const gatewaySA = `system:serviceaccount:${namespace}:${gatewayName}`;
const editor = 'cg-perms-editor';
const policies = [
  'managedcluster-annotations',
  'tunnel-leases',
  'manager-writes',
  'klusterlet-annotations',
].map((p) => `${release}-cluster-gateway-${p}`);
const cmaPath = `/apis/addon.open-cluster-management.io/v1alpha1/clustermanagementaddons/${addon}`;
const webhookConfigPath = `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${addon}-addon-available`;
const leases = (ns: string) => `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`;
const clusterPath = '/apis/cluster.open-cluster-management.io/v1/managedclusters/cluster1';
const probeLease = 'cg-perms-probe';
const notTheirs = 'cg-perms-not-theirs';

type ApiService = KubeObject & { spec: { service?: { namespace: string; name: string } } };
type Lease = KubeObject & { spec?: { holderIdentity?: string; renewTime?: string } };

let hub: KubeClient;
let environmentApiService: ApiService;
let cmaExisted = false;
let webhookExisted = false;
let installed = false;

const sameService = (a: ApiService, b: ApiService) =>
  JSON.stringify(a.spec.service) === JSON.stringify(b.spec.service);

/**
 * A request as `user` (impersonated by the admin; `user@group` adds one group), server-side dry run: its
 * status code and message.
 */
async function dryRun(
  who: string,
  method: string,
  apiPath: string,
  body?: unknown,
  contentType?: string,
): Promise<{ code: number; message: string }> {
  const sep = apiPath.includes('?') ? '&' : '?';
  const [user = '', group] = who.split('@');
  try {
    await hub.request(method, method === 'GET' ? apiPath : `${apiPath}${sep}dryRun=All`, {
      headers: { 'Impersonate-User': user, ...(group ? { 'Impersonate-Group': group } : {}) },
      ...(body === undefined ? {} : { body }),
      ...(contentType ? { contentType } : {}),
    });
    return { code: 200, message: '' };
  } catch (err) {
    if (!(err instanceof StatusError)) throw err;
    return { code: err.code, message: err.message };
  }
}

const mergePatch = 'application/merge-patch+json';
const lease = (name: string, labels?: Record<string, string>) => ({
  apiVersion: 'coordination.k8s.io/v1',
  kind: 'Lease',
  metadata: { name, ...(labels ? { labels } : {}) },
  spec: { holderIdentity: 'forged', leaseDurationSeconds: 60 },
});

function refused(result: { code: number; message: string }, what: string, message?: RegExp): void {
  assert.equal(result.code, 403, `${what}: refused (got ${result.code} ${result.message})`);
  if (message) assert.match(result.message, message, what);
}
function allowed(result: { code: number; message: string }, what: string): void {
  assert.ok(
    result.code >= 200 && result.code < 300,
    `${what}: allowed (got ${result.code} ${result.message})`,
  );
}

describe('the installed chart: least privilege by name, and its admission policies', () => {
  before(async () => {
    hub = await hubClient();
    const env = environmentState();
    assert.ok(env.image, 'the e2e environment runs real nodes and their image (e2e/setup.ts: nodes: true)');
    environmentApiService = await hub.get<ApiService>(apiServicePath);
    cmaExisted = !!(await hub.getOptional(cmaPath));
    webhookExisted = !!(await hub.getOptional(webhookConfigPath));
    const started = Date.now();
    await helm(
      'install',
      release,
      chart,
      '--namespace',
      namespace,
      '--create-namespace',
      ...nodeChartValues({ image: env.image }, [
        'gateway.replicas=1',
        `gateway.credentialNamespace.name=${credentialNamespace}`,
        'gateway.credentialNamespace.create=true',
        'gateway.ocmIntegration=false',
      ]),
    );
    installed = true;
    // The manager, under the narrowed RBAC and the policies, deploys the gateway and registers its APIService.
    await waitFor(
      'the APIService to point at the installed gateway and be Available',
      async () => {
        const obj = await hub.getOptional<ApiService & { status?: { conditions?: Condition[] } }>(
          apiServicePath,
        );
        return (
          obj?.spec.service?.namespace === namespace &&
          obj.status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True')
        );
      },
      { timeoutMs: 120_000 },
    );
    await waitFor('the gateway Deployment rolled out', async () =>
      rolloutComplete(
        await hub.get<Rollout>(`/apis/apps/v1/namespaces/${namespace}/deployments/${gatewayName}`),
        1,
      ),
    );
    // What the dry runs read or update: a Lease in kube-system, a Secret of the release namespace no
    // component of the chart owns, and an editor of the gateway's namespace.
    await hub.create(leases('kube-system'), lease(probeLease));
    await hub.create(`/api/v1/namespaces/${namespace}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: notTheirs },
      stringData: { token: 'not-theirs' },
    });
    await hub.create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: editor },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: editor }],
    });
    console.log(
      `[chart-permissions] helm install -> APIService Available: ${(Date.now() - started) / 1000} s`,
    );
  });

  after(async () => {
    const attempt = async (what: string, step: () => Promise<unknown>) =>
      step().catch((err: Error) => console.log(`[chart-permissions] cleanup: ${what}: ${err.message}`));
    await attempt('the kube-system Lease', () => hub.delete(`${leases('kube-system')}/${probeLease}`));
    if (installed) await attempt('helm uninstall', () => helm('uninstall', release, '-n', namespace));
    await attempt('leftovers', async () => {
      if (!cmaExisted) await hub.delete(cmaPath);
      if (!webhookExisted) await hub.delete(webhookConfigPath);
      const current = await hub.getOptional<ApiService>(apiServicePath);
      if (current && !sameService(current, environmentApiService)) await hub.delete(apiServicePath);
      await hub.delete(`/api/v1/namespaces/${namespace}`);
      await hub.delete(`/api/v1/namespaces/${credentialNamespace}`);
    });
    await awaitInstallGone(hub, [namespace, credentialNamespace], attempt);
    try {
      // Not swallowed: the files after this one need the environment's gateway behind the APIService again.
      await restoreEnvironmentApiService(hub, environmentApiService.spec);
    } finally {
      hub.close();
    }
  });

  test("the chart's admission policies are installed, bound and type-checked without a warning", async () => {
    for (const name of policies) {
      const status = await waitFor(
        `ValidatingAdmissionPolicy ${name} type-checked`,
        async () => {
          const p = await hub.getOptional<
            KubeObject & { metadata: { generation?: number }; status?: PolicyStatus }
          >(`/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/${name}`);
          return p && p.status?.observedGeneration === p.metadata.generation ? p.status : undefined;
        },
        { timeoutMs: 10_000 },
      );
      assert.deepEqual(status.typeChecking?.expressionWarnings ?? [], [], `${name}: no CEL warnings`);
      assert.ok(
        await hub.getOptional(
          `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/${name}`,
        ),
        `${name} is bound`,
      );
    }
  });

  test("the manager's ServiceAccount: cluster-admin, system:auth-delegator, kube-system Leases, others' Secrets and webhooks are refused", async () => {
    const rbac = '/apis/rbac.authorization.k8s.io/v1';
    const makes = /writes only the roles and bindings it makes/;
    refused(
      await dryRun(managerSA, 'DELETE', `${rbac}/clusterrolebindings/cluster-admin`),
      'delete clusterrolebinding/cluster-admin',
      makes,
    );
    refused(
      await dryRun(managerSA, 'DELETE', `${rbac}/clusterroles/system:auth-delegator`),
      'delete clusterrole/system:auth-delegator',
      makes,
    );
    const kubeSystemLease = await hub.get<Lease>(`${leases('kube-system')}/${probeLease}`);
    refused(
      await dryRun(managerSA, 'PUT', `${leases('kube-system')}/${probeLease}`, {
        ...kubeSystemLease,
        spec: { ...kubeSystemLease.spec, holderIdentity: 'the-manager' },
      }),
      'update a Lease in kube-system',
    );
    refused(
      await dryRun(managerSA, 'POST', leases('kube-system'), lease('cg-perms-new')),
      'create a Lease in kube-system',
      /writes Leases named cluster-gateway/,
    );
    refused(
      await dryRun(managerSA, 'GET', `/api/v1/namespaces/${namespace}/secrets/${notTheirs}`),
      'get a Secret of the release namespace not its own',
    );
    refused(await dryRun(managerSA, 'GET', `/api/v1/namespaces/${namespace}/secrets`), 'list Secrets there');
    refused(
      await dryRun(managerSA, 'POST', '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'MutatingWebhookConfiguration',
        metadata: { name: 'cg-perms-unrelated' },
        webhooks: [],
      }),
      'create an unrelated MutatingWebhookConfiguration',
    );
    // What it needs still works: its webhook's registration (server-side apply by name) and its own Secret.
    allowed(
      await dryRun(
        managerSA,
        'PATCH',
        `${webhookConfigPath}?fieldManager=cg-perms-e2e`,
        {
          apiVersion: 'admissionregistration.k8s.io/v1',
          kind: 'MutatingWebhookConfiguration',
          metadata: { name: `${addon}-addon-available` },
        },
        'application/apply-patch+yaml',
      ),
      'apply its own MutatingWebhookConfiguration',
    );
    allowed(
      await dryRun(managerSA, 'GET', `/api/v1/namespaces/${namespace}/secrets/${gatewayName}-tls`),
      "read the gateway's serving certificate Secret it makes",
    );
  });

  test("the gateway's ServiceAccount changes a ManagedCluster's status.cluster.core.oam.dev/ annotations only", async () => {
    const policy = /may not change a ManagedCluster's spec/;
    refused(
      await dryRun(gatewaySA, 'PATCH', clusterPath, { spec: { hubAcceptsClient: false } }, mergePatch),
      'patch spec.hubAcceptsClient',
      policy,
    );
    refused(
      await dryRun(
        gatewaySA,
        'PATCH',
        clusterPath,
        {
          spec: { managedClusterClientConfigs: [{ url: 'https://attacker.example:6443', caBundle: 'AAAA' }] },
        },
        mergePatch,
      ),
      'patch spec.managedClusterClientConfigs',
      policy,
    );
    refused(
      await dryRun(
        gatewaySA,
        'PATCH',
        clusterPath,
        { metadata: { labels: { 'cg-perms': 'x' } } },
        mergePatch,
      ),
      'patch a label',
      /labels, finalizers or owners/,
    );
    refused(
      await dryRun(
        gatewaySA,
        'PATCH',
        clusterPath,
        { metadata: { annotations: { 'example.com/other': 'x' } } },
        mergePatch,
      ),
      'patch another annotation',
      /annotations under status.cluster.core.oam.dev\/ only/,
    );
    allowed(
      await dryRun(
        gatewaySA,
        'PATCH',
        clusterPath,
        { metadata: { annotations: { 'status.cluster.core.oam.dev/healthy': 'false' } } },
        mergePatch,
      ),
      'patch a status.cluster.core.oam.dev/ annotation',
    );
  });

  test("a managed cluster's klusterlet may not change the gateway's annotations on its ManagedCluster, others it may", async () => {
    // cluster1's own registration agent credential, as OCM issued it (it may update its ManagedCluster, no patch).
    const klusterlet = await KubeClient.fromKubeconfig(
      path.join(environmentState().stateDir, 'klusterlet', 'cluster1', 'hub-kubeconfig', 'kubeconfig'),
    );
    try {
      // A read-modify-write: a 409 (the ManagedCluster changed in between, e.g. its status) reads it again.
      const put = async (annotations: Record<string, string>) => {
        for (let attempt = 1; ; attempt++) {
          const result = await putOnce(annotations);
          if (result.code !== 409 || attempt === 10) return result;
        }
      };
      const putOnce = async (annotations: Record<string, string>) => {
        const current = await klusterlet.get<KubeObject>(clusterPath);
        try {
          await klusterlet.request('PUT', `${clusterPath}?dryRun=All`, {
            body: {
              ...current,
              metadata: {
                ...current.metadata,
                annotations: { ...current.metadata?.annotations, ...annotations },
              },
            },
          });
          return { code: 200, message: '' };
        } catch (err) {
          if (!(err instanceof StatusError)) throw err;
          return { code: err.code, message: err.message };
        }
      };
      const policy = /may not change the cluster-gateway annotations of its ManagedCluster/;
      for (const key of [
        'status.cluster.core.oam.dev/healthy',
        'status.cluster.core.oam.dev/probed-healthy',
        'cluster.core.oam.dev/cluster-gateway-proxy-configuration',
      ]) {
        refused(await put({ [key]: 'forged' }), `klusterlet sets ${key}`, policy);
      }
      allowed(await put({ 'example.com/klusterlet-own': 'x' }), 'klusterlet sets an annotation of its own');
    } finally {
      klusterlet.close();
    }
  });

  test("tunnel Leases in the gateway's namespace: a namespace editor and the admin are refused, the gateway is not", async () => {
    const here = leases(namespace);
    const onlyTheGateway = new RegExp(`only the gateway's ServiceAccount ${gatewaySA} may`);
    // The editor may write Leases here (the built-in edit role): what refuses the next ones is the policy.
    allowed(
      await dryRun(editor, 'POST', here, lease('cg-perms-unrelated')),
      'the editor creates another Lease',
    );
    refused(
      await dryRun(editor, 'POST', here, lease('cluster-gateway-tunnel-x')),
      'the editor creates cluster-gateway-tunnel-x',
      onlyTheGateway,
    );
    refused(
      await dryRun(editor, 'POST', here, lease('innocent', { 'cluster.core.oam.dev/tunnel-lease': 'true' })),
      'the editor creates a Lease labelled cluster.core.oam.dev/tunnel-lease',
      onlyTheGateway,
    );
    const prober = await waitFor('the gateway to hold its prober Lease', async () => {
      const l = await hub.getOptional<Lease>(`${here}/cluster-gateway-prober`);
      return l?.spec?.holderIdentity ? l : undefined;
    });
    refused(
      await dryRun(editor, 'PUT', `${here}/cluster-gateway-prober`, {
        ...prober,
        spec: { ...prober.spec, holderIdentity: 'forged' },
      }),
      "the editor takes the prober's Lease",
      onlyTheGateway,
    );
    refused(
      await dryRun(editor, 'DELETE', `${here}/cluster-gateway-prober`),
      "the editor deletes the prober's Lease",
      onlyTheGateway,
    );
    refused(
      await dryRun('cg-perms-admin@system:masters', 'POST', here, lease('cluster-gateway-tunnel-y')),
      'a cluster admin (system:masters)',
      onlyTheGateway,
    );
    allowed(
      await dryRun(gatewaySA, 'POST', here, lease('cluster-gateway-tunnel-x')),
      'the gateway creates a tunnel Lease',
    );
    // The real gateway keeps renewing its prober Lease (a write the policy checks) with the policies in place.
    const renewed = prober.spec?.renewTime;
    await waitFor(
      'the gateway to renew its prober Lease',
      async () => {
        const l = await hub.get<Lease>(`${here}/cluster-gateway-prober`);
        return l.spec?.renewTime !== renewed;
      },
      { timeoutMs: 20_000 },
    );
  });
});

type Condition = { type: string; status: string };
interface PolicyStatus {
  observedGeneration?: number;
  typeChecking?: { expressionWarnings?: { fieldRef: string; warning: string }[] };
}

/**
 * Open Cluster Management as plain processes: the hub (CRDs, registration
 * controller, addon manager, addon conversion webhook) and, per managed
 * cluster, the klusterlet's registration and work agents, joined the real
 * way: bootstrap kubeconfig -> CSR -> hub acceptance -> hub kubeconfig.
 * The OCM release is the one OCM_VERSION selects (binaries.ts); from v1.3
 * every OCM component reads and writes the addon APIs as v1beta1, through
 * the conversion webhook started here.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import type { KubeClient, KubeObject } from '../../shared/kube/client.ts';
import {
  approveCertificateSigningRequest,
  type CertificateSigningRequestObject,
} from '../../shared/kube/csr-approval.ts';
import { requestServiceAccountToken } from '../../shared/kube/service-account-token.ts';
import type { LocalCluster } from './apiserver.ts';
import { binaryPath, ocmBuildDir, ocmVersion } from './binaries.ts';
import { writeKubeconfig } from './kubeconfig.ts';
import { freePorts, portIsFree } from './ports.ts';
import type { Supervisor } from './supervisor.ts';
import { waitFor, waitForConditions } from './wait.ts';

const hubNamespace = 'open-cluster-management-hub';
const bootstrapNamespace = 'open-cluster-management';
const agentNamespace = 'open-cluster-management-agent';
const fieldManager = 'local-environment';

export interface OcmHub {
  hub: LocalCluster;
}

/** The CRDs of the OCM release that runs (OCM_VERSION), or OCM_CRDS. */
export function ocmCrdDir(): string {
  const dir = process.env.OCM_CRDS ?? path.join(ocmBuildDir(), 'crds');
  if (!existsSync(path.join(dir, 'hub'))) {
    const build = process.env.OCM_VERSION
      ? `OCM_VERSION=${process.env.OCM_VERSION} npm run binaries`
      : 'npm run binaries';
    throw new Error(
      `OCM ${ocmVersion()} CRDs not found in ${dir}: run "${build}" (it copies them from OCM's source)`,
    );
  }
  return dir;
}

export async function startOcmHub(
  supervisor: Supervisor,
  hub: LocalCluster,
  stateDir: string,
): Promise<OcmHub> {
  const client = hub.client;
  for (const ns of [hubNamespace, bootstrapNamespace]) await ensureNamespace(client, ns);

  // The addon CRDs serve v1alpha1 and v1beta1 and convert through OCM's webhook.
  const [webhookPort, registrationListen, addonListen, placementListen] = await freePorts(4);
  const certDir = path.join(stateDir, 'ocm-hub', 'webhook-certs');
  mkdirSync(certDir, { recursive: true });
  const webhookCert = await hub.pki.ca.issue({
    commonName: 'cluster-manager-addon-webhook',
    dnsNames: ['localhost'],
    ipAddresses: ['127.0.0.1'],
    usage: 'server',
  });
  writeFileSync(path.join(certDir, 'tls.crt'), webhookCert.cert);
  writeFileSync(path.join(certDir, 'tls.key'), webhookCert.key);
  const addon = binaryPath('addon');
  const listenerArgs = await addonWebhookListenerArgs(addon);
  if (!listenerArgs) {
    // OCM v1.2's webhook binds :8000 (health) and :8080 (metrics) with no flag to move them.
    for (const port of [8000, 8080]) {
      if (!(await portIsFree(port))) {
        throw new Error(
          `port ${port} is in use: OCM ${ocmVersion()}'s addon webhook needs ports 8000 and 8080, so only one local environment can run on a machine at a time (is another "npm start" or test run going?)`,
        );
      }
    }
  }
  const webhook = supervisor.start('hub-ocm-addon-webhook', addon, {
    args: ['webhook-server', `--port=${webhookPort}`, `--certdir=${certDir}`, ...(listenerArgs ?? [])],
    env: { KUBECONFIG: hub.kubeconfig },
  });

  const conversion = {
    strategy: 'Webhook',
    webhook: {
      clientConfig: {
        url: `https://127.0.0.1:${webhookPort}/convert`,
        caBundle: Buffer.from(hub.pki.ca.cert).toString('base64'),
      },
      conversionReviewVersions: ['v1', 'v1beta1'],
    },
  };
  await applyCrds(client, path.join(ocmCrdDir(), 'hub'), conversion);

  await client.apply(
    '/apis/rbac.authorization.k8s.io/v1/clusterroles/open-cluster-management:bootstrap',
    bootstrapClusterRole,
    fieldManager,
  );

  const registration = supervisor.start('hub-ocm-registration-controller', binaryPath('registration'), {
    args: [
      'controller',
      `--kubeconfig=${hub.kubeconfig}`,
      `--namespace=${hubNamespace}`,
      `--listen=127.0.0.1:${registrationListen}`,
      '--disable-leader-election',
    ],
  });
  const addonManager = supervisor.start('hub-ocm-addon-manager', addon, {
    args: [
      'manager',
      `--kubeconfig=${hub.kubeconfig}`,
      `--namespace=${hubNamespace}`,
      `--listen=127.0.0.1:${addonListen}`,
      '--disable-leader-election',
    ],
  });
  // Schedules Placements: OCM's addon manager installs an addon whose install strategy is Placements on
  // the clusters their PlacementDecisions name.
  const placement = supervisor.start('hub-ocm-placement-controller', binaryPath('placement'), {
    args: [
      'controller',
      `--kubeconfig=${hub.kubeconfig}`,
      `--namespace=${hubNamespace}`,
      `--listen=127.0.0.1:${placementListen}`,
      '--disable-leader-election',
    ],
  });
  // The conversion webhook must answer before anything reads v1beta1 addons.
  await waitFor(
    'the OCM addon conversion webhook to serve',
    async () => {
      await client.list('/apis/addon.open-cluster-management.io/v1beta1/managedclusteraddons?limit=1');
      return true;
    },
    {
      timeoutMs: 60_000,
      failFast: () => {
        webhook.assertRunning();
        registration.assertRunning();
        addonManager.assertRunning();
        placement.assertRunning();
      },
    },
  );
  return { hub };
}

/**
 * The flags that turn off the addon webhook's health and metrics listeners,
 * which would bind every interface: OCM v1.3 has them (`--health-probe-port`,
 * `--metrics-port`, where 0 turns a listener off; the conversion webhook's
 * readiness is checked through the hub instead), v1.2 has not (undefined).
 * Asked of the binary, so prebuilt ones (CLUSTER_GATEWAY_ASSETS) of either
 * release work too.
 */
async function addonWebhookListenerArgs(addon: string): Promise<string[] | undefined> {
  const { stdout } = await promisify(execFile)(addon, ['webhook-server', '--help'], { timeout: 30_000 });
  return stdout.includes('--health-probe-port') ? ['--health-probe-port=0', '--metrics-port=0'] : undefined;
}

/**
 * Joins `cluster` to the hub as OCM does: the registration agent starts with
 * a bootstrap kubeconfig (a token of the hub's bootstrap ServiceAccount),
 * creates the ManagedCluster and a CSR; the hub admin accepts (approves the
 * CSR, sets hubAcceptsClient); kube-controller-manager signs; the agent
 * writes its hub kubeconfig, which the work agent then uses.
 */
export async function joinManagedCluster(
  supervisor: Supervisor,
  ocm: OcmHub,
  cluster: LocalCluster,
  stateDir: string,
): Promise<void> {
  const hub = ocm.hub.client;
  const spoke = cluster.client;
  const name = cluster.name;
  await ensureNamespace(spoke, agentNamespace);
  await ensureNamespace(spoke, 'open-cluster-management-agent-addon');
  await applyCrds(spoke, path.join(ocmCrdDir(), 'managed'));

  const dir = path.join(stateDir, 'klusterlet', name);
  const hubKubeconfigDir = path.join(dir, 'hub-kubeconfig');
  mkdirSync(hubKubeconfigDir, { recursive: true });
  const bootstrapKubeconfig = writeKubeconfig(path.join(dir, 'bootstrap.kubeconfig'), {
    name: 'hub',
    server: ocm.hub.reachableServer,
    caCert: ocm.hub.pki.ca.cert,
    token: await bootstrapToken(hub),
  });
  const [registrationListen, workListen] = await freePorts(2);
  const startRegistrationAgent = () =>
    supervisor.start(`${name}-ocm-registration-agent`, binaryPath('registration'), {
      args: [
        'agent',
        `--spoke-cluster-name=${name}`,
        `--agent-id=${name}-agent`,
        `--bootstrap-kubeconfig=${bootstrapKubeconfig}`,
        `--hub-kubeconfig-dir=${hubKubeconfigDir}`,
        `--kubeconfig=${cluster.kubeconfig}`,
        `--spoke-external-server-urls=${cluster.reachableServer}`,
        `--namespace=${agentNamespace}`,
        `--listen=127.0.0.1:${registrationListen}`,
        '--disable-leader-election',
      ],
    });
  let registrationAgent = startRegistrationAgent();
  // The registration agent exits (code 255) when it reads the hub kubeconfig it is still writing ("kubeconfig
  // does not contains context"), a race of its bootstrap seen under load; in a cluster its kubelet restarts
  // it and the next start finds the files whole. So here: restarted, as a kubelet would, a few times.
  let restarts = 0;
  const alive = () => {
    if (registrationAgent.exit && restarts < 3 && registrationAgent.exit.code !== null) {
      restarts++;
      void registrationAgent.stop(); // exited already: marks the exit as handled
      registrationAgent = startRegistrationAgent();
      return;
    }
    registrationAgent.assertRunning();
  };

  // Acceptance, as `clusteradm accept` does it. The agent creates its
  // ManagedCluster with the bootstrap identity, which it drops once its CSR is
  // signed: wait for the ManagedCluster first, then approve.
  await waitFor(
    `ManagedCluster ${name}`,
    () => hub.getOptional(`/apis/cluster.open-cluster-management.io/v1/managedclusters/${name}`),
    { timeoutMs: 90_000, failFast: alive },
  );
  const csr = await waitFor(
    `the registration CSR of ${name}`,
    async () => {
      const list = await hub.list<CertificateSigningRequestObject>(
        `/apis/certificates.k8s.io/v1/certificatesigningrequests?labelSelector=open-cluster-management.io/cluster-name=${name}`,
      );
      return list.items.find((c) => !c.metadata?.labels?.['open-cluster-management.io/addon-name']);
    },
    { timeoutMs: 90_000, failFast: alive },
  );
  await approveCsr(hub, csr, 'AcceptedByLocalEnvironment');
  await hub.mergePatch(`/apis/cluster.open-cluster-management.io/v1/managedclusters/${name}`, {
    spec: { hubAcceptsClient: true },
  });
  await waitFor(
    `the hub kubeconfig of ${name}`,
    () => existsSync(path.join(hubKubeconfigDir, 'kubeconfig')),
    {
      timeoutMs: 90_000,
      failFast: alive,
    },
  );

  const workAgent = supervisor.start(`${name}-ocm-work-agent`, binaryPath('work'), {
    args: [
      'agent',
      `--spoke-cluster-name=${name}`,
      `--agent-id=${name}-agent`,
      // The work agent reads the hub kubeconfig that the registration agent wrote.
      '--workload-source-driver=kube',
      `--workload-source-config=${path.join(hubKubeconfigDir, 'kubeconfig')}`,
      `--kubeconfig=${cluster.kubeconfig}`,
      `--namespace=${agentNamespace}`,
      `--listen=127.0.0.1:${workListen}`,
      '--disable-leader-election',
    ],
  });
  await waitForConditions(
    hub,
    `/apis/cluster.open-cluster-management.io/v1/managedclusters/${name}`,
    ['ManagedClusterJoined', 'ManagedClusterConditionAvailable'],
    {
      what: `ManagedCluster ${name} to be joined and available`,
      timeoutMs: 120_000,
      failFast: () => {
        alive();
        workAgent.assertRunning();
      },
    },
  );
}

export async function approveCsr(
  hub: KubeClient,
  csr: CertificateSigningRequestObject,
  reason: string,
): Promise<void> {
  if (csr.status?.conditions?.some((c) => c.type === 'Approved')) return;
  await approveCertificateSigningRequest(hub, csr, reason, 'approved by the local environment');
}

/** A token of the hub's bootstrap ServiceAccount, which may only create CSRs and ManagedClusters. */
async function bootstrapToken(hub: KubeClient): Promise<string> {
  const sa = 'agent-registration-bootstrap';
  await hub.apply(
    `/api/v1/namespaces/${bootstrapNamespace}/serviceaccounts/${sa}`,
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: sa, namespace: bootstrapNamespace } },
    fieldManager,
  );
  await hub.apply(
    '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/open-cluster-management:bootstrap:agent-registration',
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'open-cluster-management:bootstrap:agent-registration' },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: 'open-cluster-management:bootstrap',
      },
      subjects: [{ kind: 'ServiceAccount', name: sa, namespace: bootstrapNamespace }],
    },
    fieldManager,
  );
  // One bootstrap identity serves every cluster, as `clusteradm init` sets it up.
  return requestServiceAccountToken(hub, bootstrapNamespace, sa);
}

/** The bootstrap ClusterRole that `clusteradm init` creates. */
const bootstrapClusterRole = {
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRole',
  metadata: { name: 'open-cluster-management:bootstrap' },
  rules: [
    { apiGroups: [''], resources: ['configmaps'], verbs: ['get'] },
    {
      apiGroups: ['certificates.k8s.io'],
      resources: ['certificatesigningrequests'],
      verbs: ['create', 'get', 'list', 'watch'],
    },
    {
      apiGroups: ['cluster.open-cluster-management.io'],
      resources: ['managedclusters'],
      verbs: ['get', 'create', 'list', 'watch'],
    },
    {
      apiGroups: ['cluster.open-cluster-management.io'],
      resources: ['managedclustersets/join'],
      verbs: ['create'],
    },
  ],
};

export async function ensureNamespace(client: KubeClient, name: string): Promise<void> {
  await client.apply(
    `/api/v1/namespaces/${name}`,
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name } },
    fieldManager,
  );
}

/**
 * Applies every CRD in `dir` and waits until each is Established. OCM ships
 * some as Go templates (the webhook caBundle and namespace); `conversion`
 * replaces their conversion stanza with one that reaches the local webhook.
 */
export async function applyCrds(client: KubeClient, dir: string, conversion?: unknown): Promise<void> {
  const names: string[] = [];
  for (const file of readdirSync(dir).sort()) {
    if (!file.endsWith('.yaml')) continue;
    const text = readFileSync(path.join(dir, file), 'utf8').replace(/\{\{[^}]*\}\}/g, 'templated');
    for (const doc of parseAllDocuments(text)) {
      const crd = doc.toJSON() as (KubeObject & { spec: { conversion?: unknown } }) | null;
      if (crd?.kind !== 'CustomResourceDefinition') continue;
      if (crd.spec.conversion && (crd.spec.conversion as { strategy?: string }).strategy === 'Webhook') {
        if (!conversion) throw new Error(`${file} needs a conversion webhook`);
        crd.spec.conversion = conversion;
      }
      const name = crd.metadata?.name ?? '';
      await client.apply(
        `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`,
        crd,
        fieldManager,
      );
      names.push(name);
    }
  }
  for (const name of names) {
    await waitForConditions(client, `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`, [
      'Established',
    ]);
  }
}

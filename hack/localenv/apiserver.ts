import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { KubeClient } from '../../shared/kube/client.ts';
import { createCertificateAuthority } from '../../shared/pki.ts';
import { binaryPath } from './binaries.ts';
import { type ClusterPki, createClusterPki, frontProxyClientName } from './cluster-pki.ts';
import { hostAddress, kubernetesServiceIp } from './host-changes.ts';
import { writeKubeconfig } from './kubeconfig.ts';
import { freePort } from './ports.ts';
import type { ManagedProcess, Supervisor } from './supervisor.ts';
import { waitFor } from './wait.ts';

export interface LocalCluster {
  name: string;
  /** https://127.0.0.1:<port> */
  server: string;
  /**
   * The same apiserver as the pods of the environment's nodes reach it: https://10.244.0.1:<port>, the
   * host's address on their bridge (host-changes.ts).
   */
  podServer: string;
  /**
   * What the environment gives the processes it configures (OCM's agents and, through them, the
   * addon's agents; the ManagedCluster's URL): podServer when the environment has nodes, else server.
   */
  reachableServer: string;
  serviceCidr: string;
  /** Admin (system:masters) kubeconfig. */
  kubeconfig: string;
  pki: ClusterPki;
  /** Files written for the control plane (CA, keys), by role. */
  files: Record<'ca' | 'caKey' | 'saKey' | 'saPub' | 'frontProxyCa' | 'webhookClientCa', string>;
  client: KubeClient;
  apiserver: ManagedProcess;
}

/**
 * Starts a kube-apiserver for `name` on a free loopback port, storing its
 * objects under `/<name>` in the shared etcd. RBAC on, front-proxy
 * (requestheader) flags set so the kube-aggregator can reach aggregated
 * API servers, service-account tokens signed with the cluster's own key.
 *
 * It authenticates itself to admission webhooks with a client certificate (an
 * --admission-control-config-file whose WebhookAdmissionConfiguration kubeconfig has a `*` user),
 * signed by a CA of its own (`files.webhookClientCa`, `<stateDir>/<name>/webhook-client-ca.crt`), as
 * a hardened control plane does: webhooks that verify callers (the addon manager's, with
 * --webhook-client-ca) then know the AdmissionReview comes from this apiserver.
 */
export async function startApiserver(
  supervisor: Supervisor,
  options: {
    name: string;
    stateDir: string;
    etcdUrl: string;
    serviceCidr: string;
    /** Refuse TLS 1.2 clients (`--tls-min-version=VersionTLS13`), as hardened clusters do. */
    tls13Only?: boolean;
    /** The environment has nodes: what it configures reaches this apiserver at podServer. */
    podNetwork?: boolean;
    /** `--request-timeout` for requests that are not long-running (kube-apiserver's default: 60 s). */
    requestTimeoutSeconds?: number;
  },
): Promise<LocalCluster> {
  const { name } = options;
  const dir = path.join(options.stateDir, name);
  mkdirSync(dir, { recursive: true });
  const pki = await createClusterPki(name, kubernetesServiceIp(options.serviceCidr));
  const write = (file: string, content: string) => {
    const full = path.join(dir, file);
    writeFileSync(full, content, { mode: 0o600 });
    return full;
  };
  const files = {
    ca: write('ca.crt', pki.ca.cert),
    caKey: write('ca.key', pki.ca.key),
    saKey: write('sa.key', pki.serviceAccountKey),
    saPub: write('sa.pub', pki.serviceAccountPublicKey),
    frontProxyCa: write('front-proxy-ca.crt', pki.frontProxyCa.cert),
    webhookClientCa: '',
  };
  const webhookClientCa = await createCertificateAuthority(`${name}-webhook-client-ca`);
  const webhookClient = await webhookClientCa.issue({
    commonName: `${name}-kube-apiserver-webhook-client`,
    usage: 'client',
  });
  files.webhookClientCa = write('webhook-client-ca.crt', webhookClientCa.cert);
  // `*`: the user for every webhook host (k8s.io/apiserver pkg/admission/plugin/webhook/config).
  const webhookKubeconfig = write(
    'admission-webhooks.kubeconfig',
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      users: [
        {
          name: '*',
          user: {
            'client-certificate': write('webhook-client.crt', webhookClient.cert),
            'client-key': write('webhook-client.key', webhookClient.key),
          },
        },
      ],
    }),
  );
  const webhookAdmission = {
    apiVersion: 'apiserver.config.k8s.io/v1',
    kind: 'WebhookAdmissionConfiguration',
    kubeConfigFile: webhookKubeconfig,
  };
  const admissionConfig = write(
    'admission-config.yaml',
    JSON.stringify({
      apiVersion: 'apiserver.config.k8s.io/v1',
      kind: 'AdmissionConfiguration',
      plugins: [
        { name: 'MutatingAdmissionWebhook', configuration: webhookAdmission },
        { name: 'ValidatingAdmissionWebhook', configuration: webhookAdmission },
      ],
    }),
  );
  // A fresh audit log per environment, like its fresh etcd data.
  rmSync(auditLogPath(options.stateDir, name), { force: true });
  const port = await freePort();
  const server = `https://127.0.0.1:${port}`;
  const apiserver = supervisor.start(`${name}-kube-apiserver`, binaryPath('kube-apiserver'), {
    args: [
      `--etcd-servers=${options.etcdUrl}`,
      `--etcd-prefix=/${name}`,
      // Every address: loopback for this machine's processes, the pods' bridge for the nodes' pods.
      '--bind-address=0.0.0.0',
      `--secure-port=${port}`,
      // Without a default route kube-apiserver cannot pick an address by itself.
      '--advertise-address=127.0.0.1',
      // Endpoints may not hold loopback addresses; nothing here needs the kubernetes Service's endpoints.
      '--endpoint-reconciler-type=none',
      `--service-cluster-ip-range=${options.serviceCidr}`,
      `--cert-dir=${path.join(dir, 'cert-dir')}`,
      `--tls-cert-file=${write('serving.crt', pki.serving.cert)}`,
      `--tls-private-key-file=${write('serving.key', pki.serving.key)}`,
      ...(options.tls13Only ? ['--tls-min-version=VersionTLS13'] : []),
      ...(options.requestTimeoutSeconds ? [`--request-timeout=${options.requestTimeoutSeconds}s`] : []),
      `--client-ca-file=${files.ca}`,
      '--authorization-mode=Node,RBAC',
      `--service-account-key-file=${files.saPub}`,
      `--service-account-signing-key-file=${files.saKey}`,
      '--service-account-issuer=https://kubernetes.default.svc',
      `--requestheader-client-ca-file=${files.frontProxyCa}`,
      `--requestheader-allowed-names=${frontProxyClientName}`,
      '--requestheader-username-headers=X-Remote-User',
      '--requestheader-group-headers=X-Remote-Group',
      '--requestheader-extra-headers-prefix=X-Remote-Extra-',
      `--proxy-client-cert-file=${write('front-proxy-client.crt', pki.frontProxyClient.cert)}`,
      `--proxy-client-key-file=${write('front-proxy-client.key', pki.frontProxyClient.key)}`,
      // Stand-in kubelets listen on loopback addresses (see e2e/support/kubelet).
      '--kubelet-preferred-address-types=InternalIP,Hostname',
      `--kubelet-client-certificate=${write('kubelet-client.crt', pki.kubeletClient.cert)}`,
      `--kubelet-client-key=${write('kubelet-client.key', pki.kubeletClient.key)}`,
      '--allow-privileged=true',
      `--admission-control-config-file=${admissionConfig}`,
      // With nodes there is no kube-proxy: the aggregator and the webhooks reach a Service through its
      // endpoints (pod addresses on the bridge), as on control planes outside the pod network. Without
      // nodes, Services are ExternalName aliases of this machine, which that routing refuses.
      `--enable-aggregator-routing=${!!options.podNetwork}`,
      // An audit log: what each apiserver really received, for e2e tests
      // that compare it with what the gateway authorized (auditLogPath).
      `--audit-policy-file=${write('audit-policy.yaml', auditPolicy)}`,
      `--audit-log-path=${auditLogPath(options.stateDir, name)}`,
      '--audit-log-maxsize=200',
      '--audit-log-maxbackup=1',
      '--profiling=false',
      '--v=1',
    ],
  });
  const kubeconfig = writeKubeconfig(path.join(options.stateDir, `${name}.kubeconfig`), {
    name,
    server,
    caCert: pki.ca.cert,
    client: pki.admin,
  });
  const client = await KubeClient.fromKubeconfig(kubeconfig);
  await waitFor(
    `${name} kube-apiserver to be ready`,
    async () => (await client.request<string>('GET', '/readyz')) === 'ok',
    { timeoutMs: 90_000, intervalMs: 300, failFast: () => apiserver.assertRunning() },
  );
  const podServer = `https://${hostAddress}:${port}`;
  return {
    name,
    server,
    podServer,
    reachableServer: options.podNetwork ? podServer : server,
    serviceCidr: options.serviceCidr,
    kubeconfig,
    pki,
    files,
    client,
    apiserver,
  };
}

/** The audit log (JSON lines) of cluster `name`'s kube-apiserver. */
export function auditLogPath(stateDir: string, name: string): string {
  return path.join(stateDir, name, 'audit.log');
}

/**
 * Metadata (verb, user, impersonated user, objectRef, requestURI, code) for
 * every request, RequestResponse for SubjectAccessReviews so the attributes
 * an aggregated server asked about are on record; lease renewals and events
 * are left out as noise. RequestReceived is omitted: one line per request
 * (two for watches, which also log ResponseStarted).
 */
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: RequestResponse
    resources: [{ group: authorization.k8s.io, resources: [subjectaccessreviews] }]
  - level: None
    resources:
      - { group: coordination.k8s.io, resources: [leases] }
      - { group: "", resources: [events] }
      - { group: events.k8s.io, resources: [events] }
  - level: Metadata
`;

/**
 * kube-controller-manager: signs approved kube-apiserver-client CSRs (OCM
 * registration needs it), garbage-collects owned objects and finalizes
 * namespace deletion. On a cluster with a real node (node.ts) every
 * usual controller runs, so Deployments become pods as on any cluster; without
 * one (benchmarks of the gateway alone) the deployment and replicaset
 * controllers are off: nothing would run the pods they make.
 */
export function startControllerManager(
  supervisor: Supervisor,
  cluster: LocalCluster,
  options: { withNode?: boolean } = {},
): ManagedProcess {
  const controllers = options.withNode
    ? '*,-node-ipam-controller'
    : '*,-deployment-controller,-replicaset-controller,-node-ipam-controller,-node-lifecycle-controller';
  return supervisor.start(`${cluster.name}-kube-controller-manager`, binaryPath('kube-controller-manager'), {
    args: [
      `--kubeconfig=${cluster.kubeconfig}`,
      `--authentication-kubeconfig=${cluster.kubeconfig}`,
      `--authorization-kubeconfig=${cluster.kubeconfig}`,
      '--bind-address=127.0.0.1',
      '--secure-port=0',
      '--leader-elect=false',
      `--controllers=${controllers}`,
      `--cluster-signing-cert-file=${cluster.files.ca}`,
      `--cluster-signing-key-file=${cluster.files.caKey}`,
      `--root-ca-file=${cluster.files.ca}`,
      `--service-account-private-key-file=${cluster.files.saKey}`,
      '--use-service-account-credentials=false',
      '--v=1',
    ],
  });
}

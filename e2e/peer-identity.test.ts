/**
 * The gateway replicas' peer identity (issue 30, item 2): on the peer port a replica is whoever holds a
 * client certificate of the hub's own kube-apiserver-client signer naming it
 * (`cluster-gateway-peer:<namespace>:<pod>`), obtained through a CertificateSigningRequest that the
 * addon manager approves for the gateway's ServiceAccount from that pod only. Before, any certificate
 * of the gateway's serving CA was a replica, and that CA's key sits in Secret `<gateway>-tls`: whoever
 * could read that one Secret could open relay streams into every tunnelled cluster.
 *
 * The chart is installed with two gateway replicas (pods of the image built here, on the hub's node), as
 * e2e/gateway-replicas.test.ts does, in namespaces of its own, OCM integration off; its peer ports are
 * reached at the pods' IPs. `after` leaves the environment as found (that file's cleanup).
 */
import assert from 'node:assert/strict';
import type { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import tls from 'node:tls';
import { nodeChartValues } from '../hack/localenv/chart.ts';
import { type Pod, podsOf } from '../hack/localenv/pods.ts';
import { type Rollout, rolloutComplete } from '../hack/localenv/rollout.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import {
  apiServicePath,
  gatewayLabelSelector,
  tunnelPeerPort,
} from '../manager/addon/gateway-deploy/names.ts';
import {
  type CertificateSigningRequest,
  createPeerRequest,
  csrPath,
  peerCsrObject,
} from '../manager/gateway/tunnel/peer-certificate.ts';
import { peerCommonName } from '../manager/gateway/tunnel/peer-identity.ts';
import { peerClusterHeader } from '../manager/gateway/tunnel/peers.ts';
import { KubeClient, type KubeObject } from '../shared/kube/client.ts';
import { requestServiceAccountToken } from '../shared/kube/service-account-token.ts';
import { loadCertificateAuthority } from '../shared/pki.ts';
import { parsePemBundle } from '../shared/x509-chain.ts';
import { environmentState, hubClient } from './support/environment.ts';
import { helm } from './support/helm.ts';
import { awaitInstallGone, restoreEnvironmentApiService } from './support/installed-chart.ts';
import { grantOnHub, revokeOnHub, serviceAccount } from './support/rbac.ts';

const release = 'cg-peers';
const namespace = 'cluster-gateway-peers';
const credentialNamespace = 'cluster-gateway-peers-credentials';
const addon = 'cluster-gateway';
const gatewayName = 'cluster-gateway';
const replicas = 2;
const chart = path.join(import.meta.dirname, '..', 'charts', 'cluster-gateway');
const cmaPath = `/apis/addon.open-cluster-management.io/v1alpha1/clustermanagementaddons/${addon}`;
const webhookConfigPath = `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${addon}-addon-available`;
const deploymentPath = `/apis/apps/v1/namespaces/${namespace}/deployments/${gatewayName}`;
/**
 * The gateway's `create` and `get` on certificatesigningrequests, granted here until the manager's
 * gateway RBAC (manager/addon/gateway-deploy/rbac.ts) carries them; and a ServiceAccount that is not the
 * gateway, with the same grant, to try for a peer certificate.
 */
const csrGrant = 'cg-e2e-peer-identity-csr';
const forger = 'cg-e2e-peer-forger';

type Condition = { type: string; status: string; reason?: string; message?: string };
type ApiService = KubeObject & {
  spec: { service?: { namespace: string; name: string } };
  status?: { conditions?: Condition[] };
};
type Secret = KubeObject & { data: Record<string, string> };
type GatewayPod = Pod & { ip: string };

let hub: KubeClient;
let environmentApiService: ApiService;
let cmaExisted = false;
let webhookExisted = false;
let installed = false;
let pods: GatewayPod[] = [];

const isAvailable = (obj: { status?: { conditions?: Condition[] } } | undefined) =>
  obj?.status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True') ?? false;
const decode = (b64: string | undefined) => Buffer.from(b64 ?? '', 'base64').toString('utf8');
const hubCa = () => readFileSync(path.join(environmentState().stateDir, 'hub', 'ca.crt'), 'utf8');

async function gatewayPods(): Promise<GatewayPod[]> {
  const all = await podsOf(hub, namespace, gatewayLabelSelector);
  return all.flatMap((p) =>
    p.status?.phase === 'Running' && !p.metadata.deletionTimestamp && p.status.podIP
      ? [{ ...p, ip: p.status.podIP }]
      : [],
  );
}

/** The certificate a replica's peer port presents (the handshake needs none from us; the session is then refused). */
function peerServerCertificate(ip: string): Promise<X509Certificate> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({
      host: ip,
      port: tunnelPeerPort,
      rejectUnauthorized: false,
      ALPNProtocols: ['h2'],
    });
    socket.setTimeout(5_000, () => socket.destroy(new Error('no TLS answer within 5 s')));
    socket.once('secureConnect', () => {
      const cert = socket.getPeerX509Certificate();
      socket.destroy();
      if (cert) resolve(cert);
      else reject(new Error('no server certificate'));
    });
    socket.once('error', reject);
  });
}

/**
 * A CONNECT stream on a replica's peer port with `pair` as client certificate: the HTTP status if the
 * port served the stream at all (any status means a stream was processed), else why the session ended.
 */
function peerStream(ip: string, pair: { cert: string; key: string }): Promise<number | string> {
  return new Promise((resolve) => {
    const session = http2.connect(`https://${ip}:${tunnelPeerPort}`, { ...pair, rejectUnauthorized: false });
    const timer = setTimeout(() => done('no answer within 10 s'), 10_000);
    function done(v: number | string) {
      clearTimeout(timer);
      resolve(v);
      session.destroy();
    }
    session.on('error', (err) => done(`session error: ${err.message}`));
    session.on('close', () => done('session closed'));
    const stream = session.request(
      { ':method': 'CONNECT', ':authority': 'cluster-gateway-peer:443', [peerClusterHeader]: 'cluster1' },
      { endStream: false },
    );
    stream.on('error', (err) => done(`stream error: ${err.message}`));
    stream.on('response', (h) => done(Number(h[':status'])));
    stream.on('close', () => done('stream closed without an answer'));
  });
}

/** A hub client authenticated by a bearer token. */
function tokenClient(token: string): KubeClient {
  return KubeClient.fromConnection(environmentState().hub.server, {
    ca: hubCa(),
    headers: { authorization: `Bearer ${token}` },
  });
}

/** Creates a gateway-peer CSR for `replica` as `client` and waits for the manager's verdict. */
async function verdictOn(
  client: KubeClient,
  replica: string,
): Promise<{ csr: CertificateSigningRequest; denied: Condition }> {
  const { request } = await createPeerRequest(namespace, replica);
  const created = await client.create<CertificateSigningRequest>(csrPath, peerCsrObject(request));
  const name = created.metadata.name;
  return waitFor(
    `a verdict on CSR ${name}`,
    async () => {
      const csr = await hub.getOptional<CertificateSigningRequest>(`${csrPath}/${name}`);
      const conditions = (csr?.status?.conditions ?? []) as Condition[];
      assert.ok(!conditions.some((c) => c.type === 'Approved'), `CSR ${name} must not be approved`);
      const denied = conditions.find((c) => c.type === 'Denied' && c.status === 'True');
      return csr && denied ? { csr, denied } : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 250 },
  );
}

describe("gateway replicas' peer identity: the hub's signer, not a Secret", () => {
  before(async () => {
    hub = await hubClient();
    const env = environmentState();
    assert.ok(env.image, 'the e2e environment runs real nodes and their image (e2e/setup.ts: nodes: true)');
    environmentApiService = await hub.get<ApiService>(apiServicePath);
    cmaExisted = !!(await hub.getOptional(cmaPath));
    webhookExisted = !!(await hub.getOptional(webhookConfigPath));
    await grantOnHub(
      hub,
      csrGrant,
      [serviceAccount(namespace, gatewayName), serviceAccount(namespace, forger)],
      [
        {
          apiGroups: ['certificates.k8s.io'],
          resources: ['certificatesigningrequests'],
          verbs: ['create', 'get'],
        },
      ],
    );
    const started = Date.now();
    await helm(
      'install',
      release,
      chart,
      '--namespace',
      namespace,
      '--create-namespace',
      ...nodeChartValues({ image: env.image }, [
        `gateway.replicas=${replicas}`,
        `gateway.credentialNamespace.name=${credentialNamespace}`,
        'gateway.credentialNamespace.create=true',
        'gateway.ocmIntegration=false',
      ]),
    );
    installed = true;
    pods = await waitFor(
      `the gateway rollout complete: ${replicas} Ready pods`,
      async () => {
        const d = await hub.getOptional<Rollout>(deploymentPath);
        if (!d || !rolloutComplete(d, replicas)) return undefined;
        const running = await gatewayPods();
        return running.length === replicas ? running : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 500 },
    );
    console.log(
      `[peer-identity] helm install -> ${replicas} gateway pods ready: ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
  });

  after(async () => {
    const attempt = async (what: string, step: () => Promise<unknown>) =>
      step().catch((err: Error) => console.log(`[peer-identity] cleanup: ${what}: ${err.message}`));
    if (installed) await attempt('helm uninstall', () => helm('uninstall', release, '-n', namespace));
    await attempt('leftovers', async () => {
      if (!cmaExisted) await hub.delete(cmaPath);
      if (!webhookExisted) await hub.delete(webhookConfigPath);
      await hub.request(
        'DELETE',
        `/apis/certificates.k8s.io/v1/certificatesigningrequests?labelSelector=${encodeURIComponent('cluster.core.oam.dev/gateway-peer')}`,
      );
      await revokeOnHub(hub, csrGrant);
      await hub.delete(`/api/v1/namespaces/${namespace}`);
      await hub.delete(`/api/v1/namespaces/${credentialNamespace}`);
    });
    await awaitInstallGone(hub, [namespace, credentialNamespace], attempt);
    // Not swallowed: the files after this one need the environment's gateway behind the APIService again.
    try {
      await restoreEnvironmentApiService(hub, environmentApiService.spec);
      assert.ok(isAvailable(await hub.get<ApiService>(apiServicePath)));
    } finally {
      hub?.close();
    }
  });

  test("each replica's peer port presents a certificate of the hub's signer naming that replica", async () => {
    const roots = parsePemBundle(hubCa());
    for (const pod of pods) {
      const cert = await waitFor(
        `replica ${pod.metadata.name} serving its peer port with its peer certificate`,
        () => peerServerCertificate(pod.ip).catch(() => undefined),
        { timeoutMs: 60_000, intervalMs: 500 },
      );
      assert.equal(cert.subject, `CN=${peerCommonName(namespace, pod.metadata.name)}`);
      assert.ok(
        roots.some((root) => cert.checkIssued(root) && cert.verify(root.publicKey)),
        `${pod.metadata.name}'s peer certificate is signed by the hub's client CA`,
      );
    }
  });

  test("a certificate minted from the gateway's TLS Secret (as any of its readers may) is refused on the peer port: no stream", async () => {
    const secret = await hub.get<Secret>(`/api/v1/namespaces/${namespace}/secrets/${gatewayName}-tls`);
    const servingCa = await loadCertificateAuthority({
      cert: decode(secret.data['ca.crt']),
      key: decode(secret.data['ca.key']),
    });
    const [target, other] = pods;
    assert.ok(target && other);
    const attempts: [string, { cert: string; key: string }][] = [
      // The gateway's own serving pair: the peer credential until now.
      [
        'the serving pair itself',
        { cert: decode(secret.data['tls.crt']), key: decode(secret.data['tls.key']) },
      ],
      [
        "a certificate minted with the serving CA's key, named as another replica",
        await servingCa.issue({
          commonName: peerCommonName(namespace, other.metadata.name),
          ipAddresses: [other.ip],
          usage: 'both',
        }),
      ],
    ];
    for (const [what, pair] of attempts) {
      const result = await peerStream(target.ip, pair);
      assert.equal(
        typeof result,
        'string',
        `${what}: the session is refused before any stream is served (got ${result})`,
      );
    }
  });

  test('a gateway-peer CSR from anyone but a replica pod is denied, with the reason', async () => {
    const replica = pods[0]?.metadata.name ?? '';
    // Another ServiceAccount that may create CSRs.
    await hub.apply(
      `/api/v1/namespaces/${namespace}/serviceaccounts/${forger}`,
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: forger, namespace } },
      'e2e',
    );
    const asForger = tokenClient(await requestServiceAccountToken(hub, namespace, forger, 600));
    try {
      const { denied } = await verdictOn(asForger, replica);
      assert.equal(denied.reason, 'NotAGatewayReplica');
      assert.match(denied.message ?? '', /is not the gateway's ServiceAccount/);
    } finally {
      asForger.close();
    }
    // The gateway's own ServiceAccount, with a token not bound to a pod (TokenRequest, as an admin may make).
    const asGatewayUnbound = tokenClient(await requestServiceAccountToken(hub, namespace, gatewayName, 600));
    try {
      const { denied } = await verdictOn(asGatewayUnbound, replica);
      assert.equal(denied.reason, 'NotAGatewayReplica');
      assert.match(denied.message ?? '', /not bound to one pod/);
    } finally {
      asGatewayUnbound.close();
    }
  });
});

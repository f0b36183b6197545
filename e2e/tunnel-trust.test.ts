/**
 * The tunnel's two trust models through the real path (agent -> hub kube-apiserver -> kube-aggregator
 * -> gateway; kubectl -> hub -> gateway -> tunnel -> agent -> managed kube-apiserver), each agent
 * running with exactly the managed-cluster RBAC the manager renders for its model
 * (manager/addon/deploy/agent-manifests.ts) and the hub grants the manager gives it
 * (manager/addon/registration/hub-permissions.ts):
 *
 * - no-credential, cluster "nocred" (cluster2 under another name, no Secret of the admin's, no URL):
 *   the agent writes a Secret without any credential, and serves every request with its own
 *   ServiceAccount token as the hub caller, so each caller has exactly its own permissions there;
 * - hub-credential, cluster "hubcred" (cluster1 under another name): the agent requests a token of
 *   the ServiceAccount the hub acts as, writes it with cluster1's CA to the hub, renews it before it
 *   expires; the gateway runs TLS to cluster1 inside the tunnel with it.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { AttachRefusedError, requestAttach } from '../agent/tunnel/attach-request.ts';
import { Supervisor } from '../hack/localenv/supervisor.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import { KubeClient, type KubeObject } from '../shared/kube/client.ts';
import { loadKubeconfig } from '../shared/kube/kubeconfig.ts';
import { StatusError } from '../shared/kube/status.ts';
import { applyClusterSecret, credentialNamespace, secretPath } from './support/credentials.ts';
import { e2eStateDir, environmentState, hubClient, managedClient } from './support/environment.ts';
import { kubectl, kubectlResult } from './support/kubectl.ts';
import { portForwardPing } from './support/port-forward.ts';
import { grantOnHub, hubUser, revokeOnHub } from './support/rbac.ts';
import {
  agentCertificate,
  agentHubKubeconfig,
  grantAgentOnHub,
  provisionAgentOnSpoke,
  startTunnelAgent,
  type TunnelAgent,
} from './support/tunnel-agent.ts';
import { hubUserKubeconfig, proxyKubeconfig, proxyPrefix } from './support/users.ts';
import { startWorkload, type Workload } from './support/workload.ts';

type Secret = KubeObject & { data?: Record<string, string> };
type Gateway = {
  spec: { access: { endpoint: { type: string }; credential?: { type: string } } };
  status: { healthy: boolean; healthyReason?: string; tunnel?: { connected: boolean; replica?: string } };
};

const decode = (b64: string | undefined) => Buffer.from(b64 ?? '', 'base64').toString();

/** Sum of a metric's series in Prometheus text, those whose labels contain `having`. */
function sumSeries(text: string, name: string, having = ''): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if ((line.startsWith(`${name}{`) || line.startsWith(`${name} `)) && line.includes(having)) {
      sum += Number(line.split(' ').at(-1));
    }
  }
  return sum;
}

describe('agent tunnel trust models', { concurrency: false }, () => {
  let hub: KubeClient;
  let hubKubeconfig: string;
  let supervisor: Supervisor;
  const cleanups: (() => Promise<unknown>)[] = [];

  const clusterGateway = async (name: string) =>
    JSON.parse(await kubectl(hubKubeconfig, 'get', '--raw', `${proxyPrefix}/${name}`)) as Gateway;
  /** The `kubectl get clustergateways -o wide` row of `name`, as its cells. */
  const wideRow = async (name: string) =>
    (await kubectl(hubKubeconfig, 'get', 'clustergateways', '-o', 'wide'))
      .split('\n')
      .find((line) => line.startsWith(`${name} `))
      ?.trim()
      .split(/\s{2,}/);

  before(async () => {
    hub = await hubClient();
    hubKubeconfig = environmentState().hub.kubeconfig;
    supervisor = new Supervisor(path.join(e2eStateDir, 'tunnel-trust'));
  });

  after(async () => {
    await supervisor?.stop();
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    hub?.close();
  });

  describe('no-credential: the agent acts as the hub caller with its own token', () => {
    const cluster = 'nocred';
    const namespace = 'cg-nocred';
    let spoke: KubeClient;
    let agent: TunnelAgent;
    let agentSpokeKubeconfig: string;
    let workload: Workload | undefined;

    before(async () => {
      spoke = await managedClient('cluster2');
      const provisioned = await provisionAgentOnSpoke(spoke, 'cluster2', {
        namespace,
        trustModel: 'NoCredential',
      });
      agentSpokeKubeconfig = provisioned.kubeconfig;
      const hubPaths = await grantAgentOnHub(hub, cluster, { credentialSecret: true });
      cleanups.push(async () => {
        await workload?.stop();
        for (const p of provisioned.clusterScoped) await spoke.delete(p);
        await spoke.delete(`/api/v1/namespaces/${namespace}`);
        await revokeOnHub(spoke, 'e2e-nocred-alice');
        await revokeOnHub(hub, 'e2e-nocred-proxy');
        await hub.delete(secretPath(cluster));
        for (const p of hubPaths.filter((p) => !p.includes(`/namespaces/${cluster}/`))) await hub.delete(p);
        await hub.delete(`/api/v1/namespaces/${cluster}`);
        spoke.close();
      });
      agent = await startTunnelAgent(supervisor, {
        cluster,
        managedName: 'cluster2',
        hubKubeconfig: agentHubKubeconfig(cluster, await agentCertificate(cluster)),
        kubeconfig: agentSpokeKubeconfig,
        installNamespace: namespace,
        args: ['--trust-model=no-credential', `--hub-credential-namespace=${credentialNamespace}`],
      });
      // Hub users allowed to use the gateway's proxy; what they may do on cluster2 is cluster2's to say.
      await grantOnHub(
        hub,
        'e2e-nocred-proxy',
        [hubUser('alice'), hubUser('bob'), hubUser('carol')],
        [{ apiGroups: ['cluster.core.oam.dev'], resources: ['clustergateways/proxy'], verbs: ['*'] }],
      );
    });

    test('the hub holds no credential: a Secret of labels only, and a ClusterProxy cluster served through the tunnel', async () => {
      const secret = await waitFor(
        'the agent to write its Secret',
        () => hub.getOptional<Secret>(secretPath(cluster)),
        { timeoutMs: 30_000, failFast: () => agent.process.assertRunning() },
      );
      assert.equal(secret.data, undefined, 'no credential at all on the hub');
      assert.deepEqual(secret.metadata?.labels, {
        'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy',
        'app.kubernetes.io/managed-by': 'cluster-gateway-agent',
      });
      const gateway = await waitFor('the tunnel to connect', async () => {
        const g = await clusterGateway(cluster);
        return g.status.tunnel?.connected ? g : undefined;
      });
      assert.equal(gateway.spec.access.endpoint.type, 'ClusterProxy');
      assert.equal(gateway.spec.access.credential, undefined);
      assert.ok(gateway.status.tunnel?.replica, 'the replica holding the tunnel is named');
      const row = await wideRow(cluster);
      assert.deepEqual(row?.slice(-3, -2), ['Connected'], row?.join(' | '));
      assert.equal(row?.at(-1), gateway.status.tunnel?.replica);
    });

    test('each caller has its own permissions on the cluster: whoami, a 403 from cluster2, then allowed', async () => {
      const env = environmentState();
      const alice = await hubUserKubeconfig(
        'alice',
        ['e2e-team'],
        `${env.hub.server}${proxyPrefix}/${cluster}/proxy`,
      );
      const whoami = JSON.parse(await kubectl(alice, 'auth', 'whoami', '-o', 'json')) as {
        status: { userInfo: { username: string; groups: string[] } };
      };
      assert.equal(whoami.status.userInfo.username, 'alice');
      assert.ok(whoami.status.userInfo.groups.includes('e2e-team'), JSON.stringify(whoami));
      const denied = await kubectlResult(alice, ['get', 'namespaces']);
      assert.notEqual(denied.code, 0);
      assert.match(denied.stderr, /User "alice" cannot list resource "namespaces"/);
      await grantOnHub(
        spoke,
        'e2e-nocred-alice',
        [hubUser('alice')],
        [
          { apiGroups: [''], resources: ['namespaces'], verbs: ['list'] },
          {
            apiGroups: [''],
            resources: ['pods', 'pods/exec', 'pods/portforward'],
            verbs: ['get', 'list', 'create'],
          },
        ],
      );
      const names = await waitFor('alice to be allowed on cluster2', async () => {
        try {
          return await kubectl(alice, 'get', 'namespaces', '-o', 'name');
        } catch {
          return undefined;
        }
      });
      assert.match(names, /namespace\/cg-nocred/, 'cluster2 seen through the tunnel');
      assert.ok(
        (await agent.metric('cluster_gateway_agent_impersonated_requests_total{result="forwarded"}')) >= 3,
      );
      // The agent's own identity may only impersonate: directly, it lists nothing.
      const own = await KubeClient.fromKubeconfig(agentSpokeKubeconfig);
      try {
        await assert.rejects(
          own.list('/api/v1/namespaces'),
          (err: unknown) => err instanceof StatusError && err.code === 403,
        );
      } finally {
        own.close();
      }
    });

    test('an identity exchange rule applies through the tunnel: the agent impersonates the mapped identity', async () => {
      // A StaticMapping rule for this cluster only (the global configuration object, as
      // e2e/identity-exchange.test.ts uses it): carol on "nocred" acts as alice there. The agent, not the
      // gateway, impersonates, since the hub holds no credential to impersonate with.
      const configurations = '/apis/gateway.cluster.core.oam.dev/v1alpha1/clustergatewayproxyconfigurations';
      const name = 'cluster-gateway';
      type Configuration = KubeObject & {
        metadata: { generation?: number };
        status?: { conditions?: { type: string; status: string; observedGeneration?: number }[] };
      };
      const applied = await hub.apply<Configuration>(
        `${configurations}/${name}`,
        {
          apiVersion: 'gateway.cluster.core.oam.dev/v1alpha1',
          kind: 'ClusterGatewayProxyConfiguration',
          metadata: { name },
          spec: {
            clientIdentityExchanger: {
              rules: [
                {
                  name: 'carol-as-alice',
                  source: { user: 'carol', cluster },
                  target: { user: 'alice', groups: ['e2e-mapped'] },
                  type: 'StaticMappingIdentityExchanger',
                },
              ],
            },
          },
        },
        'e2e',
      );
      cleanups.push(() => hub.delete(`${configurations}/${name}`));
      await waitFor('the gateway to apply the rule', async () => {
        const current = await hub.get<Configuration>(`${configurations}/${name}`);
        const valid = current.status?.conditions?.find((c) => c.type === 'Valid');
        return valid?.status === 'True' && valid.observedGeneration === applied.metadata.generation;
      });
      const env = environmentState();
      const carol = await hubUserKubeconfig('carol', [], `${env.hub.server}${proxyPrefix}/${cluster}/proxy`);
      const whoami = await waitFor('carol to be mapped to alice on the cluster', async () => {
        const who = JSON.parse(await kubectl(carol, 'auth', 'whoami', '-o', 'json')) as {
          status: { userInfo: { username: string; groups?: string[] } };
        };
        return who.status.userInfo.username === 'alice' ? who : undefined;
      });
      assert.ok(whoami.status.userInfo.groups?.includes('e2e-mapped'), JSON.stringify(whoami));
      assert.ok(
        !whoami.status.userInfo.groups?.includes('e2e-team'),
        "alice's own hub groups are not carol's",
      );
      // With alice's permissions there (granted in the test before): carol lists namespaces as alice.
      assert.match(await kubectl(carol, 'get', 'namespaces', '-o', 'name'), /namespace\/cg-nocred/);
      await hub.delete(`${configurations}/${name}`);
      await waitFor('carol to be herself again once the rule is gone', async () => {
        const who = JSON.parse(await kubectl(carol, 'auth', 'whoami', '-o', 'json')) as {
          status: { userInfo: { username: string } };
        };
        return who.status.userInfo.username === 'carol';
      });
    });

    test('exec (WebSocket and SPDY) and port-forward run as the caller, allowed or refused by cluster2', async () => {
      workload = await startWorkload(spoke);
      const env = environmentState();
      const alice = await hubUserKubeconfig(
        'alice',
        ['e2e-team'],
        `${env.hub.server}${proxyPrefix}/${cluster}/proxy`,
      );
      const bob = await hubUserKubeconfig('bob', [], `${env.hub.server}${proxyPrefix}/${cluster}/proxy`);
      for (const websockets of ['true', 'false']) {
        const env2 = { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: websockets };
        const ok = await kubectlResult(alice, ['exec', workload.pod.name, '--', 'echo', 'as', 'alice'], {
          env: env2,
        });
        assert.equal(ok.stdout, 'as alice\n', `exec as alice, websockets=${websockets}: ${ok.stderr}`);
        const refused = await kubectlResult(bob, ['exec', workload.pod.name, '--', 'echo', 'as', 'bob'], {
          env: env2,
        });
        assert.notEqual(refused.code, 0);
        assert.match(refused.stderr, /User "bob" cannot (get|create) resource "pods/, refused.stderr);
      }
      for (const websockets of ['true', 'false']) {
        const reply = await portForwardPing(alice, workload.pod.name, websockets === 'true');
        assert.match(reply, /hello from the pod/, `port-forward as alice, websockets=${websockets}`);
      }
    });

    test('the agent gone: requests fail at once with a 503 that says so; the tunnel shows Disconnected', async () => {
      await agent.process.stop();
      await waitFor(
        'the gateway to see the tunnel gone',
        async () => (await clusterGateway(cluster)).status.tunnel?.connected === false,
        {
          timeoutMs: 15_000,
          intervalMs: 100,
        },
      );
      const started = Date.now();
      await assert.rejects(
        kubectl(await proxyKubeconfig(cluster), 'get', '--raw', '/version'),
        /no agent tunnel is connected for this cluster/,
      );
      assert.ok(Date.now() - started < 3000, 'at once');
      const row = await wideRow(cluster);
      assert.ok(row?.includes('Disconnected'), row?.join(' | '));
    });
  });

  describe('hub-credential: the agent provisions the credential the hub holds; TLS end to end', () => {
    const cluster = 'hubcred';
    const namespace = 'cg-hubcred';
    let spoke: KubeClient;
    let agent: TunnelAgent;
    let agentHub: string;

    before(async () => {
      spoke = await managedClient('cluster1');
      const provisioned = await provisionAgentOnSpoke(spoke, 'cluster1', {
        namespace,
        trustModel: 'HubCredential',
      });
      const hubPaths = await grantAgentOnHub(hub, cluster, { credentialSecret: true });
      agentHub = agentHubKubeconfig(cluster, await agentCertificate(cluster));
      cleanups.push(async () => {
        for (const p of provisioned.clusterScoped) await spoke.delete(p);
        await spoke.delete(`/api/v1/namespaces/${namespace}`);
        await hub.delete(secretPath(cluster));
        for (const p of hubPaths.filter((p) => !p.includes(`/namespaces/${cluster}/`))) await hub.delete(p);
        await hub.delete(`/api/v1/namespaces/${cluster}`);
        spoke.close();
      });
      // An admin's Secret of the same name, written first: the agent must not take it over.
      await hub.apply(
        secretPath(cluster),
        {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: {
            name: cluster,
            namespace: credentialNamespace,
            labels: { 'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken' },
          },
          stringData: { token: 'the-admins-token', endpoint: 'https://192.0.2.1:6443' },
        },
        'e2e-admin',
      );
      agent = await startTunnelAgent(supervisor, {
        cluster,
        managedName: 'cluster1',
        hubKubeconfig: agentHub,
        kubeconfig: provisioned.kubeconfig,
        installNamespace: namespace,
        args: [
          '--trust-model=hub-credential',
          `--hub-credential-namespace=${credentialNamespace}`,
          '--hub-credential-service-account=cluster-gateway-hub-credential',
          '--hub-credential-token-seconds=3600',
          '--hub-credential-rotate-seconds=8',
          '--hub-credential-check-seconds=2',
        ],
      });
    });

    test("an admin's Secret of the same name is not taken over; once it is gone, the agent writes its own", async () => {
      await waitFor(
        'the agent to report the conflict',
        async () =>
          (await agent.metric('cluster_gateway_agent_hub_credential_checks_total{result="conflict"}')) >= 1,
        { timeoutMs: 30_000, failFast: () => agent.process.assertRunning() },
      );
      const untouched = await hub.get<Secret>(secretPath(cluster));
      assert.equal(decode(untouched.data?.token), 'the-admins-token');
      await hub.delete(secretPath(cluster));
      const written = await waitFor(
        "the agent's Secret",
        async () => {
          const s = await hub.getOptional<Secret>(secretPath(cluster));
          return s?.metadata?.labels?.['app.kubernetes.io/managed-by'] === 'cluster-gateway-agent'
            ? s
            : undefined;
        },
        { timeoutMs: 90_000 },
      );
      assert.deepEqual(Object.keys(written.data ?? {}).sort(), ['ca.crt', 'token']);
      assert.equal(
        written.metadata?.labels?.['cluster.core.oam.dev/cluster-credential-type'],
        'ServiceAccountToken',
      );
      assert.equal(written.metadata?.labels?.['cluster.core.oam.dev/cluster-endpoint-type'], 'ClusterProxy');
    });

    test('the gateway reaches cluster1 through the tunnel as the ServiceAccount, TLS verified against the CA the agent wrote', async () => {
      const gateway = await waitFor('the tunnel to connect', async () => {
        const g = await clusterGateway(cluster);
        return g.status.tunnel?.connected && g.status.healthyReason === undefined ? g : undefined;
      });
      assert.equal(gateway.spec.access.endpoint.type, 'ClusterProxy');
      assert.equal(gateway.spec.access.credential?.type, 'ServiceAccountToken');
      const whoami = JSON.parse(
        await kubectl(await proxyKubeconfig(cluster), 'auth', 'whoami', '-o', 'json'),
      ) as { status: { userInfo: { username: string } } };
      assert.equal(
        whoami.status.userInfo.username,
        `system:serviceaccount:${namespace}:cluster-gateway-hub-credential`,
      );
      // The agent relayed bytes only: it served no request itself.
      assert.ok(
        Number.isNaN(
          await agent.metric('cluster_gateway_agent_impersonated_requests_total{result="forwarded"}'),
        ),
      );
      assert.ok((await agent.metric('cluster_gateway_agent_tunnel_streams_total')) >= 1);
    });

    test('the token is renewed before it expires, with no failed request', async () => {
      const first = decode((await hub.get<Secret>(secretPath(cluster))).data?.token);
      const kc = await proxyKubeconfig(cluster);
      let requests = 0;
      const second = await waitFor(
        'a new token',
        async () => {
          JSON.parse(await kubectl(kc, 'get', '--raw', '/api/v1/namespaces/default'));
          requests++;
          const token = decode((await hub.get<Secret>(secretPath(cluster))).data?.token);
          return token !== first ? token : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 500 },
      );
      assert.notEqual(second, first);
      // Requests keep working with the new token (a fresh pool: the connection key changed).
      JSON.parse(await kubectl(kc, 'get', '--raw', '/api/v1/namespaces/default'));
      const expiry = Date.parse(
        (await hub.get<Secret>(secretPath(cluster))).metadata?.annotations?.[
          'cluster.core.oam.dev/token-expiration'
        ] ?? '',
      );
      assert.ok(expiry - Date.now() > 50 * 60_000, 'the token written has most of its life ahead');
      process.stderr.write(`[tunnel-trust e2e] ${requests} requests while the token rotated, none failed\n`);
    });

    test("the agent's hub identity may write its own cluster's Secret and nothing else", async () => {
      const client = KubeClient.fromLoadedConfig(loadKubeconfig(agentHub));
      const forbidden = (err: unknown) => err instanceof StatusError && err.code === 403;
      try {
        await client.get(secretPath(cluster)); // allowed: its own
        await assert.rejects(client.get(secretPath('nocred')), forbidden);
        await assert.rejects(client.list(`/api/v1/namespaces/${credentialNamespace}/secrets`), forbidden);
        await assert.rejects(
          client.request('PATCH', `${secretPath('someone-else')}?fieldManager=x`, {
            body: {
              apiVersion: 'v1',
              kind: 'Secret',
              metadata: { name: 'someone-else', namespace: credentialNamespace },
            },
            contentType: 'application/apply-patch+yaml',
          }),
          forbidden,
        );
        await assert.rejects(
          client.create(`/api/v1/namespaces/${credentialNamespace}/secrets`, {
            apiVersion: 'v1',
            kind: 'Secret',
            metadata: { name: 'posted', namespace: credentialNamespace },
          }),
          forbidden,
        );
      } finally {
        client.close();
      }
    });
  });

  describe('a tunnel attached straight to the gateway (agent --tunnel-server): no hub hop', () => {
    const cluster = 'portcluster';
    let agent: TunnelAgent;

    before(async () => {
      const hubPaths = await grantAgentOnHub(hub, cluster);
      cleanups.push(async () => {
        await hub.delete(secretPath(cluster));
        for (const p of hubPaths.filter((p) => !p.includes(`/namespaces/${cluster}/`))) await hub.delete(p);
        await hub.delete(`/api/v1/namespaces/${cluster}`);
      });
      // An admin's Secret: cluster1's credential, routed through the tunnel (hub-credential).
      const env = environmentState();
      const token = decode((await hub.get<Secret>(secretPath('cluster1'))).data?.token);
      await applyClusterSecret(
        hub,
        cluster,
        'ServiceAccountToken',
        { token, 'ca.crt': readFileSync(path.join(env.stateDir, 'cluster1', 'ca.crt'), 'utf8') },
        { 'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy' },
      );
    });

    test('the agent attaches to the gateway itself, bound to its identity as through the hub; the hub relays nothing', async () => {
      const env = environmentState();
      const attaches = async () =>
        sumSeries(
          await hub.request<string>('GET', '/metrics'),
          'apiserver_request_total',
          'subresource="attach"',
        );
      const before = await attaches();
      agent = await startTunnelAgent(supervisor, {
        cluster,
        managedName: 'cluster1',
        hubKubeconfig: agentHubKubeconfig(cluster, await agentCertificate(cluster)),
        args: [
          `--tunnel-server=${env.gateway?.url}`,
          `--tunnel-ca-file=${path.join(env.stateDir, 'hub', 'ca.crt')}`,
        ],
      });
      await waitFor(
        'the tunnel to connect',
        async () => (await clusterGateway(cluster)).status.tunnel?.connected,
        { timeoutMs: 30_000, failFast: () => agent.process.assertRunning() },
      );
      const version = JSON.parse(
        await kubectl(await proxyKubeconfig(cluster), 'get', '--raw', '/version'),
      ) as { gitVersion?: string };
      assert.ok(version.gitVersion);
      assert.equal(await attaches(), before, 'no attach request reached the hub');
      // Straight at the gateway, a certificate that is not this cluster's agent is refused as through the hub.
      const admin = loadKubeconfig(await hubUserKubeconfig('e2e-not-an-agent', ['system:masters']));
      await assert.rejects(
        requestAttach(
          {
            ...admin,
            server: env.gateway!.url,
            options: { ...admin.options, ca: readFileSync(path.join(env.stateDir, 'hub', 'ca.crt'), 'utf8') },
          },
          cluster,
          { timeoutMs: 10_000 },
        ),
        (err: unknown) =>
          err instanceof AttachRefusedError &&
          err.code === 403 &&
          /is not an OCM addon agent/.test(err.message),
      );
    });
  });
});

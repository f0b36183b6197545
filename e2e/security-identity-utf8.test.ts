/**
 * Non-ASCII hub identities, end to end (issue 30 item 5): a hub user `h-jösé` in group `g-ñ` (a client
 * certificate from the hub CA) goes through the hub's aggregator, whose front proxy writes the
 * identity as UTF-8 bytes in X-Remote-User / X-Remote-Group. The gateway must read the same name the
 * hub authenticated (its SubjectAccessReview grants the user get on cluster1's proxy only), and the
 * managed cluster must see the same user when the gateway speaks for it:
 * - a credential Secret with `?impersonate=true` (Impersonate-* headers, the gateway's credential);
 * - a no-credential tunnel agent (the identity travels in the tunnel stream, the agent impersonates).
 * Each managed cluster answers a SelfSubjectReview with the user it authenticated.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Supervisor } from '../hack/localenv/supervisor.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import { credentialNamespace, secretPath } from './support/credentials.ts';
import { e2eStateDir, hubClient, managedClient } from './support/environment.ts';
import { kubectl } from './support/kubectl.ts';
import { grantOnHub, hubUser, revokeOnHub } from './support/rbac.ts';
import {
  agentCertificate,
  agentHubKubeconfig,
  grantAgentOnHub,
  provisionAgentOnSpoke,
  startTunnelAgent,
} from './support/tunnel-agent.ts';
import { hubUserKubeconfig, proxyPrefix } from './support/users.ts';

const user = 'h-jösé';
const group = 'g-ñ';
const grant = 'e2e-utf8-proxy';

type Review = { status: { userInfo: { username: string; groups?: string[] } } };

describe('a non-ASCII hub user through the aggregator and the gateway', { concurrency: false }, () => {
  let hub: KubeClient;
  let kubeconfig: string;
  let reviewFile: string;
  const cleanups: (() => Promise<unknown>)[] = [];

  /** POSTs a SelfSubjectReview to `cluster` through the hub's aggregator and the gateway, as the user. */
  const whoAmI = async (cluster: string, impersonate: boolean) =>
    JSON.parse(
      await kubectl(
        kubeconfig,
        'create',
        '--raw',
        `${proxyPrefix}/${cluster}/proxy/apis/authentication.k8s.io/v1/selfsubjectreviews${impersonate ? '?impersonate=true' : ''}`,
        '-f',
        reviewFile,
      ),
    ) as Review;

  before(async () => {
    hub = await hubClient();
    kubeconfig = await hubUserKubeconfig(user, [group]);
    reviewFile = path.join(e2eStateDir, 'utf8-selfsubjectreview.json');
    writeFileSync(
      reviewFile,
      JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }),
    );
    // get/create on cluster1's and the tunnel cluster's proxy only: the gateway's SubjectAccessReview must name the user right.
    await grantOnHub(
      hub,
      grant,
      [hubUser(user)],
      [
        {
          apiGroups: ['cluster.core.oam.dev'],
          resources: ['clustergateways/proxy'],
          resourceNames: ['cluster1', 'utf8-nocred'],
          verbs: ['get', 'create'],
        },
      ],
    );
    cleanups.push(() => revokeOnHub(hub, grant));
  });

  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    hub?.close();
  });

  test('the hub itself knows the user by its UTF-8 name', async () => {
    const who = JSON.parse(await kubectl(kubeconfig, 'auth', 'whoami', '-o', 'json')) as Review;
    assert.equal(who.status.userInfo.username, user);
    assert.ok(who.status.userInfo.groups?.includes(group), JSON.stringify(who));
  });

  test('credential Secret + ?impersonate=true: authorized on the hub, the same user and group on cluster1', async () => {
    // RBAC is eventually consistent: poll the grant in (a 403 for the mangled name never turns into a 201).
    const who = await waitFor(
      'the hub user to be authorized through the aggregator',
      () => whoAmI('cluster1', true).catch(() => undefined),
      { timeoutMs: 15_000 },
    ).catch(() => whoAmI('cluster1', true)); // the error the user gets, when it never turns allowed
    assert.equal(who.status.userInfo.username, user, JSON.stringify(who));
    assert.ok(who.status.userInfo.groups?.includes(group), JSON.stringify(who));
  });

  test('a cluster the grant does not name stays forbidden (the name is what was authorized)', async () => {
    await assert.rejects(whoAmI('cluster2', true), /forbidden|Forbidden|403/);
  });

  test('no-credential tunnel: the agent impersonates the same user and group on its cluster', async () => {
    const cluster = 'utf8-nocred';
    const namespace = 'cg-utf8-nocred';
    const supervisor = new Supervisor(path.join(e2eStateDir, 'utf8-nocred'));
    const spoke = await managedClient('cluster2');
    let provisioned: { kubeconfig: string; clusterScoped: string[] } = { kubeconfig: '', clusterScoped: [] };
    let hubPaths: string[] = [];
    cleanups.push(async () => {
      await supervisor.stop();
      for (const p of provisioned.clusterScoped) await spoke.delete(p);
      await spoke.delete(`/api/v1/namespaces/${namespace}`);
      await hub.delete(secretPath(cluster));
      for (const p of hubPaths.filter((p) => !p.includes(`/namespaces/${cluster}/`))) await hub.delete(p);
      await hub.delete(`/api/v1/namespaces/${cluster}`);
      spoke.close();
    });
    provisioned = await provisionAgentOnSpoke(spoke, 'cluster2', { namespace, trustModel: 'NoCredential' });
    hubPaths = await grantAgentOnHub(hub, cluster, { credentialSecret: true });
    await startTunnelAgent(supervisor, {
      cluster,
      managedName: 'cluster2',
      hubKubeconfig: agentHubKubeconfig(cluster, await agentCertificate(cluster)),
      kubeconfig: provisioned.kubeconfig,
      installNamespace: namespace,
      args: ['--trust-model=no-credential', `--hub-credential-namespace=${credentialNamespace}`],
    });
    const who = await waitFor(
      'the tunnel to serve the hub user',
      () => whoAmI(cluster, false).catch(() => undefined),
      { timeoutMs: 60_000 },
    );
    assert.equal(who.status.userInfo.username, user, JSON.stringify(who));
    assert.ok(who.status.userInfo.groups?.includes(group), JSON.stringify(who));
  });
});

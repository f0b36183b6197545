/**
 * The end of a file that installed charts/cluster-gateway into namespaces of its own beside the environment's
 * gateway (e2e/chart-permissions, gateway-replicas, peer-identity): what the uninstall leaves is awaited gone,
 * and the environment's APIService is registered again, as the files after it need.
 */
import { waitFor, waitForConditions } from '../../hack/localenv/wait.ts';
import { apiServiceName, apiServicePath } from '../../manager/addon/gateway-deploy/names.ts';
import type { KubeClient } from '../../shared/kube/client.ts';

/** Runs a cleanup step; a failure is logged, not thrown, so that every later step still runs. */
export type CleanupAttempt = (what: string, step: () => Promise<unknown>) => Promise<unknown>;

/**
 * Waits until `namespaces` (and the installed pods with them) and the installed gateway's ClusterRoles and
 * ClusterRoleBindings (which the manager owns through its own ClusterRole) are gone.
 */
export async function awaitInstallGone(
  hub: KubeClient,
  namespaces: readonly string[],
  attempt: CleanupAttempt,
): Promise<void> {
  await attempt(`namespaces ${namespaces.join(' and ')} gone`, () =>
    waitFor(
      `namespaces ${namespaces.join(' and ')} (and their pods) gone`,
      async () => {
        for (const namespace of namespaces) {
          if (await hub.getOptional(`/api/v1/namespaces/${namespace}`)) return false;
        }
        return true;
      },
      { timeoutMs: 90_000 },
    ),
  );
  for (const kind of ['clusterroles', 'clusterrolebindings']) {
    await attempt(`the gateway's ${kind} gone`, () =>
      waitFor(`the installed gateway's ${kind} gone`, async () => {
        const left = await hub.list(
          `/apis/rbac.authorization.k8s.io/v1/${kind}?labelSelector=${encodeURIComponent('app.kubernetes.io/component=gateway')}`,
        );
        return left.items.length === 0;
      }),
    );
  }
}

/** Registers the environment's APIService again (`spec` as read before the install) and waits for it Available. */
export async function restoreEnvironmentApiService(hub: KubeClient, spec: unknown): Promise<void> {
  await hub.apply(
    apiServicePath,
    {
      apiVersion: 'apiregistration.k8s.io/v1',
      kind: 'APIService',
      metadata: { name: apiServiceName },
      spec,
    } as Parameters<KubeClient['apply']>[1],
    'local-environment',
  );
  await waitForConditions(hub, apiServicePath, ['Available'], {
    what: "the environment's APIService to be Available again",
    timeoutMs: 60_000,
  });
}

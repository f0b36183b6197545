/**
 * `kubeconfig <cluster>`: prints a kubeconfig that reaches the cluster through the gateway with the caller's own hub
 * identity (kubeconfig/generate.ts). The cluster must have a ClusterGateway: the kubeconfig would otherwise only
 * ever answer 404.
 */
import { readFileSync } from 'node:fs';
import { StatusError } from '../../../shared/kube/status.ts';
import type { ExitCode } from '../exit-codes.ts';
import { CliError, exitCodes } from '../exit-codes.ts';
import { gatewayKubeconfig, KubeconfigGenerationError, type SourceFile } from '../kubeconfig/generate.ts';
import type { CommandContext } from '../main.ts';

export async function runKubeconfig(ctx: CommandContext, cluster: string): Promise<ExitCode> {
  const hub = ctx.hub();
  const gatewayPath = `/apis/cluster.core.oam.dev/v1alpha1/clustergateways/${encodeURIComponent(cluster)}`;
  try {
    await hub.client.request('GET', gatewayPath, { timeoutMs: 15_000 });
  } catch (err) {
    if (err instanceof StatusError && err.code === 404) {
      throw new CliError(`no ClusterGateway ${cluster}: kubectl get clustergateways lists them`);
    }
    if (err instanceof StatusError && err.code === 403) {
      throw new CliError(
        `you may not get clustergateways/${cluster} on the hub (needs get on clustergateways.cluster.core.oam.dev, and your requests' verbs on clustergateways/proxy): ${err.message}`,
      );
    }
    throw new CliError(
      `cannot read ClusterGateway ${cluster} on the hub ${hub.connection.server}: ${(err as Error).message}`,
    );
  }
  const sources: SourceFile[] = hub.files.map((file) => {
    try {
      return { file, text: readFileSync(file, 'utf8') };
    } catch {
      return { file, text: undefined };
    }
  });
  try {
    const { kubeconfig } = gatewayKubeconfig(sources, cluster, hub.context);
    ctx.output.line(kubeconfig.trimEnd());
  } catch (err) {
    if (err instanceof KubeconfigGenerationError) throw new CliError(err.message, undefined, { cause: err });
    throw err;
  }
  return exitCodes.ok;
}

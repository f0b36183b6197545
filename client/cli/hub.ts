/**
 * The hub as kubectl finds it: --kubeconfig, else KUBECONFIG (a list, merged
 * as client-go does), else ~/.kube/config; --context picks a context other
 * than the current one. The project's own client (shared/kube/client.ts), not
 * @kubernetes/client-node, so that the CLI starts in a fraction of a second.
 */
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KubeClient } from '../../shared/kube/client.ts';
import { type Connection, KubeconfigError, loadKubeconfig } from '../../shared/kube/kubeconfig.ts';
import { CliError } from './exit-codes.ts';

export interface HubSelection {
  kubeconfig?: string;
  context?: string;
}

export interface Hub {
  client: KubeClient;
  connection: Connection;
  /** The files the kubeconfig was read from, for messages and for `kubeconfig` to copy the user from. */
  files: string[];
  context?: string;
}

export function kubeconfigFiles(
  selection: HubSelection,
  env: Record<string, string | undefined> = process.env,
): string[] {
  if (selection.kubeconfig) return [selection.kubeconfig];
  const list = (env.KUBECONFIG ?? '').split(path.delimiter).filter(Boolean);
  if (list.length > 0) return list;
  const home = env.HOME || os.homedir();
  const homeConfig = home ? path.join(home, '.kube', 'config') : undefined;
  if (homeConfig && existsSync(homeConfig)) return [homeConfig];
  throw new CliError('no kubeconfig for the hub: pass --kubeconfig, set KUBECONFIG or create ~/.kube/config');
}

export function openHub(selection: HubSelection): Hub {
  const files = kubeconfigFiles(selection);
  let connection: Connection;
  try {
    connection = loadKubeconfig(files, undefined, selection.context);
  } catch (err) {
    if (err instanceof KubeconfigError) throw new CliError(err.message, undefined, { cause: err });
    throw err;
  }
  return {
    client: KubeClient.fromLoadedConfig(connection),
    connection,
    files,
    ...(selection.context ? { context: selection.context } : {}),
  };
}

/**
 * The agent's kubeconfig reader: shared/kube/kubeconfig.ts (no
 * @kubernetes/client-node, whose 90 MB of RSS are more than the whole agent
 * may use), less exec plugins. The agent reads its credentials synchronously
 * before every renewal (reloading-client.ts) and needs only what OCM writes
 * and what a pod has: certificate and key files, a token or token file, the
 * CA, and in-cluster config.
 */
import {
  type Connection,
  KubeconfigError,
  loadKubeconfig as loadShared,
  type ReadFile,
} from '../../shared/kube/kubeconfig.ts';

export {
  type Connection,
  KubeconfigError,
  loadInCluster,
  serviceAccountDir,
} from '../../shared/kube/kubeconfig.ts';

/** Reads a kubeconfig file and everything it refers to; exec plugins are refused with a message that says so. */
export function loadKubeconfig(file: string, readFile?: ReadFile): Connection {
  const connection = loadShared(file, readFile);
  if (connection.exec) {
    throw new KubeconfigError(
      `kubeconfig ${file}: exec plugins are not supported by the agent; use a client certificate or a token`,
    );
  }
  return connection;
}

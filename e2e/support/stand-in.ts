/**
 * A stand-in kubelet for cluster1 (see support/kubelet): a Node whose address
 * is on loopback and a Running pod bound to it, so logs, exec and
 * port-forward go through the real managed kube-apiserver.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { KubeClient } from '../../shared/kube/client.ts';
import { loadCertificateAuthority } from '../../shared/pki.ts';
import { environmentState } from './environment.ts';
import { createRunningPod, registerStandInNode, startNodeHeartbeat } from './kubelet/node.ts';
import { type StandInKubelet, startStandInKubelet } from './kubelet/server.ts';

export interface StandIn {
  kubelet: StandInKubelet;
  pod: { namespace: string; name: string; container: string };
  stop(): Promise<void>;
}

export async function startStandIn(
  spoke: KubeClient,
  cluster: string,
  options: { portMap?: Record<number, number> } = {},
): Promise<StandIn> {
  const dir = path.join(environmentState().stateDir, cluster);
  const ca = await loadCertificateAuthority({
    cert: readFileSync(path.join(dir, 'ca.crt'), 'utf8'),
    key: readFileSync(path.join(dir, 'ca.key'), 'utf8'),
  });
  const serving = await ca.issue({
    commonName: 'stand-in-kubelet',
    dnsNames: ['localhost'],
    ipAddresses: ['127.0.0.1'],
    usage: 'server',
  });
  // The kube-apiserver's kubelet client certificate is signed by the cluster CA: require it, as a kubelet does.
  const kubelet = await startStandInKubelet({
    tls: { ...serving, clientCa: ca.cert },
    portMap: options.portMap,
  });
  const nodeName = 'stand-in';
  await registerStandInNode(spoke, { name: nodeName, port: kubelet.port });
  const heartbeat = startNodeHeartbeat(spoke, nodeName);
  const pod = { namespace: 'default', name: 'workload', container: 'main' };
  await createRunningPod(spoke, { ...pod, nodeName, ports: [{ containerPort: 8080, name: 'http' }] });
  return {
    kubelet,
    pod,
    stop: async () => {
      await heartbeat.stop();
      await spoke.delete(`/api/v1/namespaces/${pod.namespace}/pods/${pod.name}`);
      await kubelet.close();
    },
  };
}

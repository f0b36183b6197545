/**
 * A real kubelet, built from the same pinned module as the apiservers (hack/tools/kube), with the knobs
 * these machines need (../shared/notes/real-nodes.md): cgroup v1 allowed, cgroupfs, swap tolerated, the
 * node's address the host's address on the pods' bridge (a kubelet refuses a loopback node IP), its own
 * cgroup parent and ports so that several run side by side, and no image or disk eviction (this is a
 * shared development machine, not a node to protect).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import type { LocalCluster } from './apiserver.ts';
import { binaryPath } from './binaries.ts';
import { hostAddress } from './host-changes.ts';
import { writeKubeconfig } from './kubeconfig.ts';
import { freePort } from './ports.ts';
import type { ManagedProcess, Supervisor } from './supervisor.ts';

export interface KubeletOptions {
  cluster: LocalCluster;
  nodeName: string;
  dir: string;
  containerdSocket: string;
  cgroupRoot: string;
}

export async function startKubelet(supervisor: Supervisor, o: KubeletOptions): Promise<ManagedProcess> {
  mkdirSync(o.dir, { recursive: true });
  const write = (file: string, content: string) => {
    const full = path.join(o.dir, file);
    writeFileSync(full, content, { mode: 0o600 });
    return full;
  };
  const [client, serving] = await Promise.all([
    o.cluster.pki.ca.issue({
      commonName: `system:node:${o.nodeName}`,
      organizations: ['system:nodes'],
      usage: 'client',
    }),
    o.cluster.pki.ca.issue({
      commonName: o.nodeName,
      dnsNames: [o.nodeName],
      ipAddresses: [hostAddress],
      usage: 'server',
    }),
  ]);
  const kubeconfig = writeKubeconfig(path.join(o.dir, 'kubelet.kubeconfig'), {
    name: o.cluster.name,
    server: o.cluster.server,
    caCert: o.cluster.pki.ca.cert,
    client,
  });
  const [port, healthzPort] = [await freePort(), await freePort()];
  const config = {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    address: hostAddress,
    port,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort,
    tlsCertFile: write('serving.crt', serving.cert),
    tlsPrivateKeyFile: write('serving.key', serving.key),
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: write('ca.crt', o.cluster.pki.ca.cert) },
    },
    authorization: { mode: 'Webhook' },
    containerRuntimeEndpoint: `unix://${o.containerdSocket}`,
    // Hybrid cgroups: v1 controllers (refused by default since 1.35), the kubelet's own driver.
    failCgroupV1: false,
    cgroupDriver: 'cgroupfs',
    cgroupRoot: o.cgroupRoot,
    failSwapOn: false,
    // The chains a kubelet would add to the host's iptables (a DROP rule among them) are not needed here.
    makeIPTablesUtilChains: false,
    // No DNS server in the environment: pods get no resolv.conf of the host's.
    resolvConf: '',
    evictionHard: { 'memory.available': '0%', 'nodefs.available': '0%', 'imagefs.available': '0%' },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    volumePluginDir: path.join(o.dir, 'volume-plugins'),
    // Each kubelet's own pod logs: in the shared /var/log/pods, each kubelet's garbage collection removes
    // the folders of pods it does not know, the other nodes' (their containers then die on a write to
    // stdout, and `kubectl logs` finds nothing).
    podLogsDir: path.join(o.dir, 'pod-logs'),
    // Pod status reaches the apiserver sooner than the default 10 s: tests wait for it.
    nodeStatusUpdateFrequency: '4s',
    syncFrequency: '10s',
    serializeImagePulls: false,
    maxPods: 60,
    shutdownGracePeriod: '0s',
  };
  const configPath = write('config.yaml', stringify(config));
  return supervisor.start(`${o.cluster.name}-kubelet`, binaryPath('kubelet'), {
    args: [
      `--config=${configPath}`,
      `--kubeconfig=${kubeconfig}`,
      `--root-dir=${path.join(o.dir, 'root')}`,
      `--cert-dir=${path.join(o.dir, 'pki')}`,
      `--hostname-override=${o.nodeName}`,
      `--node-ip=${hostAddress}`,
      '--v=1',
    ],
  });
}

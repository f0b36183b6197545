import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { binaryPath } from './binaries.ts';
import { freePorts } from './ports.ts';
import type { ManagedProcess, Supervisor } from './supervisor.ts';
import { waitFor } from './wait.ts';

export interface Etcd {
  url: string;
  process: ManagedProcess;
}

/**
 * One etcd for every cluster of the environment; each kube-apiserver keeps
 * its own key prefix. Plain HTTP on loopback, no fsync: this is a test bed.
 */
export async function startEtcd(supervisor: Supervisor, dataDir: string): Promise<Etcd> {
  const [clientPort, peerPort] = await freePorts(2);
  const url = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  mkdirSync(dataDir, { recursive: true });
  const process = supervisor.start('etcd', binaryPath('etcd'), {
    args: [
      '--name=local',
      `--data-dir=${path.join(dataDir, 'etcd')}`,
      `--listen-client-urls=${url}`,
      `--advertise-client-urls=${url}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=local=${peer}`,
      '--unsafe-no-fsync',
      '--log-level=warn',
      '--quota-backend-bytes=4294967296',
    ],
  });
  await waitFor(
    'etcd to report healthy',
    async () => {
      const res = await fetch(`${url}/health`);
      return res.ok && ((await res.json()) as { health?: string }).health === 'true';
    },
    { timeoutMs: 30_000, failFast: () => process.assertRunning() },
  );
  return { url, process };
}

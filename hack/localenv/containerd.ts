/**
 * One containerd per node: a kubelet garbage-collects every sandbox its runtime lists, so kubelets on
 * one machine never share one (../shared/notes/real-nodes.md, point 5). Everything it writes goes under
 * the node's folder of the environment's state, but for the shim sockets (/run/containerd/s, a fixed
 * path the host journal removes).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { bridgeName, hostAddress, podNetwork, serviceNetwork } from './host-changes.ts';
import { freePort } from './ports.ts';
import type { ManagedProcess, Supervisor } from './supervisor.ts';
import { waitFor } from './wait.ts';

const run = promisify(execFile);

export interface Containerd {
  socket: string;
  process: ManagedProcess;
  /** `ctr` against this containerd, in the CRI's namespace. */
  ctr(...args: string[]): Promise<string>;
}

export interface ContainerdOptions {
  name: string;
  dir: string;
  /** The pod sandbox image, imported by importImages before the first pod. */
  sandboxImage: string;
  /** The third octet of this node's pod addresses: its pods take 10.244.<n>.2-254. */
  podRange: number;
}

export async function startContainerd(supervisor: Supervisor, o: ContainerdOptions): Promise<Containerd> {
  const socket = path.join(o.dir, 'containerd.sock');
  const cniDir = path.join(o.dir, 'cni');
  mkdirSync(cniDir, { recursive: true });
  writeFileSync(
    path.join(cniDir, '10-pods.conflist'),
    JSON.stringify(cniConfig(o, path.join(o.dir, 'ipam')), null, 2),
  );
  const streamPort = await freePort();
  const configPath = path.join(o.dir, 'containerd.toml');
  writeFileSync(configPath, containerdConfig(o, socket, cniDir, streamPort));
  const process = supervisor.start(`${o.name}-containerd`, 'containerd', { args: ['--config', configPath] });
  const ctr = async (...args: string[]) => {
    const { stdout } = await run('ctr', ['--address', socket, '--namespace', 'k8s.io', ...args], {
      maxBuffer: 16 * 1024 * 1024,
    });
    return stdout;
  };
  await waitFor(`${o.name}'s containerd to answer on ${socket}`, () => ctr('version').then(() => true), {
    timeoutMs: 30_000,
    intervalMs: 100,
    failFast: () => process.assertRunning(),
  });
  return { socket, process, ctr };
}

/** Loads `podman save` archives (hack/image/build.sh) into the node's image store. */
export async function importImages(containerd: Containerd, archives: string[]): Promise<void> {
  for (const archive of archives) await containerd.ctr('images', 'import', '--no-unpack=false', archive);
}

/**
 * Kills every container the node's containerd still runs and deletes them, so the shims exit while
 * containerd can still tell them to (the kubelet is stopped first and would otherwise restart them).
 */
export async function removeAllContainers(containerd: Containerd): Promise<void> {
  const tasks = (await containerd.ctr('tasks', 'ls', '-q').catch(() => '')).split('\n').filter(Boolean);
  await Promise.all(
    tasks.map((id) => containerd.ctr('tasks', 'kill', '--signal', 'SIGKILL', id).catch(() => undefined)),
  );
  for (const id of tasks) {
    await waitFor(
      `container ${id} to stop`,
      async () => {
        const out = await containerd.ctr('tasks', 'ls').catch(() => '');
        return !out.split('\n').some((l) => l.startsWith(`${id} `) && /RUNNING|PAUSED/.test(l));
      },
      { timeoutMs: 10_000, intervalMs: 100 },
    ).catch(() => undefined);
    await containerd.ctr('tasks', 'delete', '--force', id).catch(() => undefined);
  }
  const containers = (await containerd.ctr('containers', 'ls', '-q').catch(() => ''))
    .split('\n')
    .filter(Boolean);
  for (const id of containers) await containerd.ctr('containers', 'delete', id).catch(() => undefined);
}

/**
 * The pods' network: the environment's bridge, addresses from this node's /24, no default route, and
 * the route to every cluster's service range through the host (its NAT chain answers the `kubernetes`
 * Service). isGateway stays off: with it the bridge plugin would turn on the host's IP forwarding.
 */
function cniConfig(o: ContainerdOptions, ipamDir: string) {
  return {
    cniVersion: '1.0.0',
    name: `cgw-${o.name}`,
    plugins: [
      {
        type: 'bridge',
        bridge: bridgeName,
        isGateway: false,
        ipMasq: false,
        hairpinMode: true,
        ipam: {
          type: 'host-local',
          dataDir: ipamDir,
          ranges: [
            [
              {
                subnet: podNetwork,
                rangeStart: `10.244.${o.podRange}.2`,
                rangeEnd: `10.244.${o.podRange}.254`,
                gateway: hostAddress,
              },
            ],
          ],
          routes: [{ dst: serviceNetwork, gw: hostAddress }],
        },
      },
      { type: 'loopback' },
    ],
  };
}

function containerdConfig(o: ContainerdOptions, socket: string, cniDir: string, streamPort: number): string {
  const cri = 'plugins."io.containerd.grpc.v1.cri"';
  return `version = 2
root = "${path.join(o.dir, 'root')}"
state = "${path.join(o.dir, 'state')}"
# Snapshotters and services a node here never uses: fewer errors and less work at start.
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "${socket}"

[ttrpc]
  address = "${socket}.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "${path.join(o.dir, 'opt')}"

[${cri}]
  sandbox_image = "${o.sandboxImage}"
  # The VM lacks CAP_SYS_RESOURCE: the kubelet's oom_score_adj of -998 would fail every sandbox.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "${streamPort}"
  enable_selinux = false
  # Images come from hack/image/build.sh through ctr import; nothing is pulled.
  disable_apparmor = true

[${cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[${cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[${cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false

[${cri}.cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "${cniDir}"
  max_conf_num = 1
`;
}

/**
 * What the environment's real nodes change on this machine, and how each change is undone: a bridge
 * for the pods, one NAT chain that plays kube-proxy for the `kubernetes` Service only, the sysctls
 * the kubelet sets, and the cgroups, mounts and fixed paths it leaves. Every change is recorded in a
 * journal file before it is made, so a run killed with SIGKILL is cleaned up by the next start
 * (restoreHost), as the supervisor does for processes.
 *
 * The pods' network (../shared/notes/real-nodes.md, point 7): one bridge with an address no real
 * network uses, 10.244.0.1/16; each cluster's pods take addresses from their own /24 of it and get no
 * default route, only the route to the service ranges through the bridge's address. The apiservers
 * listen on that address too (they bind every address), so a pod reaches its own apiserver through
 * the `kubernetes` Service's ClusterIP (DNAT here), the hub through 10.244.0.1, and the hub's
 * apiserver reaches the pods (the aggregator and webhooks resolve Services to endpoints).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export const bridgeName = 'cgw0';
/** The host's address on the pods' bridge: every server a pod reaches listens here. */
export const hostAddress = '10.244.0.1';
export const podNetwork = '10.244.0.0/16';
/** Every cluster's service range lies in it (environment.ts gives cluster i 10.(96+i).0.0/16). */
export const serviceNetwork = '10.96.0.0/12';
const natChain = 'CGW-SERVICES';
/** The filter chain of the routes blocked-routes.ts closes (removed with the bridge). */
export const blockedChain = 'CGW-BLOCKED';

/** The `kubernetes` Service's ClusterIP: the first address of the cluster's service range. */
export function kubernetesServiceIp(serviceCidr: string): string {
  const [a, b, c] = serviceCidr.split('/')[0]!.split('.');
  return `${a}.${b}.${c}.1`;
}

/** The sysctls kubelet writes at start (kubelet's setupKernelTunables) and we restore. */
const kubeletSysctls = ['vm/overcommit_memory', 'kernel/panic', 'kernel/panic_on_oops'];
/** The iptables chains a kubelet may create even with makeIPTablesUtilChains false. */
const kubeletChains = [
  ['filter', 'KUBE-FIREWALL'],
  ['filter', 'KUBE-KUBELET-CANARY'],
  ['mangle', 'KUBE-KUBELET-CANARY'],
  ['nat', 'KUBE-KUBELET-CANARY'],
  ['mangle', 'KUBE-IPTABLES-HINT'],
] as const;
/** Paths the kubelet and containerd use whatever their flags say. */
const fixedPaths = [
  '/var/lib/kubelet',
  '/run/containerd',
  '/var/lib/cni',
  '/run/netns',
  '/var/log/containers', // the kubelets' links to container logs (each kubelet's pod logs are in its own folder)
  '/var/log/pods',
];

interface Journal {
  sysctls: Record<string, string>;
  /** Fixed paths that did not exist before: removed at restore. */
  createdPaths: string[];
  cgroupRoots: string[];
  /** The network namespaces that existed before: the CRI's new ones (cni-*) are removed at restore. */
  netnsBefore: string[];
  /** Whether this run made the bridge and the NAT chain (and so started kubelets): only then are they removed. */
  network: boolean;
  /** The `kubernetes` Service routes this run added to the NAT chain. */
  routes?: { clusterIp: string; apiserverPort: number }[];
  /**
   * A node added to a running environment (HostChanges.forExtraNode): only its own cgroups, routes and
   * the mounts under its own state folder are undone; the machine-wide settings are the environment's.
   */
  extraNode?: boolean;
}

const run = (cmd: string, args: string[]) =>
  execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
const tryRun = (cmd: string, args: string[]) => {
  try {
    return run(cmd, args);
  } catch {
    return undefined;
  }
};

export class HostChanges {
  readonly #journalPath: string;
  #journal: Journal;

  constructor(stateDir: string, options: { extraNode?: boolean } = {}) {
    this.#journalPath = path.join(stateDir, 'host-changes.json');
    restoreHost(this.#journalPath); // a previous run killed before it could undo its changes
    this.#journal = options.extraNode
      ? { sysctls: {}, createdPaths: [], cgroupRoots: [], netnsBefore: [], network: false, extraNode: true }
      : {
          sysctls: Object.fromEntries(
            kubeletSysctls.map((k) => [k, readFileSync(`/proc/sys/${k}`, 'utf8').trim()]),
          ),
          createdPaths: fixedPaths.filter((p) => !existsSync(p)),
          cgroupRoots: [],
          netnsBefore: existsSync('/run/netns') ? readdirSync('/run/netns') : [],
          network: false,
        };
    this.#save();
  }

  /**
   * For a node a test adds to the running environment (its own cluster, its own state folder): it joins
   * the environment's bridge and NAT chain and, at restore, undoes only what it added itself, so the
   * environment's pods keep their mounts and network namespaces. A node stopped cleanly removes its pods'
   * network namespaces itself (the CRI tears each sandbox down); after a crash the environment's own
   * restore removes them.
   */
  static forExtraNode(stateDir: string): HostChanges {
    if (!existsSync(`/sys/class/net/${bridgeName}`)) {
      throw new Error(
        `an extra node joins a running environment with nodes: there is no pods' bridge ${bridgeName}`,
      );
    }
    return new HostChanges(stateDir, { extraNode: true });
  }

  /** The bridge with the host's address, and the NAT chain that will hold each cluster's kubernetes Service. */
  setUpNetwork(): void {
    if (existsSync(`/sys/class/net/${bridgeName}`)) {
      throw new Error(
        `the pods' bridge ${bridgeName} exists already: another environment with nodes runs on this machine (one at a time), or one killed with SIGKILL left it from another state folder; stop it, or remove it: ip link del ${bridgeName}`,
      );
    }
    this.#journal.network = true;
    this.#save();
    run('ip', ['link', 'add', bridgeName, 'type', 'bridge']);
    run('ip', ['addr', 'add', `${hostAddress}/16`, 'dev', bridgeName]);
    run('ip', ['link', 'set', bridgeName, 'up']);
    run('iptables', ['-t', 'nat', '-N', natChain]);
    run('iptables', ['-t', 'nat', '-A', 'PREROUTING', '-i', bridgeName, '-j', natChain]);
  }

  /** A pod's connection to `clusterIp`:443 reaches the apiserver's port on the host's bridge address. */
  routeKubernetesService(clusterIp: string, apiserverPort: number): void {
    this.#journal.routes = [...(this.#journal.routes ?? []), { clusterIp, apiserverPort }];
    this.#save();
    run('iptables', ['-t', 'nat', '-A', ...kubernetesServiceRule(clusterIp, apiserverPort)]);
  }

  /** A cgroup parent of one kubelet's pods in every v1 hierarchy, so kubelets never touch each other's pods. */
  createCgroupRoot(name: string): string {
    const root = `/${name}`;
    this.#journal.cgroupRoots.push(root);
    this.#save();
    for (const hierarchy of cgroupHierarchies()) {
      execFileSync('mkdir', ['-p', path.join(hierarchy, root)]);
    }
    return root;
  }

  /** Undoes every change: call after the kubelets and containerds have stopped. */
  restore(): void {
    restoreHost(this.#journalPath);
  }

  #save(): void {
    writeFileSync(this.#journalPath, JSON.stringify(this.#journal));
  }
}

/** Undoes what the journal at `journalPath` records, and whatever the kubelets left (idempotent). */
export function restoreHost(journalPath: string): void {
  let journal: Journal;
  try {
    journal = JSON.parse(readFileSync(journalPath, 'utf8')) as Journal;
  } catch {
    return;
  }
  // Processes first: the containers (in the kubelets' cgroups) and their shims (named after a containerd
  // socket in the state folder), which a run killed with SIGKILL leaves running.
  killProcesses(journal.cgroupRoots, path.dirname(journalPath));
  if (journal.extraNode) {
    for (const mount of mountsUnder([path.dirname(journalPath)]).reverse()) tryRun('umount', ['-l', mount]);
    for (const { clusterIp, apiserverPort } of journal.routes ?? [])
      tryRun('iptables', ['-t', 'nat', '-D', ...kubernetesServiceRule(clusterIp, apiserverPort)]);
    for (const root of journal.cgroupRoots) {
      for (const hierarchy of cgroupHierarchies()) removeCgroupTree(path.join(hierarchy, root));
    }
    rmSync(journalPath, { force: true });
    return;
  }
  // Then mounts: network namespaces and pod volumes under the fixed paths and the state folder.
  for (const mount of mountsUnder([...fixedPaths, path.dirname(journalPath)]).reverse()) {
    tryRun('umount', ['-l', mount]);
  }
  if (existsSync('/run/netns')) {
    for (const ns of readdirSync('/run/netns')) {
      if (ns.startsWith('cni-') && !journal.netnsBefore.includes(ns)) {
        tryRun('umount', ['-l', `/run/netns/${ns}`]);
        rmSync(`/run/netns/${ns}`, { force: true });
      }
    }
  }
  if (journal.network) {
    // blocked-routes.ts's chain, when a test or `npm start` closed a route.
    tryRun('iptables', ['-t', 'filter', '-D', 'INPUT', '-i', bridgeName, '-j', blockedChain]);
    tryRun('iptables', ['-t', 'filter', '-F', blockedChain]);
    tryRun('iptables', ['-t', 'filter', '-X', blockedChain]);
    tryRun('iptables', ['-t', 'nat', '-D', 'PREROUTING', '-i', bridgeName, '-j', natChain]);
    tryRun('iptables', ['-t', 'nat', '-F', natChain]);
    tryRun('iptables', ['-t', 'nat', '-X', natChain]);
    for (const iptables of ['iptables', 'ip6tables']) {
      for (const [table, chain] of kubeletChains) {
        for (const parent of ['INPUT', 'OUTPUT', 'FORWARD'])
          tryRun(iptables, ['-t', table, '-D', parent, '-j', chain]);
        tryRun(iptables, ['-t', table, '-F', chain]);
        tryRun(iptables, ['-t', table, '-X', chain]);
      }
    }
    tryRun('ip', ['link', 'del', bridgeName]);
  }
  for (const [key, value] of Object.entries(journal.sysctls)) {
    try {
      writeFileSync(`/proc/sys/${key}`, value);
    } catch {}
  }
  for (const root of journal.cgroupRoots) {
    for (const hierarchy of cgroupHierarchies()) removeCgroupTree(path.join(hierarchy, root));
  }
  for (const p of journal.createdPaths) rmSync(p, { recursive: true, force: true });
  rmSync(journalPath, { force: true });
}

/** The NAT chain's rule (without its -A/-D) that sends a pod's `clusterIp`:443 to the apiserver's port. */
function kubernetesServiceRule(clusterIp: string, apiserverPort: number): string[] {
  return [
    natChain,
    '-d',
    `${clusterIp}/32`,
    '-p',
    'tcp',
    '--dport',
    '443',
    '-j',
    'DNAT',
    '--to-destination',
    `${hostAddress}:${apiserverPort}`,
  ];
}

function killProcesses(cgroupRoots: string[], stateDir: string): void {
  const pids = new Set<number>();
  const collect = (dir: string) => {
    if (!existsSync(dir)) return;
    for (const line of readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n'))
      if (line) pids.add(Number(line));
    for (const e of readdirSync(dir, { withFileTypes: true }))
      if (e.isDirectory()) collect(path.join(dir, e.name));
  };
  for (const root of cgroupRoots) collect(path.join('/sys/fs/cgroup/pids', root));
  for (const { pid, args } of processes()) {
    if (args[0]?.endsWith('containerd-shim-runc-v2') && args.some((a) => a.includes(stateDir))) pids.add(pid);
  }
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
  }
}

/** Every process on this machine with its command line (containers share its process table). */
export function processes(): { pid: number; args: string[] }[] {
  const out: { pid: number; args: string[] }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      out.push({
        pid: Number(entry),
        args: readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').filter(Boolean),
      });
    } catch {} // gone meanwhile
  }
  return out;
}

/** Mount points at or under any of `prefixes`, in mount order. */
export function mountsUnder(prefixes: string[]): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4]?.replace(/\\040/g, ' '))
    .filter((m): m is string => !!m && prefixes.some((p) => m === p || m.startsWith(`${p}/`)));
}

/** The v1 hierarchies (hybrid cgroups: cgroup2 holds no controller the kubelet uses). */
function cgroupHierarchies(): string[] {
  const base = '/sys/fs/cgroup';
  return readdirSync(base, { withFileTypes: true })
    .filter((e) => e.isDirectory() && e.name !== 'unified')
    .map((e) => path.join(base, e.name));
}

/** cgroup folders go bottom-up with rmdir: their files cannot be deleted. */
function removeCgroupTree(dir: string): void {
  if (!existsSync(dir)) return;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory()) removeCgroupTree(path.join(dir, e.name));
  }
  tryRun('rmdir', [dir]);
}

/**
 * What of an environment with nodes is on this machine now, for a test that checks nothing remains:
 * processes whose command line names `stateDir` or that run in its kubelets' cgroups, mounts under it
 * and under the fixed paths, the iptables chains it and the kubelets make, its bridge, the kubelet's
 * sysctls and the fixed paths.
 */
export function hostFootprint(stateDir: string): {
  processes: string[];
  mounts: string[];
  chains: string[];
  bridge: boolean;
  sysctls: Record<string, string>;
  paths: string[];
  cgroups: string[];
} {
  const running = processes()
    .filter(({ pid, args }) => pid !== process.pid && args.some((a) => a.includes(stateDir)))
    .map(({ pid, args }) => `${pid} ${args.join(' ').slice(0, 160)}`);
  const chains: string[] = [];
  for (const iptables of ['iptables', 'ip6tables']) {
    for (const table of ['filter', 'nat', 'mangle']) {
      const rules = tryRun(iptables, ['-t', table, '-S']) ?? '';
      for (const line of rules.split('\n')) {
        if (/^-N (CGW-|KUBE-)/.test(line)) chains.push(`${iptables} ${table} ${line.slice(3)}`);
      }
    }
  }
  const cgroups = readdirSync('/sys/fs/cgroup/pids').filter((n) => n.startsWith('cgw-'));
  return {
    processes: running,
    mounts: mountsUnder([...fixedPaths, stateDir]),
    chains,
    bridge: existsSync(`/sys/class/net/${bridgeName}`),
    sysctls: Object.fromEntries(
      kubeletSysctls.map((k) => [k, readFileSync(`/proc/sys/${k}`, 'utf8').trim()]),
    ),
    paths: fixedPaths.filter((p) => existsSync(p)),
    cgroups,
  };
}

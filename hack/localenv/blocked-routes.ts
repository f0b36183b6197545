/**
 * Routes the environment's pods cannot take: a cluster "behind NAT" (the hub cannot dial it) and
 * agents "behind a corporate proxy" (the direct route to the hub is closed) are made by refusing TCP
 * from one node's pods to one port of the host, where every apiserver listens (host-changes.ts).
 *
 * The rules live in one filter chain, CGW-BLOCKED, jumped to from INPUT for traffic arriving on the pods'
 * bridge; restoreHost() removes the chain with the bridge, so a run killed with SIGKILL leaves none.
 * Refused with a TCP reset, so a blocked dial fails at once (as a firewall that rejects), not after a
 * connect timeout.
 */
import { execFileSync } from 'node:child_process';
import { blockedChain, bridgeName } from './host-changes.ts';

/** The pods of the environment's node `index` (0: the hub, 1: the first managed cluster...). */
export function nodePodRange(index: number): string {
  return `10.244.${index + 1}.0/24`;
}

export interface BlockedRoute {
  from: string;
  port: number;
  /** Opens the route again (idempotent). */
  undo(): void;
}

const iptables = (...args: string[]) => execFileSync('iptables', args, { stdio: ['ignore', 'pipe', 'pipe'] });
const succeeds = (...args: string[]) => {
  try {
    iptables(...args);
    return true;
  } catch {
    return false;
  }
};
const rule = (from: string, port: number) => [
  '-s',
  from,
  '-p',
  'tcp',
  '--dport',
  String(port),
  '-j',
  'REJECT',
  '--reject-with',
  'tcp-reset',
];

/** Refuses TCP from `from` (a CIDR of pods) to the host's `port`, until undo(). Needs the environment's nodes. */
export function blockRoute(from: string, port: number): BlockedRoute {
  if (!succeeds('-t', 'filter', '-n', '-L', blockedChain)) iptables('-t', 'filter', '-N', blockedChain);
  const jump = ['INPUT', '-i', bridgeName, '-j', blockedChain];
  if (!succeeds('-t', 'filter', '-C', ...jump)) iptables('-t', 'filter', '-I', ...jump);
  iptables('-t', 'filter', '-A', blockedChain, ...rule(from, port));
  let open = false;
  return {
    from,
    port,
    undo() {
      if (open) return;
      open = true;
      succeeds('-t', 'filter', '-D', blockedChain, ...rule(from, port));
    },
  };
}

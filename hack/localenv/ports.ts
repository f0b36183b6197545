import { readFileSync } from 'node:fs';
import net from 'node:net';

/**
 * A currently free TCP port on 127.0.0.1 for a process we start later.
 *
 * Chosen below the kernel's ephemeral range: a port the OS hands out with
 * listen(0) is also what it hands out for outgoing connections (etcd and
 * apiserver clients make many), so such a port can be taken again in the
 * seconds between choosing it and the process binding it.
 */
export async function freePort(): Promise<number> {
  const [ephemeralLow] = ephemeralRange();
  const high = Math.min(ephemeralLow, 32768);
  const low = Math.max(10000, high - 12000);
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low));
    if (taken.has(port)) continue;
    if (await canBind(port, '127.0.0.1')) {
      taken.add(port);
      return port;
    }
  }
  throw new Error(`no free port found between ${low} and ${high}`);
}

/** Several distinct free ports. */
export async function freePorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  while (ports.length < count) ports.push(await freePort());
  return ports;
}

/** Whether `port` can be bound on all interfaces right now. */
export function portIsFree(port: number): Promise<boolean> {
  return canBind(port);
}

/** Ports this process already handed out: never hand one out twice. */
const taken = new Set<number>();

function canBind(port: number, host?: string): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}

function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number);
    if (low && high) return [low, high];
  } catch {
    // not Linux: fall through
  }
  return [32768, 60999];
}

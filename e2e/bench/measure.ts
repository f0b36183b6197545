/**
 * What the benchmarks read about a process and its traffic, from /proc and
 * the kube-apiservers' audit logs (hack/localenv/apiserver.ts writes them).
 */
import { closeSync, openSync, readFileSync, readlinkSync, readSync, statSync } from 'node:fs';
import { readdir } from 'node:fs/promises';

/**
 * CPU time of a process, all threads (/proc/<pid>/stat utime + stime, in
 * 10 ms ticks), and how long its main thread was runnable but waiting for a
 * CPU (/proc/<pid>/schedstat run_delay, ns): on a busy 2-core machine the
 * latter is where much of the added latency goes.
 */
export function cpuUsage(pid: number): { cpuMs: number; waitMs: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // fields from 3 (state) on
  const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime
  const schedstat = readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ');
  return { cpuMs: ticks * 10, waitMs: Number(schedstat[1]) / 1e6 };
}

/** VmRSS (now) or VmHWM (peak) of a process, in kB. */
export function rssKb(pid: number, field: 'VmRSS' | 'VmHWM' = 'VmRSS'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(status);
  if (!match) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(match[1]);
}

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] ?? Number.NaN;
}

export function median(values: number[]): number {
  return percentile(Float64Array.from(values).sort(), 50);
}

/**
 * Established TCP connections that process `pid` holds to `remotePort` on
 * loopback: its socket inodes (/proc/<pid>/fd) matched against the IPv4 and
 * IPv6 tables of its network namespace.
 */
export async function connectionsTo(pid: number, remotePort: number): Promise<number> {
  const inodes = new Set<string>();
  for (const fd of await readdir(`/proc/${pid}/fd`).catch(() => [])) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m?.[1]) inodes.add(m[1]);
    } catch {
      // closed meanwhile
    }
  }
  const portHex = remotePort.toString(16).toUpperCase().padStart(4, '0');
  let n = 0;
  for (const table of ['tcp', 'tcp6']) {
    let text = '';
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      // cols: sl local_address rem_address st ... inode (index 9); st 01 = ESTABLISHED
      if (cols.length < 10 || cols[3] !== '01') continue;
      if (cols[2]?.endsWith(`:${portHex}`) && inodes.has(cols[9] ?? '')) n++;
    }
  }
  return n;
}

export interface AuditRecord {
  verb: string;
  requestURI: string;
  user: { username: string };
  objectRef?: { resource?: string; subresource?: string };
}

/** Reads an audit log from a byte offset on: the events since then, and the offset to continue from. */
export function auditSince(file: string, offset: number): { events: AuditRecord[]; offset: number } {
  const size = statSync(file).size;
  if (size < offset) offset = 0; // rotated
  const length = size - offset;
  const buffer = Buffer.alloc(length);
  const fd = openSync(file, 'r');
  try {
    readSync(fd, buffer, 0, length, offset);
  } finally {
    closeSync(fd);
  }
  const text = buffer.toString('utf8');
  const end = text.lastIndexOf('\n') + 1; // a line being written is read next time
  const events: AuditRecord[] = [];
  for (const line of text.slice(0, end).split('\n')) if (line) events.push(JSON.parse(line) as AuditRecord);
  return { events, offset: offset + Buffer.byteLength(text.slice(0, end)) };
}

/** The current end of a file, to read from later with auditSince. */
export function fileEnd(file: string): number {
  return statSync(file).size;
}

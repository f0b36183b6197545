/**
 * Starts the environment's processes, one log file each, and makes sure none
 * outlives us: every child is killed when the supervisor stops, when this
 * process exits, on Ctrl-C (SIGINT) and on SIGTERM. Children run in their own
 * process group so that a child's own children go too.
 *
 * The pids are also written to a file; the next start kills any left over by
 * a run that was killed with SIGKILL (which no handler can catch).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export interface StartOptions {
  args: string[];
  env?: Record<string, string>;
  cwd?: string;
}

export class ManagedProcess {
  readonly name: string;
  readonly logPath: string;
  readonly child: ChildProcess;
  /** Set once the process has exited: its code or signal. */
  exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  readonly exited: Promise<void>;
  #expectedExit = false;

  constructor(name: string, logPath: string, child: ChildProcess) {
    this.name = name;
    this.logPath = logPath;
    this.child = child;
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exit = { code, signal };
        resolve();
      });
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  /** Last lines of the log, for error messages. */
  tail(lines = 30): string {
    try {
      return readFileSync(this.logPath, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }

  /** Throws, with the last log lines, if the process has died unexpectedly. */
  assertRunning(): void {
    if (this.exit && !this.#expectedExit) {
      throw new Error(
        `${this.name} exited (${this.exit.signal ?? `code ${this.exit.code}`}); last lines of ${this.logPath}:\n${this.tail()}`,
      );
    }
  }

  async stop(timeoutMs = 5000): Promise<void> {
    this.#expectedExit = true;
    if (this.exit) return;
    killGroup(this.pid, 'SIGTERM');
    const timer = setTimeout(() => killGroup(this.pid, 'SIGKILL'), timeoutMs);
    await this.exited;
    clearTimeout(timer);
  }
}

export class Supervisor {
  readonly logDir: string;
  readonly #pidFile: string;
  readonly #processes: ManagedProcess[] = [];
  #stopping: Promise<void> | undefined;
  readonly #onExit = () => this.#killAllNow();
  readonly #onSignal = (signal: NodeJS.Signals) => {
    void this.stop().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };

  /**
   * `handleSignals: false` for a supervisor nested in a run that another one already ends on Ctrl-C
   * (its children are still killed when the process exits).
   */
  constructor(stateDir: string, options: { handleSignals?: boolean } = {}) {
    this.logDir = path.join(stateDir, 'logs');
    this.#pidFile = path.join(stateDir, 'pids');
    mkdirSync(this.logDir, { recursive: true });
    killLeftovers(this.#pidFile);
    process.once('exit', this.#onExit);
    if (options.handleSignals ?? true) {
      process.once('SIGINT', this.#onSignal);
      process.once('SIGTERM', this.#onSignal);
    }
  }

  get processes(): readonly ManagedProcess[] {
    return this.#processes;
  }

  start(name: string, command: string, options: StartOptions): ManagedProcess {
    const logPath = path.join(this.logDir, `${name}.log`);
    const fd = openSync(logPath, 'a');
    const child = spawn(command, options.args, {
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
      stdio: ['ignore', fd, fd],
      detached: true, // own process group: we kill the group
    });
    closeSync(fd);
    const managed = new ManagedProcess(name, logPath, child);
    child.on('error', () => {}); // surfaced through exit/assertRunning
    this.#processes.push(managed);
    this.#writePids();
    return managed;
  }

  /** Throws with the failing process's last log lines if any process died. */
  assertAllRunning(): void {
    for (const p of this.#processes) p.assertRunning();
  }

  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      // Reverse start order: agents before the servers they talk to.
      for (const p of [...this.#processes].reverse()) await p.stop();
      writeFileSync(this.#pidFile, '');
      process.off('exit', this.#onExit);
      process.off('SIGINT', this.#onSignal);
      process.off('SIGTERM', this.#onSignal);
    })();
    return this.#stopping;
  }

  #killAllNow(): void {
    for (const p of this.#processes) if (!p.exit) killGroup(p.pid, 'SIGKILL');
  }

  #writePids(): void {
    writeFileSync(this.#pidFile, this.#processes.map((p) => p.pid).join('\n'));
  }
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  if (pid <= 0) return;
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

function killLeftovers(pidFile: string): void {
  let text = '';
  try {
    text = readFileSync(pidFile, 'utf8');
  } catch {
    return;
  }
  for (const line of text.split('\n')) {
    const pid = Number(line);
    if (Number.isInteger(pid) && pid > 0) killGroup(pid, 'SIGKILL');
  }
}

/**
 * The host pid of a process of the environment (its pid file, written by the supervisor of another
 * process: the global setup's) whose command line matches `match`.
 */
export function environmentPid(stateDir: string, what: string, match: (args: string[]) => boolean): number {
  const pids = readFileSync(path.join(stateDir, 'pids'), 'utf8').split('\n').filter(Boolean).map(Number);
  for (const pid of pids) {
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (match(cmdline.split('\0'))) return pid;
  }
  throw new Error(`${what} is not among the environment's processes`);
}

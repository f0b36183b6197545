/**
 * The agent's logger: pino's JSON lines (level number, time, the bindings, the fields, msg), written
 * synchronously to stdout, without pino.
 *
 * Why not pino: the agent's idle memory budget is 80 MB in its container, and pino costs it about
 * 5 MiB of RSS there (its module graph: thread-stream, worker_threads, sonic-boom, the redaction and
 * serializer modules, their code and the young-generation growth their loading causes), for features the
 * agent never uses (transports, redaction, serializers: every field it logs is a string, a number or a
 * plain object). Measured with `npm run bench:image` (issue 33).
 * The gateway and the manager keep pino.
 */
import { writeSync } from 'node:fs';
import type { logLevels } from '../shared/cli-flags.ts';

export type LogLevel = (typeof logLevels)[number];

/** pino's level numbers: a line's "level" is what log collectors already parse for pino. */
const levelNumbers: Record<LogLevel, number> = {
  trace: 10,
  debug: 20,
  info: 30,
  warn: 40,
  error: 50,
  fatal: 60,
};

export interface AgentLogger {
  trace(fields: object, msg: string): void;
  debug(fields: object, msg: string): void;
  info(fields: object, msg: string): void;
  warn(fields: object, msg: string): void;
  error(fields: object, msg: string): void;
  fatal(fields: object, msg: string): void;
  /** A logger whose lines carry `bindings` too, after the parent's. */
  child(bindings: object): AgentLogger;
}

export interface LoggerOptions {
  level: string;
  /** Fields of every line, after level and time (pino's `base`). */
  base: object;
  /** Where a line goes (tests); default: written synchronously to stdout. */
  write?: (line: string) => void;
  now?: () => number;
}

/**
 * Synchronous as pino's default destination is: a fatal line is out before process.exit, and lines
 * never queue in memory. EAGAIN (stdout a non-blocking pipe that is full) is retried, as sonic-boom does.
 */
function writeStdout(line: string): void {
  let rest = Buffer.from(line);
  for (let attempts = 0; rest.length > 0; ) {
    try {
      rest = rest.subarray(writeSync(1, rest));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN' || ++attempts > 1000) return;
    }
  }
}

export function createLogger(options: LoggerOptions): AgentLogger {
  const threshold = levelNumbers[options.level as LogLevel] ?? levelNumbers.info;
  const write = options.write ?? writeStdout;
  const now = options.now ?? Date.now;
  const make = (bindings: string): AgentLogger => {
    const line = (level: number) =>
      level < threshold
        ? () => {}
        : (fields: object, msg: string) => {
            const own = JSON.stringify(fields);
            const middle = own.length > 2 ? `,${own.slice(1, -1)}` : '';
            write(`{"level":${level},"time":${now()}${bindings}${middle},"msg":${JSON.stringify(msg)}}\n`);
          };
    return {
      trace: line(levelNumbers.trace),
      debug: line(levelNumbers.debug),
      info: line(levelNumbers.info),
      warn: line(levelNumbers.warn),
      error: line(levelNumbers.error),
      fatal: line(levelNumbers.fatal),
      child: (more) => {
        const own = JSON.stringify(more);
        return make(own.length > 2 ? `${bindings},${own.slice(1, -1)}` : bindings);
      },
    };
  };
  const base = JSON.stringify(options.base);
  return make(base.length > 2 ? `,${base.slice(1, -1)}` : '');
}

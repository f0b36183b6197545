/**
 * Command-line flags as the gateway, the agent and the addon manager read
 * them: one table of flags per program (every value a string, so that
 * true/false and numbers are checked here with a message that names the
 * flag), Go pflag's `--flag` for `--flag=true`, and bad input as an
 * OptionsError that main turns into exit code 2.
 *
 * The same table renders the program's arguments for whoever starts it
 * (renderFlags): the manager writes the gateway's and the agent's container
 * args through their tables, so a misspelt or removed flag is a compile
 * error in the manager rather than a pod that exits at start.
 */
import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';

export interface FlagSpec {
  type: 'string' | 'boolean';
  default?: string | boolean;
  help: string;
}

export type FlagTable = Readonly<Record<string, FlagSpec>>;

export type FlagValues = Record<string, string | boolean | undefined>;

/**
 * What parseFlags returns for `T`: boolean flags as booleans, string flags as strings (undefined when
 * the flag has no default and is not given). Indexing it with a name not in the table does not compile.
 */
export type ParsedFlags<T extends FlagTable> = {
  -readonly [K in keyof T]: T[K]['type'] extends 'boolean'
    ? boolean
    : T[K] extends { default: string }
      ? string
      : string | undefined;
};

/** The flags another program may set on a program's command line: all but --help. */
export type FlagName<T extends FlagTable> = Exclude<Extract<keyof T, string>, 'help'>;

/**
 * A flag's value for renderFlags: a boolean for a boolean flag and for a true/false flag (a string flag
 * whose default is "true" or "false"), which also takes "true" and "false"; a string or a number for
 * the rest (numbers are written in decimal).
 */
export type FlagInput<S extends FlagSpec> = S['type'] extends 'boolean'
  ? boolean
  : S extends { default: 'true' | 'false' }
    ? boolean | 'true' | 'false'
    : string | number;

/** Values to render for the flags of `T`, keyed by flag name (without --); undefined ones are left out. */
export type FlagInputs<T extends FlagTable> = { [K in FlagName<T>]?: FlagInput<T[K]> | undefined };

/** Command-line input that cannot be used; the message says what to fix. */
export class OptionsError extends Error {}

export const logLevels = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;

/**
 * The flags' values (defaults filled in); unknown flags and positionals are an OptionsError, its
 * message ending with `hint`.
 */
export function parseFlags<T extends FlagTable>(
  flags: T,
  argv: string[],
  hint = 'Run with --help to see the flags.',
): ParsedFlags<T> {
  try {
    const { values } = parseArgs({
      args: bareBooleans(flags, argv),
      options: Object.fromEntries(
        Object.entries(flags).map(([name, spec]) => [
          name,
          { type: spec.type, ...(spec.default !== undefined ? { default: spec.default } : {}) },
        ]),
      ) as ParseArgsOptionsConfig,
      strict: true,
      allowPositionals: false,
    });
    return values as ParsedFlags<T>;
  } catch (err) {
    throw new OptionsError(`${(err as Error).message}${hint ? `\n${hint}` : ''}`);
  }
}

/**
 * A program's command-line arguments from its own table, one `--name=value` per flag given, in the
 * order of `values` (a boolean flag, such as --help, as a bare `--name` when true). Values are written
 * as they are: a container's args may hold `$(VAR)`, which the kubelet replaces with the container's
 * environment variable VAR (containerEnv).
 */
export function renderFlags<T extends FlagTable>(flags: T, values: FlagInputs<T>): string[] {
  const args: string[] = [];
  for (const [name, value] of Object.entries(values) as [string, string | number | boolean | undefined][]) {
    if (value === undefined) continue;
    const spec = flags[name];
    // The types rule this out for object literals; a value built some other way is still a bug.
    if (!spec || name === 'help') throw new Error(`renderFlags: --${name} is not a flag of this program`);
    if (spec.type === 'boolean') {
      if (value === true) args.push(`--${name}`);
      continue;
    }
    args.push(`--${name}=${String(value)}`);
  }
  return args;
}

/** `$(name)` in a container's args: the kubelet replaces it with the container's environment variable `name`. */
export function containerEnv(name: string): string {
  return `$(${name})`;
}

/**
 * `args` as the kubelet hands them to the container: `$(VAR)` replaced by `env`'s VAR where it has
 * one (left as it is otherwise), `$$` an escaped `$`. For checking a container's arguments before it runs.
 */
export function expandContainerEnv(args: string[], env: Record<string, string>): string[] {
  return args.map((arg) =>
    arg.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (ref, name: string | undefined) =>
      name === undefined ? '$' : (env[name] ?? ref),
    ),
  );
}

/**
 * The first argument in `argv` that names a flag `flags` does not have (`--name` or `--name=value`;
 * the value of a string flag given as a separate argument is skipped), with the known flag closest to
 * it when one is close enough to be a typo.
 */
export function unknownFlag(
  flags: FlagTable,
  argv: string[],
): { flag: string; suggestion?: string } | undefined {
  const names = Object.keys(flags);
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--') return undefined; // positionals follow; parseFlags refuses them
    if (!arg.startsWith('-')) continue;
    const name = arg.replace(/^--?/, '').split('=')[0] ?? '';
    const spec = flags[name];
    if (!spec || !arg.startsWith('--')) {
      const suggestion = closest(name, names);
      return { flag: arg.split('=')[0] ?? arg, ...(suggestion ? { suggestion: `--${suggestion}` } : {}) };
    }
    const takesNext =
      spec.type === 'string' && !arg.includes('=') && spec.default !== 'true' && spec.default !== 'false';
    if (takesNext) i++;
  }
  return undefined;
}

/** The name in `names` fewest edits away from `name`, if at most a third of its length (and 3) away. */
function closest(name: string, names: string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.min(3, Math.ceil(name.length / 3)) + 1;
  for (const candidate of names) {
    const d = editDistance(name, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/** Levenshtein distance, with a swap of two neighbours counting as one edit (log-levle: log-level). */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i] as number[];
      const prev = d[i - 1] as number[];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let value = Math.min(
        (prev[j] as number) + 1,
        (row[j - 1] as number) + 1,
        (prev[j - 1] as number) + cost,
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        value = Math.min(value, ((d[i - 2] as number[])[j - 2] as number) + 1);
      }
      row[j] = value;
    }
  }
  return (d[a.length] as number[])[b.length] as number;
}

/** One help line per flag, its help text starting at column `width`; non-empty string defaults shown. */
export function flagHelpLines(flags: FlagTable, width: number): string[] {
  return Object.entries(flags).map(([name, spec]) => {
    const def = spec.type === 'string' && spec.default ? ` (default ${spec.default})` : '';
    return `  --${name}`.padEnd(width) + spec.help + def;
  });
}

/**
 * `--flag` alone means `--flag=true` for true/false flags (string flags whose
 * default is "true" or "false"), as with Go's pflag; `--flag false` (a
 * separate value) keeps working.
 */
function bareBooleans(flags: FlagTable, argv: string[]): string[] {
  const booleans = new Set(
    Object.entries(flags)
      .filter(([, spec]) => spec.default === 'true' || spec.default === 'false')
      .map(([name]) => `--${name}`),
  );
  return argv.map((arg, i) =>
    booleans.has(arg) && !['true', 'false'].includes(argv[i + 1] ?? '') ? `${arg}=true` : arg,
  );
}

/** `name` is the flag (with or without its leading --), or a part of one such as `--feature-gates X`. */
export function bool(name: string, value: string | undefined): boolean {
  if (value === 'true' || value === '') return true;
  if (value === 'false') return false;
  throw new OptionsError(`--${name.replace(/^--/, '')}: "${value}" is not true or false`);
}

export function integer(name: string, value: string | undefined, min: number, max: number): number {
  const n = Number(value);
  // Number('') is 0: an empty value is a mistake, not a zero.
  if ((value ?? '').trim() === '' || !Number.isInteger(n) || n < min || n > max) {
    throw new OptionsError(`--${name}: "${value}" is not a whole number between ${min} and ${max}`);
  }
  return n;
}

export function logLevel(value: string): string {
  if (!(logLevels as readonly string[]).includes(value)) {
    throw new OptionsError(`--log-level: "${value}" is not one of ${logLevels.join(', ')}`);
  }
  return value;
}

/**
 * For main: the parsed options; --help prints `helpText` and exits 0, an
 * OptionsError prints its message and exits 2 (anything else is a bug and throws).
 */
export function optionsOrExit<T>(parse: () => T | 'help', helpText: () => string): T {
  try {
    const parsed = parse();
    if (parsed === 'help') {
      console.log(helpText());
      process.exit(0);
    }
    return parsed;
  } catch (err) {
    if (!(err instanceof OptionsError)) throw err;
    console.error(`error: ${err.message}`);
    process.exit(2);
  }
}

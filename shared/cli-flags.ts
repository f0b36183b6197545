/**
 * Command-line flags as the gateway and the addon manager read them: one
 * table of flags per program (every value a string, so that true/false and
 * numbers are checked here with a message that names the flag), Go pflag's
 * `--flag` for `--flag=true`, and bad input as an OptionsError that main
 * turns into exit code 2.
 */
import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';

export interface FlagSpec {
  type: 'string' | 'boolean';
  default?: string | boolean;
  help: string;
}

export type FlagTable = Readonly<Record<string, FlagSpec>>;

export type FlagValues = Record<string, string | boolean | undefined>;

/** Command-line input that cannot be used; the message says what to fix. */
export class OptionsError extends Error {}

export const logLevels = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;

/** The flags' values (defaults filled in); unknown flags and positionals are an OptionsError. */
export function parseFlags(flags: FlagTable, argv: string[]): FlagValues {
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
    return values as FlagValues;
  } catch (err) {
    throw new OptionsError(`${(err as Error).message}\nRun with --help to see the flags.`);
  }
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

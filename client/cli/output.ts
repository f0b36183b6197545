/**
 * How the CLI writes: kubectl-style tables (upper-case headers, columns
 * padded, no borders) by default, `-o json|yaml` for scripts, colour only on
 * a terminal and never with NO_COLOR (https://no-color.org), and a progress
 * line on stderr, on a terminal only, for anything that takes more than a
 * moment.
 *
 * Tables are a few lines here rather than a table library: the libraries draw
 * boxes, kubectl's output has none, and users read both side by side.
 */
import type { Writable } from 'node:stream';
import { dump } from 'js-yaml';
import { CliError } from './exit-codes.ts';

export type OutputFormat = 'table' | 'json' | 'yaml';
export const outputFormats: readonly OutputFormat[] = ['table', 'json', 'yaml'];

export type Colour = 'green' | 'red' | 'yellow' | 'dim' | 'bold';
const codes: Record<Colour, [number, number]> = {
  green: [32, 39],
  red: [31, 39],
  yellow: [33, 39],
  dim: [2, 22],
  bold: [1, 22],
};

interface TerminalStream extends Writable {
  isTTY?: boolean;
}

export function parseOutputFormat(value: string | undefined): OutputFormat {
  if (value === undefined || value === '' || value === 'wide') return 'table';
  if ((outputFormats as readonly string[]).includes(value)) return value as OutputFormat;
  throw new CliError(`unknown output format "${value}": use one of ${outputFormats.join(', ')}`);
}

export function colourEnabled(
  stream: TerminalStream,
  env: Record<string, string | undefined> = process.env,
): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.TERM === 'dumb') return false;
  return stream.isTTY === true;
}

export class Output {
  readonly format: OutputFormat;
  readonly colour: boolean;
  readonly #out: TerminalStream;
  readonly #err: TerminalStream;

  constructor(
    format: OutputFormat,
    out: TerminalStream = process.stdout,
    err: TerminalStream = process.stderr,
    env: Record<string, string | undefined> = process.env,
  ) {
    this.format = format;
    this.#out = out;
    this.#err = err;
    this.colour = colourEnabled(out, env);
  }

  paint(colour: Colour, text: string): string {
    if (!this.colour) return text;
    const [on, off] = codes[colour];
    return `\u001b[${on}m${text}\u001b[${off}m`;
  }

  line(text = ''): void {
    this.#out.write(`${printable(text)}\n`);
  }

  /** A message for the person at the terminal (stderr, so `-o json` output stays parseable). */
  note(text: string): void {
    this.#err.write(`${printable(text)}\n`);
  }

  /** `data` as JSON or YAML; for the table format the caller prints its own table. */
  data(value: unknown): void {
    if (this.format === 'yaml') this.#out.write(dump(value, { noRefs: true, lineWidth: -1 }));
    else this.#out.write(`${JSON.stringify(value, null, 2)}\n`);
  }

  /** Rows of cells under upper-case headers; cells may carry colour codes (their width is the visible one). */
  table(headers: string[], rows: string[][]): void {
    this.#out.write(formatTable(headers, rows));
  }

  /**
   * Shows `label` with a spinner on stderr after `delayMs`, on a terminal
   * only; the returned function clears it. Work that finishes sooner shows
   * nothing, so fast commands do not flicker.
   */
  progress(label: string, delayMs = 300): () => void {
    const stream = this.#err;
    if (stream.isTTY !== true) return () => {};
    const frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
    let frame = 0;
    let shown = false;
    let spin: NodeJS.Timeout | undefined;
    const start = setTimeout(() => {
      shown = true;
      spin = setInterval(() => {
        stream.write(`\r${frames[frame++ % frames.length]} ${label}`);
      }, 80);
      spin.unref();
    }, delayMs);
    start.unref();
    return () => {
      clearTimeout(start);
      if (spin) clearInterval(spin);
      if (shown) stream.write('\r\u001b[2K');
    };
  }
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: the escape sequences are what is stripped
const escapes = /\u001b\[[0-9;]*m/g;

/** The colour sequences paint() writes: the only escapes the CLI lets through to a terminal. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are the sequences let through
const ownSequences = /(\u001b\[(?:1|2|22|31|32|33|39)m)/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is escaped
const controls = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/**
 * Text to write to a terminal, made harmless: what the CLI prints comes in part from objects that less trusted
 * parties write (an agent's heartbeat Lease, a health mark's reason, an addon's status), and a terminal executes
 * escape sequences in it (set the title, clear the screen, hide text, OSC 52 to the clipboard). Every control
 * character but newline and tab is shown as `\xNN`, as kubectl escapes them; the colour sequences of paint() pass.
 */
export function printable(text: string): string {
  return text
    .split(ownSequences)
    .map((part, i) =>
      i % 2 === 1
        ? part
        : part.replace(controls, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`),
    )
    .join('');
}

/** A table cell or a one-line message: also its newlines shown, so it cannot forge lines of its own. */
export function oneLine(text: string): string {
  return printable(text).replace(/\r?\n/g, '\\n');
}

export function visibleWidth(text: string): number {
  return [...text.replace(escapes, '')].length;
}

export function formatTable(headers: string[], rows: string[][]): string {
  const all = [headers.map((h) => h.toUpperCase()), ...rows.map((row) => row.map(oneLine))];
  const widths = headers.map((_, i) => Math.max(...all.map((r) => visibleWidth(r[i] ?? ''))));
  return all
    .map((row) =>
      row
        .map((cell, i) =>
          i === row.length - 1 ? cell : cell + ' '.repeat((widths[i] ?? 0) - visibleWidth(cell)),
        )
        .join('   ')
        .trimEnd(),
    )
    .map((line) => `${line}\n`)
    .join('');
}

/** An age as kubectl prints it (k8s.io/apimachinery duration.HumanDuration): 45s, 2m3s, 45m, 5h3m, 2d4h, 400d. */
export function humanAge(totalSeconds: number): string {
  if (!Number.isFinite(totalSeconds) || totalSeconds < -1) return '<invalid>';
  const s = Math.max(0, Math.floor(totalSeconds));
  if (s < 120) return `${s}s`;
  const minutes = Math.floor(s / 60);
  if (minutes < 10) return s % 60 === 0 ? `${minutes}m` : `${minutes}m${s % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(s / 3600);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8)
    return hours % 24 === 0 ? `${Math.floor(hours / 24)}d` : `${Math.floor(hours / 24)}d${hours % 24}h`;
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`;
  const years = Math.floor(hours / 24 / 365);
  if (hours < 24 * 365 * 8) {
    const days = Math.floor(hours / 24) % 365;
    return days === 0 ? `${years}y` : `${years}y${days}d`;
  }
  return `${years}y`;
}

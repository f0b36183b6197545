import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { CliError } from './exit-codes.ts';
import {
  colourEnabled,
  formatTable,
  humanAge,
  Output,
  oneLine,
  parseOutputFormat,
  printable,
  visibleWidth,
} from './output.ts';

class Sink extends Writable {
  text = '';
  isTTY: boolean;
  constructor(isTTY = false) {
    super();
    this.isTTY = isTTY;
  }
  override _write(chunk: Buffer, _enc: string, done: () => void) {
    this.text += chunk.toString();
    done();
  }
}

test('formatTable: upper-case headers, columns padded to the widest cell, three spaces apart, no trailing blanks', () => {
  assert.equal(
    formatTable(
      ['name', 'Available', 'x'],
      [
        ['cluster1', 'True', ''],
        ['c2', 'False', 'z'],
      ],
    ),
    'NAME       AVAILABLE   X\ncluster1   True\nc2         False       z\n',
  );
});

test('formatTable: colour codes do not count towards the width', () => {
  const green = '\u001b[32mTrue\u001b[39m';
  assert.equal(visibleWidth(green), 4);
  assert.equal(formatTable(['A', 'B'], [[green, 'x']]), `A      B\n${green}   x\n`);
});

test('colour: on a terminal only, never with NO_COLOR set (non-empty) or TERM=dumb', () => {
  assert.equal(colourEnabled(new Sink(true), {}), true);
  assert.equal(colourEnabled(new Sink(false), {}), false);
  assert.equal(colourEnabled(new Sink(true), { NO_COLOR: '1' }), false);
  assert.equal(
    colourEnabled(new Sink(true), { NO_COLOR: '' }),
    true,
    'no-color.org: an empty NO_COLOR is unset',
  );
  assert.equal(colourEnabled(new Sink(true), { TERM: 'dumb' }), false);
  const tty = new Output('table', new Sink(true), new Sink(true), {});
  assert.equal(tty.paint('red', 'x'), '\u001b[31mx\u001b[39m');
  const piped = new Output('table', new Sink(false), new Sink(false), {});
  assert.equal(piped.paint('red', 'x'), 'x');
});

test('-o: table (also for "wide" and nothing), json, yaml; anything else is a usage error', () => {
  assert.equal(parseOutputFormat(undefined), 'table');
  assert.equal(parseOutputFormat('wide'), 'table');
  assert.equal(parseOutputFormat('json'), 'json');
  assert.equal(parseOutputFormat('yaml'), 'yaml');
  assert.throws(
    () => parseOutputFormat('xml'),
    (err: unknown) => err instanceof CliError && err.exitCode === 2,
  );
});

test('data: JSON or YAML on stdout; notes on stderr, so the data stays parseable', () => {
  const out = new Sink();
  const err = new Sink();
  new Output('json', out, err, {}).data({ a: 1 });
  new Output('json', out, err, {}).note('hello');
  assert.deepEqual(JSON.parse(out.text), { a: 1 });
  assert.equal(err.text, 'hello\n');
  const yaml = new Sink();
  new Output('yaml', yaml, err, {}).data({ a: 'True' });
  assert.equal(yaml.text, "a: 'True'\n");
});

test('progress: nothing when stderr is not a terminal', async () => {
  const err = new Sink(false);
  const done = new Output('table', new Sink(), err, {}).progress('working', 0);
  await new Promise((r) => setTimeout(r, 200));
  done();
  assert.equal(err.text, '');
});

test('progress: on a terminal, a spinner after the delay, cleared when done; nothing for work done sooner', async () => {
  const err = new Sink(true);
  const output = new Output('table', new Sink(), err, {});
  output.progress('quick', 10_000)();
  assert.equal(err.text, '', 'done before the delay: nothing shown');
  const done = output.progress('slow', 10);
  const deadline = Date.now() + 5000;
  while (!err.text.includes('slow') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  done();
  assert.match(err.text, /\r. slow/);
  assert.ok(err.text.endsWith('\r\u001b[2K'), 'the line is cleared');
});

test('humanAge: as kubectl prints ages', () => {
  const cases: [number, string][] = [
    [0, '0s'],
    [59, '59s'],
    [119, '119s'],
    [120, '2m'],
    [125, '2m5s'],
    [600, '10m'],
    [179 * 60, '179m'],
    [3 * 3600, '3h'],
    [3 * 3600 + 120, '3h2m'],
    [47 * 3600, '47h'],
    [2 * 86400 + 3600, '2d1h'],
    [30 * 86400, '30d'],
    [3 * 365 * 86400, '3y'],
  ];
  for (const [s, want] of cases) assert.equal(humanAge(s), want, `${s}s`);
});

test('text from cluster objects cannot drive the terminal: control characters escaped, only our colours pass', () => {
  const hostile = 'x\u001b]0;owned\u0007\u001b[2J\u009bycleared';
  const out = new Sink(true);
  const err = new Sink(true);
  const output = new Output('table', out, err, {});
  output.table(['name', 'reason'], [['c1', `${hostile}\nPASS hub   forged line`]]);
  output.line(`${output.paint('red', 'FAIL')} ${hostile}`);
  output.note(hostile);
  const written = out.text + err.text;
  assert.doesNotMatch(
    written,
    // biome-ignore lint/suspicious/noControlCharactersInRegex: these sequences are what must not get through
    /\u001b\]|\u0007|\u001b\[2J|\u009b/,
    'no sequence of the object reaches the terminal',
  );
  assert.match(written, /x\\x1b\]0;owned\\x07\\x1b\[2J\\x9bycleared/);
  assert.match(written, /\\nPASS hub {3}forged line/, 'a newline in a cell is shown, not obeyed');
  assert.ok(written.includes('\u001b[31mFAIL\u001b[39m'), "paint()'s own colour passes");
  assert.equal(printable('a\tb\nc'), 'a\tb\nc');
  assert.equal(oneLine('a\nb'), 'a\\nb');
});

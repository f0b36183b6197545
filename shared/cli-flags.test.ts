import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import {
  bool,
  containerEnv,
  expandContainerEnv,
  flagHelpLines,
  integer,
  logLevel,
  OptionsError,
  parseFlags,
  renderFlags,
  unknownFlag,
} from './cli-flags.ts';

const flags = {
  verbose: { type: 'string', default: 'false', help: 'a true/false flag' },
  name: { type: 'string', default: '', help: 'no default shown' },
  port: { type: 'string', default: '80', help: 'a number' },
  help: { type: 'boolean', default: false, help: 'show this help' },
} as const;

describe('parseFlags', () => {
  test('fills in defaults', () => {
    assert.deepEqual({ ...parseFlags(flags, []) }, { verbose: 'false', name: '', port: '80', help: false });
  });

  test('a true/false flag alone means true, as with pflag; a separate value still counts', () => {
    assert.equal(parseFlags(flags, ['--verbose']).verbose, 'true');
    assert.equal(parseFlags(flags, ['--verbose', 'false']).verbose, 'false');
    assert.equal(parseFlags(flags, ['--verbose', '--port=1']).verbose, 'true');
    // Only true/false flags: a string flag alone still needs its value.
    assert.throws(() => parseFlags(flags, ['--name']), OptionsError);
  });

  test('unknown flags and positionals point to --help', () => {
    assert.throws(
      () => parseFlags(flags, ['--nope']),
      (e: Error) => e instanceof OptionsError && /--help/.test(e.message),
    );
    assert.throws(() => parseFlags(flags, ['extra']), /--help/);
  });
});

describe('renderFlags', () => {
  test("one --name=value per flag, in the values' order; undefined ones left out", () => {
    assert.deepEqual(renderFlags(flags, { port: 8080, name: 'a b', verbose: undefined }), [
      '--port=8080',
      '--name=a b',
    ]);
  });

  test('true/false flags take booleans; a boolean flag is bare when true, absent when false', () => {
    assert.deepEqual(renderFlags(flags, { verbose: false }), ['--verbose=false']);
    assert.deepEqual(renderFlags(flags, { verbose: 'true' }), ['--verbose=true']);
    const withSwitch = { ...flags, dry: { type: 'boolean', default: false, help: 'a switch' } } as const;
    assert.deepEqual(renderFlags(withSwitch, { dry: true }), ['--dry']);
    assert.deepEqual(renderFlags(withSwitch, { dry: false }), []);
  });

  test('what it renders, the same table parses back', () => {
    const args = renderFlags(flags, { verbose: true, name: '--not-a-flag', port: 0 });
    assert.deepEqual(
      { ...parseFlags(flags, args) },
      {
        verbose: 'true',
        name: '--not-a-flag',
        port: '0',
        help: false,
      },
    );
  });

  test('a flag the table lacks does not compile, and throws if it gets through', () => {
    // @ts-expect-error: misspelt.
    assert.throws(() => renderFlags(flags, { prot: 1 }), /--prot is not a flag/);
    // @ts-expect-error: --help is not for another program to set.
    assert.throws(() => renderFlags(flags, { help: true }), /--help is not a flag/);
    // @ts-expect-error: a true/false flag takes no other word.
    renderFlags(flags, { verbose: 'yes' });
  });

  test('$(VAR) is written as it is, for the kubelet to expand from the container env', () => {
    const args = renderFlags(flags, { name: `${containerEnv('POD_IP')}:9444` });
    assert.deepEqual(args, ['--name=$(POD_IP):9444']);
    assert.deepEqual(expandContainerEnv([...args, '--x=$$(POD_IP) $(UNSET)'], { POD_IP: '10.0.0.1' }), [
      '--name=10.0.0.1:9444',
      '--x=$(POD_IP) $(UNSET)',
    ]);
  });
});

describe('unknownFlag', () => {
  test('names the first flag the table lacks, with the closest known one when it looks like a typo', () => {
    assert.deepEqual(unknownFlag(flags, ['--port=1', '--verbsoe']), {
      flag: '--verbsoe',
      suggestion: '--verbose',
    });
    assert.deepEqual(unknownFlag(flags, ['--prot=1']), { flag: '--prot', suggestion: '--port' });
    assert.deepEqual(unknownFlag(flags, ['--listen-address=x']), { flag: '--listen-address' });
    assert.deepEqual(unknownFlag(flags, ['-p']), { flag: '-p' }, 'no short flags');
  });

  test('known flags pass, with the value of a string flag given apart', () => {
    assert.equal(unknownFlag(flags, ['--name', '--nope', '--verbose', '--port=1']), undefined);
    assert.equal(unknownFlag(flags, []), undefined);
  });
});

test('parseFlags ends its message with the hint given', () => {
  assert.throws(
    () => parseFlags(flags, ['--name'], '(see the other program)'),
    (e: Error) => /argument missing\n\(see the other program\)$/.test(e.message),
  );
});

test('help lines align at the given column and show non-empty string defaults', () => {
  assert.deepEqual(flagHelpLines(flags, 14), [
    '  --verbose   a true/false flag (default false)',
    '  --name      no default shown',
    '  --port      a number (default 80)',
    '  --help      show this help',
  ]);
});

test('values are checked with a message that names the flag', () => {
  assert.equal(bool('x', ''), true);
  assert.equal(bool('x', 'false'), false);
  assert.throws(
    () => bool('--feature-gates Gate', 'yes'),
    /--feature-gates Gate: "yes" is not true or false/,
  );
  assert.equal(integer('port', '0', 0, 10), 0);
  assert.throws(() => integer('port', '', 0, 10), /--port: "" is not a whole number between 0 and 10/);
  assert.throws(() => integer('port', ' ', 0, 10), OptionsError);
  assert.throws(() => integer('port', '1.5', 0, 10), OptionsError);
  assert.throws(() => integer('port', '11', 0, 10), OptionsError);
  assert.equal(logLevel('debug'), 'debug');
  assert.throws(
    () => logLevel('loud'),
    /--log-level: "loud" is not one of trace, debug, info, warn, error, fatal/,
  );
});

describe('optionsOrExit', () => {
  const run = (body: string) =>
    spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { optionsOrExit, OptionsError } from ${JSON.stringify(new URL('./cli-flags.ts', import.meta.url).href)};\n${body}`,
      ],
      { encoding: 'utf8' },
    );

  test('--help prints the help and exits 0', () => {
    const r = run(`optionsOrExit(() => 'help', () => 'the help');`);
    assert.equal(r.status, 0);
    assert.equal(r.stdout, 'the help\n');
  });

  test('bad input prints its message and exits 2', () => {
    const r = run(`optionsOrExit(() => { throw new OptionsError('--port: bad'); }, () => '');`);
    assert.equal(r.status, 2);
    assert.equal(r.stderr, 'error: --port: bad\n');
  });

  test('good input is returned', () => {
    const r = run(`console.log(optionsOrExit(() => 42, () => ''));`);
    assert.equal(r.status, 0);
    assert.equal(r.stdout, '42\n');
  });
});

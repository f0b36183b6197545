import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { createLogger } from './log.ts';

/** pino's line for the same calls, written to a string (pino is a dependency of the gateway). */
function pinoLines(level: string, run: (log: pino.Logger) => void): string[] {
  const lines: string[] = [];
  const log = pino(
    { level, base: { component: 'c', cluster: 'x' }, timestamp: () => ',"time":1' },
    { write: (line: string) => lines.push(line) },
  );
  run(log);
  return lines;
}

test("writes pino's JSON lines: level number, time, base, child bindings, fields, msg", () => {
  const lines: string[] = [];
  const log = createLogger({
    level: 'info',
    base: { component: 'c', cluster: 'x' },
    write: (l) => lines.push(l),
    now: () => 1,
  });
  const calls = (l: Pick<pino.Logger, 'info' | 'warn' | 'debug' | 'fatal' | 'child'>) => {
    l.info({}, 'started');
    l.child({ loop: 'tunnel' }).warn({ err: 'connect "refused"', retryInMs: 5 }, 'cannot attach');
    l.debug({ hidden: true }, 'below the level');
    l.child({})
      .child({ a: 1 })
      .fatal({ o: { n: null }, u: undefined }, 'line\nbreak');
  };
  calls(log as unknown as pino.Logger);
  assert.deepEqual(lines, pinoLines('info', calls));
  assert.equal(lines.length, 3);
});

test('levels: debug shows debug, error hides warn, an unknown level is info', () => {
  const seen = (level: string) => {
    const lines: string[] = [];
    const log = createLogger({ level, base: {}, write: (l) => lines.push(l), now: () => 1 });
    log.trace({}, 't');
    log.debug({}, 'd');
    log.info({}, 'i');
    log.warn({}, 'w');
    log.error({}, 'e');
    return lines.map((l) => (JSON.parse(l) as { msg: string }).msg).join('');
  };
  assert.equal(seen('trace'), 'tdiwe');
  assert.equal(seen('debug'), 'diwe');
  assert.equal(seen('error'), 'e');
  assert.equal(seen('nonsense'), 'iwe');
});

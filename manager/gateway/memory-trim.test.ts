import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { type MemorySample, MemoryTrimmer, takeCollector } from './memory-trim.ts';

const mib = 1024 * 1024;

/** A process whose RSS the test sets; a collection gives back `freedByCollection` of it. */
function fakeProcess(freedByCollection: number) {
  const state = { rss: 100 * mib, heapTotal: 20 * mib, external: 10 * mib, now: 0, collections: 0 };
  return {
    state,
    sample: (): MemorySample => ({ rss: state.rss, heapTotal: state.heapTotal, external: state.external }),
    collect: () => {
      state.collections++;
      state.rss -= freedByCollection;
    },
    now: () => state.now,
  };
}

/** A trimmer over a fake process, after its first look (which only sets the baseline). */
function lookedOnce(freedByCollection: number) {
  const p = fakeProcess(freedByCollection);
  const trimmer = new MemoryTrimmer({
    collect: p.collect,
    sample: p.sample,
    now: p.now,
    thresholdBytes: 32 * mib,
    minGapMs: 60_000,
    maxGapMs: 240_000,
  });
  assert.equal(trimmer.check(), undefined, 'the first look only sets the baseline');
  return { p, trimmer };
}

test('memory V8 does not count that grew past the threshold is trimmed once, then not before the gap', () => {
  const { p, trimmer } = lookedOnce(40 * mib);
  p.state.rss += 20 * mib;
  assert.equal(trimmer.check(), undefined, 'under the threshold');
  p.state.rss += 20 * mib;
  const trim = trimmer.check();
  assert.ok(trim);
  assert.equal(trim.rssBefore - trim.rssAfter, 40 * mib);
  assert.equal(trim.nextGapMs, 60_000);
  assert.equal(p.state.collections, 1);

  p.state.rss += 50 * mib;
  p.state.now = 59_000;
  assert.equal(trimmer.check(), undefined, 'within the gap');
  p.state.now = 60_000;
  assert.ok(trimmer.check());
  assert.equal(p.state.collections, 2);
});

test('growth of the V8 heap or of external memory is not what the trimmer acts on', () => {
  const { p, trimmer } = lookedOnce(40 * mib);
  p.state.rss += 60 * mib;
  p.state.heapTotal += 40 * mib;
  p.state.external += 20 * mib;
  assert.equal(trimmer.check(), undefined);
  assert.equal(p.state.collections, 0);
});

test('a collection that frees little doubles the wait, up to the cap; one that frees again resets it', () => {
  const { p, trimmer } = lookedOnce(1 * mib);
  p.state.rss += 40 * mib;
  const gaps: number[] = [];
  for (let i = 0; i < 4; i++) {
    const trim = trimmer.check();
    assert.ok(trim, `collection ${i + 1}`);
    gaps.push(trim.nextGapMs);
    p.state.now += trim.nextGapMs;
  }
  assert.deepEqual(gaps, [120_000, 240_000, 240_000, 240_000]);

  const freeing = lookedOnce(40 * mib);
  freeing.p.state.rss += 40 * mib;
  assert.equal(freeing.trimmer.check()?.nextGapMs, 60_000);
});

test('without a collection (node without --expose-gc) the trimmer does nothing', () => {
  const p = fakeProcess(40 * mib);
  const trimmer = new MemoryTrimmer({ collect: undefined, sample: p.sample, now: p.now });
  assert.equal(trimmer.enabled, false);
  p.state.rss += 500 * mib;
  assert.equal(trimmer.check(), undefined);
  trimmer.start();
  trimmer.stop();
});

test('takeCollector takes gc off the global object and calls it as a last-resort major collection', () => {
  const calls: unknown[] = [];
  const global: { gc?: unknown } = { gc: (options: unknown) => calls.push(options) };
  const collect = takeCollector(global);
  assert.ok(collect);
  assert.equal(global.gc, undefined);
  collect();
  assert.deepEqual(calls, [{ type: 'major', execution: 'sync', flavor: 'last-resort' }]);
  assert.equal(takeCollector({}), undefined);
});

test('with --expose-gc, the collection taken off the real global object runs', () => {
  const child = spawnSync(
    process.execPath,
    [
      '--expose-gc',
      '--input-type=module',
      '-e',
      `import { takeCollector } from ${JSON.stringify(new URL('./memory-trim.ts', import.meta.url).href)};
       const collect = takeCollector();
       collect();
       console.log(typeof collect, typeof globalThis.gc);`,
    ],
    { encoding: 'utf8' },
  );
  assert.equal(child.stderr, '');
  assert.equal(child.stdout.trim(), 'function undefined');
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compilePattern } from './patterns.ts';

function compiled(pattern: string): RegExp {
  const re = compilePattern(pattern);
  if (typeof re === 'string') throw new Error(`${pattern}: ${re}`);
  return re;
}

test('patterns are unanchored, as Go regexp.Match: the seed example ext-* matches names containing "ext"', () => {
  assert.ok(compiled('ext-*').test('ext-alice'));
  assert.ok(compiled('ext-*').test('my-ext'));
  assert.ok(!compiled('ext-*').test('alice'));
  assert.ok(compiled('test-.*').test('test-1234'));
  assert.ok(compiled('cluster-\\d+').test('cluster-1'));
  assert.ok(!compiled('^cluster-\\d+$').test('cluster-1a'));
  assert.ok(compiled('test-group:.+').test('test-group:2'));
});

test('RE2 spellings JavaScript lacks are translated', () => {
  assert.ok(compiled('(?i)^ADMIN$').test('admin'));
  assert.ok(compiled('(?P<team>dev|ops)-\\d').test('ops-1'));
  assert.ok(compiled('\\Auser\\z').test('user'));
  assert.ok(!compiled('\\Auser\\z').test('user2'));
  assert.ok(compiled('a\\.b').test('a.b'));
  assert.ok(!compiled('a\\.b').test('axb'));
});

test('what RE2 refuses is refused with a reason, never compiled into something else', () => {
  for (const [pattern, reason] of [
    ['ext-(', /not a valid regular expression/],
    ['a(?=b)', /lookaround/],
    ['(?<!a)b', /lookaround/],
    ['(a)\\1', /backreferences/],
    ['(?U)a+', /ungreedy/],
    ['(?x)a', /unknown flag "x"/],
    ['a'.repeat(2000), /longer than 1024/],
  ] as const) {
    const result = compilePattern(pattern);
    assert.equal(typeof result, 'string', pattern);
    assert.match(result as string, reason, pattern);
  }
});

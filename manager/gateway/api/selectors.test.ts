import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StatusError } from '../../../shared/kube/status.ts';
import { parseFieldSelector, parseLabelSelector } from './selectors.ts';

const labels = { env: 'prod', tier: 'web', 'example.com/zone': 'a', replicas: '3', empty: '' };

function badRequest(fn: () => unknown, message: RegExp) {
  assert.throws(
    fn,
    (err: unknown) => err instanceof StatusError && err.code === 400 && message.test(err.message),
  );
}

test('label selector operators match like Kubernetes', () => {
  const cases: [string, boolean][] = [
    ['', true],
    ['env', true],
    ['!env', false],
    ['!missing', true],
    ['env=prod', true],
    ['env==prod', true],
    ['env!=prod', false],
    ['missing!=x', true], // != matches an absent label
    ['env in (prod, staging)', true],
    ['env in (staging)', false],
    ['env notin (staging)', true],
    ['missing notin (a)', true],
    ['missing in (a)', false],
    ['example.com/zone=a', true],
    ['replicas>2', true],
    ['replicas<3', false],
    ['env>1', false],
    ['empty=', true],
    ['empty in (a,)', true],
    ['env=prod,tier=web', true],
    ['env=prod, tier=db', false],
    ['  env = prod , !missing  ', true],
  ];
  for (const [selector, expected] of cases) {
    assert.equal(parseLabelSelector(selector).matches(labels), expected, selector);
  }
  assert.equal(parseLabelSelector(null).requirements.length, 0);
  assert.deepEqual(parseLabelSelector('a in (x,y)').requirements, [
    { key: 'a', operator: 'in', values: ['x', 'y'] },
  ]);
});

test('bad label selectors are 400s that say what is wrong', () => {
  badRequest(() => parseLabelSelector('env in prod'), /expected "\(" after in/);
  badRequest(() => parseLabelSelector('env in ()'), /needs at least one value/);
  badRequest(() => parseLabelSelector('env in (a'), /missing "\)"/);
  badRequest(() => parseLabelSelector('env in (a b)'), /unexpected "b"/);
  badRequest(() => parseLabelSelector('env=prod,'), /trailing ","/);
  badRequest(() => parseLabelSelector('=prod'), /expected a label key/);
  badRequest(() => parseLabelSelector('env prod'), /expected an operator after key "env"/);
  badRequest(() => parseLabelSelector('env=a=b'), /expected "," between requirements/);
  badRequest(() => parseLabelSelector('!env=x'), /takes no operator/);
  badRequest(() => parseLabelSelector('replicas>two'), /integer/);
  badRequest(() => parseLabelSelector('Bad_Prefix/x=1'), /DNS subdomain/);
  badRequest(() => parseLabelSelector(`k=${'v'.repeat(64)}`), /63 characters/);
  badRequest(() => parseLabelSelector('-env'), /name must be 63 characters or less/);
});

test('field selectors: metadata.name with =, == and !=, escapes, unsupported fields', () => {
  const fields = { 'metadata.name': 'prod' };
  assert.equal(parseFieldSelector('metadata.name=prod').matches(fields), true);
  assert.equal(parseFieldSelector('metadata.name==prod').matches(fields), true);
  assert.equal(parseFieldSelector('metadata.name!=prod').matches(fields), false);
  assert.equal(parseFieldSelector('metadata.name!=dev,metadata.name=prod').matches(fields), true);
  assert.equal(parseFieldSelector('').matches(fields), true);
  assert.equal(parseFieldSelector(undefined).terms.length, 0);
  assert.equal(parseFieldSelector('metadata.name=a\\,b').matches({ 'metadata.name': 'a,b' }), true);
  badRequest(() => parseFieldSelector('spec.provider=x'), /^field label not supported: spec.provider$/);
  badRequest(() => parseFieldSelector('metadata.name'), /has no operator/);
  badRequest(() => parseFieldSelector('metadata.name=a,,'), /empty term/);
});

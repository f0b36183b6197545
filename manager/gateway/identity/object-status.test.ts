import assert from 'node:assert/strict';
import { test } from 'node:test';
import { desiredStatus, validCondition } from './object-status.ts';

const now = new Date('2026-03-04T05:06:07.123Z');
const later = new Date('2026-03-04T06:00:00.000Z');

test('a valid generation: Valid=True, appliedGeneration = that generation', () => {
  const status = desiredStatus(undefined, { generation: 2, rules: 3, appliedGeneration: 2 }, now);
  assert.deepEqual(status, {
    observedGeneration: 2,
    appliedGeneration: 2,
    conditions: [
      {
        type: 'Valid',
        status: 'True',
        reason: 'Valid',
        message: 'generation 2 is valid (3 rules) and in force',
        observedGeneration: 2,
        lastTransitionTime: '2026-03-04T05:06:07Z',
      },
    ],
  });
  // Written once: the same verdict against what was written needs no write.
  assert.equal(desiredStatus(status, { generation: 2, rules: 3, appliedGeneration: 2 }, later), undefined);
});

test('an invalid generation names the problems and the generation that stays in force', () => {
  const before = desiredStatus(undefined, { generation: 2, rules: 1, appliedGeneration: 2 }, now)!;
  const after = desiredStatus(
    before,
    {
      generation: 3,
      problems: 'spec.clientIdentityExchanger.rules[0].source.userPattern: bad',
      appliedGeneration: 2,
    },
    later,
  )!;
  const valid = after.conditions!.find((c) => c.type === 'Valid')!;
  assert.equal(valid.status, 'False');
  assert.equal(valid.reason, 'InvalidSpec');
  assert.match(
    valid.message,
    /generation 3 is invalid and was not applied: spec\.clientIdentityExchanger\.rules\[0\]\.source\.userPattern: bad; generation 2 stays in force/,
  );
  assert.equal(valid.lastTransitionTime, '2026-03-04T06:00:00Z');
  assert.equal(after.appliedGeneration, 2);
  assert.equal(after.observedGeneration, 3);
});

test('never valid: the message says requests are refused, and appliedGeneration is removed', () => {
  const status = desiredStatus(
    { appliedGeneration: 5, observedGeneration: 5, conditions: [] },
    { generation: 6, problems: 'x: y' },
    now,
  )!;
  assert.equal(status.appliedGeneration, null);
  assert.match(validCondition({ generation: 6, problems: 'x: y' }).message, /refused until it is fixed/);
});

test("other writers' conditions are kept, and lastTransitionTime only moves when the status flips", () => {
  const first = desiredStatus(
    {
      conditions: [
        {
          type: 'Reviewed',
          status: 'True',
          reason: 'ByHand',
          message: '',
          lastTransitionTime: '2020-01-01T00:00:00Z',
        },
      ],
    },
    { generation: 1, rules: 0, appliedGeneration: 1 },
    now,
  )!;
  assert.deepEqual(
    first.conditions!.map((c) => c.type),
    ['Reviewed', 'Valid'],
  );
  const second = desiredStatus(first, { generation: 2, rules: 4, appliedGeneration: 2 }, later)!;
  assert.equal(
    second.conditions!.find((c) => c.type === 'Valid')!.lastTransitionTime,
    '2026-03-04T05:06:07Z',
  );
});

test('a huge problem list is cut so the API accepts the condition', () => {
  const message = validCondition({ generation: 1, problems: 'p'.repeat(50_000) }).message;
  assert.ok(message.length < 5000);
});

import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { Reads, type Requester, readPath } from './reads.ts';

function fakeSend(code: number, body: string, headers: Record<string, string> = {}): Requester {
  return {
    send: async () => {
      const res = Object.assign(new PassThrough(), {
        statusCode: code,
        headers: { 'content-type': 'application/json', ...headers },
      });
      res.end(body);
      return res as never;
    },
  };
}

test('found with the hub clock from the Date header; 404 missing; 403 forbidden with the permission', async () => {
  const ok = await readPath(
    fakeSend(200, '{"a":1}', { date: 'Sat, 05 Dec 2026 12:00:00 GMT' }),
    '/x',
    'get x',
  );
  assert.deepEqual(ok, {
    state: 'found',
    value: { a: 1 },
    hubTime: Date.parse('2026-12-05T12:00:00Z') + 500,
  });
  assert.equal((await readPath(fakeSend(404, '{}'), '/x', 'get x')).state, 'missing');
  const forbidden = await readPath(
    fakeSend(403, '{"kind":"Status","code":403,"message":"nope"}'),
    '/x',
    'get x',
  );
  assert.deepEqual(
    [forbidden.state, forbidden.state === 'forbidden' && forbidden.permission],
    ['forbidden', 'get x'],
  );
  const unavailable = await readPath(
    fakeSend(503, '{"kind":"Status","code":503,"message":"x509: bad"}'),
    '/x',
    'get x',
  );
  assert.equal(unavailable.state === 'error' && unavailable.connection, false);
});

test('a connection failure is an error marked as such; reads of one path are shared', async () => {
  const refused = await readPath(
    {
      send: () => Promise.reject(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })),
    },
    '/x',
    'p',
  );
  assert.equal(refused.state === 'error' && refused.connection, true);
  let calls = 0;
  const counting: Requester = {
    send: (...args) => {
      calls++;
      return fakeSend(200, '{}').send(...args);
    },
  };
  const reads = new Reads(counting);
  await Promise.all([reads.get('/a', 'p'), reads.get('/a', 'p'), reads.get('/b', 'p')]);
  assert.equal(calls, 2);
});

import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { test } from 'node:test';
import type { HistoryAnswer } from '../clusters/cluster.ts';
import type { StreamResponse } from './response.ts';
import { FakeDirectory, target, token } from './test-fixtures.ts';
import { serveWatch } from './watch.ts';

// A real http.ServerResponse must satisfy StreamResponse (checked by tsc).
export const serverResponseFits = (res: ServerResponse): StreamResponse => res;

/** Records what a watch writes; `close()` plays the client going away. */
class FakeResponse implements StreamResponse {
  status = 0;
  headers: Record<string, string> = {};
  chunks: string[] = [];
  ended = false;
  writableLength = 0;
  #close = new Set<() => void>();

  writeHead(status: number, headers: Record<string, string>) {
    this.status = status;
    this.headers = headers;
  }
  write(chunk: string) {
    this.chunks.push(chunk);
    return true;
  }
  end(chunk?: string) {
    if (chunk) this.chunks.push(chunk);
    this.ended = true;
  }
  flushHeaders() {}
  once(_event: 'close', listener: () => void) {
    this.#close.add(listener);
  }
  off(_event: 'close', listener: () => void) {
    this.#close.delete(listener);
  }
  close() {
    for (const listener of [...this.#close]) listener();
  }
  get events(): {
    type: string;
    object: {
      metadata?: { name?: string; resourceVersion?: string; annotations?: object };
      [k: string]: unknown;
    };
  }[] {
    return this.chunks
      .join('')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line));
  }
}

const summary = (res: FakeResponse) =>
  res.events.map((e) =>
    `${e.type} ${e.object.metadata?.name ?? (e.object as { rows?: { cells: string[] }[] }).rows?.[0]?.cells[0] ?? ''}`.trim(),
  );

const q = (params: Record<string, string>) => new URLSearchParams({ watch: 'true', ...params });

test('rv "" sends the current state as ADDED, then changes, until the client leaves', async () => {
  const dir = new FakeDirectory([target('a'), target('b')]);
  const res = new FakeResponse();
  const done = serveWatch(dir, res, { query: q({}) });
  assert.equal(res.status, 200);
  assert.equal(res.headers['content-type'], 'application/json');
  dir.emit('MODIFIED', target('a', { resourceVersion: '101', health: { healthy: false } }));
  dir.emit('DELETED', target('b', { resourceVersion: '102' }));
  dir.emit('ADDED', target('c', { resourceVersion: '103' }));
  res.close();
  await done;
  assert.equal(res.ended, true);
  assert.deepEqual(summary(res), ['ADDED a', 'ADDED b', 'MODIFIED a', 'DELETED b', 'ADDED c']);
  assert.equal(dir.listeners.size, 0, 'unsubscribed');
  assert.ok(!res.chunks.join('').includes(token));
});

test('selectors turn objects that stop or start matching into DELETED and ADDED', async () => {
  const dir = new FakeDirectory([
    target('a', { labels: { env: 'prod' } }),
    target('b', { labels: { env: 'dev' } }),
  ]);
  const res = new FakeResponse();
  const done = serveWatch(dir, res, { query: q({ labelSelector: 'env=prod', resourceVersion: '0' }) });
  dir.emit('MODIFIED', target('a', { labels: { env: 'dev' }, resourceVersion: '101' }));
  dir.emit('MODIFIED', target('b', { labels: { env: 'prod' }, resourceVersion: '102' }));
  dir.emit('MODIFIED', target('b', { labels: { env: 'prod' }, resourceVersion: '103' }));
  dir.emit('DELETED', target('a', { resourceVersion: '104' }));
  res.close();
  await done;
  assert.deepEqual(summary(res), ['ADDED a', 'DELETED a', 'ADDED b', 'MODIFIED b']);
});

test('a list resourceVersion resumes from history; an unknown one gets 410 Expired', async () => {
  const dir = Object.assign(new FakeDirectory([target('a', { resourceVersion: '105' })]), {
    eventsSince: (rv: string): HistoryAnswer =>
      rv === '100'
        ? {
            kind: 'events',
            events: [
              { type: 'DELETED', cluster: target('gone', { resourceVersion: '104' }) },
              { type: 'MODIFIED', cluster: target('a', { resourceVersion: '105' }) },
            ],
          }
        : { kind: 'expired' },
    waitForVersion: async () => false,
  });
  const resumed = new FakeResponse();
  const done = serveWatch(dir, resumed, { query: q({ resourceVersion: '100' }) });
  resumed.close();
  await done;
  assert.deepEqual(summary(resumed), ['DELETED gone', 'MODIFIED a']);

  const expired = new FakeResponse();
  await serveWatch(dir, expired, { query: q({ resourceVersion: '1' }) });
  assert.equal(expired.status, 200);
  assert.equal(expired.ended, true);
  const [event] = expired.events;
  assert.equal(event?.type, 'ERROR');
  assert.equal((event?.object as { code?: number } | undefined)?.code, 410);
  assert.equal((event?.object as { reason?: string } | undefined)?.reason, 'Expired');
});

test('a version this replica has not applied yet is waited for, then served; never reached, a 504 the client retries', async () => {
  let reached = true;
  const waited: number[] = [];
  const dir = Object.assign(new FakeDirectory([target('a')]), {
    eventsSince: (): HistoryAnswer => ({ kind: 'events', events: [] }),
    waitForVersion: async (version: number) => {
      waited.push(version);
      if (reached) dir.version = String(version);
      return reached;
    },
  });
  const later = new FakeResponse();
  const done = serveWatch(dir, later, { query: q({ resourceVersion: '150' }) });
  await new Promise((resolve) => setImmediate(resolve));
  dir.emit('MODIFIED', target('a', { resourceVersion: '151' }));
  later.close();
  await done;
  assert.deepEqual(waited, [150]);
  assert.equal(later.status, 200);
  assert.deepEqual(summary(later), ['MODIFIED a']);

  reached = false;
  const tooFar = new FakeResponse();
  await serveWatch(dir, tooFar, { query: q({ resourceVersion: '999' }) });
  assert.equal(tooFar.status, 504);
  const status = JSON.parse(tooFar.chunks.join(''));
  assert.equal(status.reason, 'Timeout');
  assert.match(status.message, /^Too large resource version: 999, current: 151$/);
  assert.equal(status.details.causes[0].reason, 'ResourceVersionTooLarge');
  assert.equal(status.details.retryAfterSeconds, 1);

  const notANumber = new FakeResponse();
  await serveWatch(dir, notANumber, { query: q({ resourceVersion: 'abc' }) });
  assert.equal(notANumber.status, 400);
});

test("watch options are checked as the apiserver's ValidateListOptions does (422 ListOptions)", async () => {
  const dir = new FakeDirectory([]);
  const cases: Array<[Record<string, string>, RegExp]> = [
    [
      { sendInitialEvents: 'true' },
      /sendInitialEvents requires setting resourceVersionMatch to NotOlderThan/,
    ],
    [
      { resourceVersionMatch: 'NotOlderThan' },
      /resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided/,
    ],
    [
      { sendInitialEvents: 'true', resourceVersionMatch: 'Exact' },
      /resourceVersionMatch: Unsupported value: "Exact": supported values: "NotOlderThan"/,
    ],
  ];
  for (const [params, message] of cases) {
    const res = new FakeResponse();
    await serveWatch(dir, res, { query: q(params) });
    assert.equal(res.status, 422, JSON.stringify(params));
    const status = JSON.parse(res.chunks.join(''));
    assert.equal(status.reason, 'Invalid');
    assert.match(status.message, /^ListOptions\.meta\.k8s\.io "" is invalid: /);
    assert.match(status.message, message);
  }
});

test('internal events (a route or credential of this replica, same version) never reach watchers', async () => {
  const dir = new FakeDirectory([target('a')]);
  const res = new FakeResponse();
  const done = serveWatch(dir, res, { query: q({}) });
  for (const listener of dir.listeners) listener({ type: 'MODIFIED', cluster: target('a'), internal: true });
  dir.emit('MODIFIED', target('a', { resourceVersion: '101' }));
  res.close();
  await done;
  assert.deepEqual(summary(res), ['ADDED a', 'MODIFIED a']);
});

test('without history, only the current version can be resumed', async () => {
  const dir = new FakeDirectory([target('a')]);
  const current = new FakeResponse();
  const done = serveWatch(dir, current, { query: q({ resourceVersion: '100' }) });
  dir.emit('MODIFIED', target('a', { resourceVersion: '101' }));
  current.close();
  await done;
  assert.deepEqual(summary(current), ['MODIFIED a']);
});

test('sendInitialEvents ends the initial state with an annotated bookmark; bookmarks repeat', async () => {
  const dir = new FakeDirectory([target('a')]);
  const res = new FakeResponse();
  const done = serveWatch(dir, res, {
    query: q({
      sendInitialEvents: 'true',
      allowWatchBookmarks: 'true',
      resourceVersionMatch: 'NotOlderThan',
    }),
    bookmarkIntervalMs: 5,
  });
  await new Promise((resolve) => setTimeout(resolve, 30));
  res.close();
  await done;
  const [added, endOfInitial, periodic] = res.events;
  assert.equal(added?.type, 'ADDED');
  assert.equal(endOfInitial?.type, 'BOOKMARK');
  assert.deepEqual(endOfInitial?.object, {
    kind: 'ClusterGateway',
    apiVersion: 'cluster.core.oam.dev/v1alpha1',
    metadata: { resourceVersion: '100', annotations: { 'k8s.io/initial-events-end': 'true' } },
  });
  assert.equal(periodic?.type, 'BOOKMARK');
  assert.equal(periodic?.object.metadata?.annotations, undefined);
});

test('Table watches (kubectl get -w): column definitions only on the first event', async () => {
  const dir = new FakeDirectory([target('a'), target('b')]);
  const res = new FakeResponse();
  const done = serveWatch(dir, res, {
    query: q({ allowWatchBookmarks: 'true' }),
    accept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json',
    bookmarkIntervalMs: 1,
  });
  dir.emit('MODIFIED', target('a', { resourceVersion: '101' }));
  await new Promise((resolve) => setTimeout(resolve, 10));
  res.close();
  await done;
  const events = res.events;
  assert.deepEqual(summary(res), ['ADDED a', 'ADDED b', 'MODIFIED a'], 'no bookmarks for Tables');
  assert.equal(events[0]?.object.kind, 'Table');
  assert.ok(Array.isArray(events[0]?.object.columnDefinitions));
  assert.equal(events[1]?.object.columnDefinitions, null);
  assert.equal(events[2]?.object.columnDefinitions, null);
});

test('timeoutSeconds ends the watch; bad requests and unsynced directories get a Status', async () => {
  const dir = new FakeDirectory([]);
  const res = new FakeResponse();
  await serveWatch(dir, res, { query: q({ timeoutSeconds: '0' }) });
  assert.equal(res.ended, true);
  assert.equal(dir.listeners.size, 0);

  const bad = new FakeResponse();
  await serveWatch(dir, bad, { query: q({ labelSelector: '!' }) });
  assert.equal(bad.status, 400);
  assert.equal(JSON.parse(bad.chunks.join('')).kind, 'Status');

  dir.synced = false;
  const early = new FakeResponse();
  await serveWatch(dir, early, { query: q({}) });
  assert.equal(early.status, 503);

  const aborted = new FakeResponse();
  const controller = new AbortController();
  dir.synced = true;
  const running = serveWatch(dir, aborted, { query: q({}), signal: controller.signal });
  controller.abort();
  await running;
  assert.equal(aborted.ended, true);
});

test('a client that stops reading is cut off', async () => {
  const dir = new FakeDirectory([target('a')]);
  const res = new FakeResponse();
  res.writableLength = 10;
  await serveWatch(dir, res, { query: q({}), maxBufferedBytes: 5 });
  assert.equal(res.ended, true);
  assert.equal(dir.listeners.size, 0);
});

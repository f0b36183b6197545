import assert from 'node:assert/strict';
import { once } from 'node:events';
import http, { type ServerResponse } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { PROXY_PREFIX, type ProxyFixture, proxyTo, startUpstream, type TestServer } from './test-kit.ts';

/** A controllable watch on the upstream: the test decides when each event is sent. */
interface OpenWatch {
  url: string;
  res: ServerResponse;
  closed: Promise<void>;
}

describe('streaming responses', { timeout: 5000 }, () => {
  const watches: OpenWatch[] = [];
  let waiting: ((w: OpenWatch) => void) | undefined;
  let upstream: TestServer;
  let gateway: ProxyFixture;

  const nextWatch = () => new Promise<OpenWatch>((resolve) => (waiting = resolve));

  before(async () => {
    upstream = await startUpstream((req, res) => {
      // Like kube-apiserver: headers go out at once, events whenever they happen
      // (except for the "silent" cluster, which never answers).
      if (!req.url!.includes('silent')) {
        res.writeHead(200, { 'Content-Type': 'application/json;stream=watch' });
        res.flushHeaders();
      }
      const watch: OpenWatch = { url: req.url!, res, closed: once(res, 'close').then(() => {}) };
      watches.push(watch);
      waiting?.(watch);
    });
    gateway = await proxyTo(upstream);
  });

  after(() => gateway.close());

  /** Opens a request through the gateway and yields its response once headers arrive. */
  function open(path: string): { req: http.ClientRequest; response: Promise<http.IncomingMessage> } {
    const req = http.get({
      host: '127.0.0.1',
      port: gateway.front.port,
      path: PROXY_PREFIX + 'c1/proxy' + path,
      agent: false,
    });
    req.on('error', () => {});
    const response = once(req, 'response').then(([res]) => res as http.IncomingMessage);
    response.catch(() => {}); // tests that disconnect early never await it
    return { req, response };
  }

  async function nextChunk(res: http.IncomingMessage): Promise<string> {
    const [chunk] = (await once(res, 'data')) as [Buffer];
    return chunk.toString();
  }

  it('delivers headers and each event as soon as the cluster sends them', async () => {
    const upstreamWatch = nextWatch();
    const { req, response } = open('/api/v1/namespaces/default/pods?watch=true&resourceVersion=10');
    const watch = await upstreamWatch;
    assert.equal(watch.url, '/api/v1/namespaces/default/pods?watch=true&resourceVersion=10');

    // Headers arrive although no event has been sent yet.
    const res = await response;
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'application/json;stream=watch');

    watch.res.write('{"type":"ADDED","object":{"n":1}}\n');
    assert.equal(await nextChunk(res), '{"type":"ADDED","object":{"n":1}}\n');
    // Only now does the cluster send the second event: the first was not held back.
    watch.res.write('{"type":"MODIFIED","object":{"n":2}}\n');
    assert.equal(await nextChunk(res), '{"type":"MODIFIED","object":{"n":2}}\n');

    watch.res.end();
    await once(res, 'end');
    req.destroy();
  });

  it('streams followed logs line by line', async () => {
    const upstreamWatch = nextWatch();
    const { req, response } = open('/api/v1/namespaces/default/pods/p/log?follow=true');
    const log = await upstreamWatch;
    const res = await response;
    for (const line of ['one\n', 'two\n', 'three\n']) {
      log.res.write(line);
      assert.equal(await nextChunk(res), line);
    }
    req.destroy();
    await log.closed;
  });

  it('aborts the upstream request when the caller disconnects', async () => {
    const upstreamWatch = nextWatch();
    const { req, response } = open('/api/v1/pods?watch=1');
    const watch = await upstreamWatch;
    const res = await response;
    watch.res.write('{"type":"ADDED"}\n');
    await nextChunk(res);
    assert.equal(gateway.proxy.stats().inflightRequests, 1);

    const started = Date.now();
    req.destroy();
    await watch.closed;
    assert.ok(Date.now() - started < 1000, 'upstream saw the close within 1 s');
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(gateway.proxy.stats().inflightRequests, 0);
  });

  it('aborts the upstream request when the caller leaves before any response', async () => {
    const upstreamWatch = nextWatch();
    const { req } = open('/api/v1/pods/silent?watch=true&timeoutSeconds=600');
    const watch = await upstreamWatch;
    req.destroy();
    await watch.closed;
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(gateway.proxy.stats().inflightRequests, 0);
  });
});

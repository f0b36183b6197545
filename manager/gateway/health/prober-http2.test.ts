/**
 * A probe of a cluster the proxy talks HTTP/2 to: one more stream on the open session, no
 * connection of its own.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createClusterPools } from '../proxy/cluster-pools.ts';
import { clusterTarget, constEndpoint, startUpstream } from '../proxy/test-kit.ts';
import { HealthProber } from './prober.ts';

test('probes over the HTTP/2 session the proxy holds open', async () => {
  let connections = 0;
  const seen: { path: string; version: string; authorization?: string }[] = [];
  const upstream = await startUpstream((req, res) => {
    seen.push({ path: req.url ?? '', version: req.httpVersion, authorization: req.headers.authorization });
    if (req.url === '/healthz') res.end('ok');
    else res.writeHead(500).end('not ok');
  });
  upstream.server.on('secureConnection', () => connections++);
  const pools = createClusterPools();
  const target = clusterTarget('c1', await constEndpoint(upstream.port));
  const prober = new HealthProber({ list: () => [target], setHealth: () => {}, pools, intervalMs: 60_000 });
  try {
    const sessions = (pools.get(target) as Exclude<ReturnType<typeof pools.get>, string>).http2!;
    // The proxy's traffic opens the session.
    await new Promise<void>((resolve, reject) =>
      sessions.request({ ':method': 'GET', ':path': '/version' }, true, (result) => {
        if (!('stream' in result)) return reject(new Error('no stream'));
        result.stream.resume().once('end', resolve);
      }),
    );
    assert.equal(connections, 1);
    assert.deepEqual(await prober.probe(target), { healthy: true });
    assert.deepEqual(seen.at(-1), {
      path: '/healthz',
      version: '2.0',
      authorization: 'Bearer cluster-token',
    });
    assert.equal(connections, 1, 'the probe opened no connection');
  } finally {
    pools.close();
    await upstream.close();
  }
});

/**
 * Metrics cardinality is not the caller's to choose (issue item 5): 2,000
 * proxied requests to random paths (random resources, groups, verbs through
 * the legacy /proxy/ and /watch/ prefixes, methods) must not add series to
 * the gateway's /metrics, while real traffic keeps its labels.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { environmentState } from './support/environment.ts';
import { rawRequest } from './support/raw-request.ts';
import { proxyPrefix } from './support/users.ts';

const admin = { frontProxy: true, headers: ['X-Remote-User', 'admin', 'X-Remote-Group', 'system:masters'] };

function gatewayUrl(): string {
  const url = environmentState().gateway?.url;
  if (!url) throw new Error('the e2e environment runs no gateway');
  return url;
}

async function proxySeries(): Promise<{ series: string[]; bytes: number }> {
  const res = await rawRequest(gatewayUrl(), 'GET', '/metrics', admin);
  assert.equal(res.status, 200, res.body);
  const series = res.body.split('\n').filter((line) => line.startsWith('ocm_proxy_'));
  return { series, bytes: Buffer.byteLength(res.body) };
}

function randomTarget(i: number): { method: string; path: string } {
  const r = randomBytes(6).toString('hex');
  const methods = ['GET', 'GET', 'HEAD', 'DELETE', 'OPTIONS', 'PATCH'];
  const paths = [
    `/api/v1/${r}`,
    `/api/v1/namespaces/default/${r}/x`,
    `/apis/${r}.example.com/v1/things-${r}`,
    `/apis/apps/v1/namespaces/${r}/deployments-${r}`,
    `/api/v1/watch/namespaces/default/${r}`,
    `/api/v1/proxy/namespaces/default/services/${r}`,
    `/${r}/${r}`,
  ];
  return {
    method: methods[i % methods.length]!,
    path: `${proxyPrefix}/cluster1/proxy${paths[i % paths.length]}`,
  };
}

test('2,000 requests to random paths add no series to /metrics; real traffic keeps its labels', async () => {
  // Warm up every fixed label combination the random requests can produce.
  for (let i = 0; i < 42; i++) {
    const { method, path } = randomTarget(i);
    await rawRequest(gatewayUrl(), method, path, admin);
  }
  const before = await proxySeries();
  const started = Date.now();
  const statuses = new Map<number, number>();
  let next = 0;
  // 16 callers at a time: bounded load on the shared 2-core machine.
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < 2000) {
        const { method, path } = randomTarget(next++);
        const res = await rawRequest(gatewayUrl(), method, path, admin);
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      }
    }),
  );
  const after = await proxySeries();
  const added = after.series.filter(
    (line) => !before.series.some((b) => b.split(' ')[0] === line.split(' ')[0]),
  );
  process.stderr.write(
    `2000 random proxied requests in ${Date.now() - started} ms (statuses ${JSON.stringify(Object.fromEntries(statuses))}); ` +
      `/metrics ${before.bytes} -> ${after.bytes} bytes, ocm_proxy_* series ${before.series.length} -> ${after.series.length}\n`,
  );
  assert.deepEqual(added, [], 'no new series');
  assert.ok(after.bytes - before.bytes < 2048, `/metrics grew by ${after.bytes - before.bytes} bytes`);
  assert.ok(
    !after.series.some((line) => /[0-9a-f]{12}/.test(line.split('}')[0] ?? '')),
    'no random value in any label',
  );

  // Legitimate traffic is still measured with its real resource and verb.
  const pods = await rawRequest(
    gatewayUrl(),
    'GET',
    `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/default/pods`,
    admin,
  );
  assert.equal(pods.status, 200, pods.body);
  const { series } = await proxySeries();
  assert.ok(
    series.some((line) =>
      /^ocm_proxy_proxied_resource_requests_by_resource_total\{resource="pods",verb="list",code="200"\} \d+$/.test(
        line,
      ),
    ),
    'a pods list is counted as resource="pods", verb="list"',
  );
  assert.ok(series.some((line) => line.includes('resource="other"')));
});

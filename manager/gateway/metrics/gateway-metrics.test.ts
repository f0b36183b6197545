import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  enableProcessMetrics,
  metricsText,
  recordHealthProbe,
  recordProxiedRequest,
  setHealthProberSource,
  setUpstreamConnectionsSource,
  trackInflightRequest,
} from './gateway-metrics.ts';

test('proxied requests are exposed under the Go original metric names', async () => {
  recordProxiedRequest({ cluster: 'cluster-1', resource: 'pods', verb: 'list', code: 200, seconds: 0.03 });
  recordProxiedRequest({ cluster: 'cluster-1', resource: 'pods', verb: 'list', code: 200, seconds: 12 });
  const text = await metricsText();
  assert.match(
    text,
    /^ocm_proxy_proxied_resource_requests_by_resource_total\{resource="pods",verb="list",code="200"\} 2$/m,
  );
  assert.match(text, /^ocm_proxy_proxied_requests_by_cluster_total\{cluster="cluster-1",code="200"\} 2$/m);
  const bucket = (le: string) =>
    new RegExp(
      `^ocm_proxy_proxied_request_duration_seconds_bucket\\{le="${le}",resource="pods",verb="list",cluster="cluster-1",code="200"\\} (\\d+)$`,
      'm',
    );
  assert.equal(text.match(bucket('0.005'))?.[1], '0');
  assert.equal(text.match(bucket('0.05'))?.[1], '1');
  assert.equal(text.match(bucket('10'))?.[1], '1');
  assert.equal(text.match(bucket('30'))?.[1], '2');
  assert.match(text, /^ocm_proxy_proxied_request_duration_seconds_count\{.*cluster="cluster-1".*\} 2$/m);
});

test('in-flight requests go up and down once per request', async () => {
  const done = trackInflightRequest();
  const other = trackInflightRequest();
  assert.match(await metricsText(), /^cluster_gateway_inflight_requests 2$/m);
  done();
  done();
  assert.match(await metricsText(), /^cluster_gateway_inflight_requests 1$/m);
  other();
  assert.match(await metricsText(), /^cluster_gateway_inflight_requests 0$/m);
});

test('upstream connections are read from the source at scrape time', async () => {
  let pools = new Map([
    ['cluster-1', 3],
    ['cluster-2', 1],
  ]);
  setUpstreamConnectionsSource(() => pools);
  let text = await metricsText();
  assert.match(text, /^cluster_gateway_upstream_connections\{cluster="cluster-1"\} 3$/m);
  assert.match(text, /^cluster_gateway_upstream_connections\{cluster="cluster-2"\} 1$/m);
  pools = new Map([['cluster-2', 0]]);
  text = await metricsText();
  assert.doesNotMatch(text, /cluster="cluster-1"\} 3/);
  assert.match(text, /^cluster_gateway_upstream_connections\{cluster="cluster-2"\} 0$/m);
});

test('process metrics can be enabled (idempotently) next to the gateway metrics', async () => {
  enableProcessMetrics();
  enableProcessMetrics();
  const text = await metricsText();
  assert.match(text, /^process_cpu_user_seconds_total /m);
  assert.match(text, /^nodejs_heap_size_total_bytes /m);
});

test('label values come from bounded sets, whatever the proxied path holds', async () => {
  const seriesOf = (text: string) =>
    text
      .split('\n')
      .filter((line) => line.startsWith('ocm_proxy_proxied_resource_requests_by_resource_total{')).length;
  const before = seriesOf(await metricsText());
  for (let i = 0; i < 500; i++) {
    recordProxiedRequest({
      cluster: 'cluster-b',
      resource: `random-${i}`,
      verb: `verb-${i}`,
      code: 200 + (i % 400),
      seconds: 0.01,
    });
  }
  const text = await metricsText();
  // 500 distinct resources, verbs and codes: at most "other" x "other" x (code values and classes).
  assert.ok(seriesOf(text) - before <= 40, `${seriesOf(text) - before} new series`);
  assert.doesNotMatch(text, /random-|verb-/);
  assert.match(text, /resource="other",verb="other",code="2xx"/);
  assert.match(text, /resource="other",verb="other",code="404"/);
  recordProxiedRequest({ cluster: 'cluster-b', resource: 'secrets', verb: 'list', code: 200, seconds: 0.01 });
  recordProxiedRequest({ cluster: 'cluster-b', resource: '', verb: 'get', code: 999, seconds: 0.01 });
  const after = await metricsText();
  assert.match(after, /resource="secrets",verb="list",code="200"/);
  assert.match(after, /resource="",verb="get",code="other"/);
});

test('health probes are counted by verdict, and the prober’s clusters read at scrape time', async () => {
  recordHealthProbe(true);
  recordHealthProbe(true);
  recordHealthProbe(false);
  let counts = { tracked: 5, unprobed: 2 };
  setHealthProberSource(() => counts);
  let text = await metricsText();
  assert.match(text, /^cluster_gateway_health_probes_total\{result="healthy"\} 2$/m);
  assert.match(text, /^cluster_gateway_health_probes_total\{result="unhealthy"\} 1$/m);
  assert.match(text, /^cluster_gateway_health_clusters\{state="tracked"\} 5$/m);
  assert.match(text, /^cluster_gateway_health_clusters\{state="unprobed"\} 2$/m);
  counts = { tracked: 5, unprobed: 0 };
  text = await metricsText();
  assert.match(text, /^cluster_gateway_health_clusters\{state="unprobed"\} 0$/m);
});

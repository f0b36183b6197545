import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { eventLoopSamplingMs, registerProcessMetrics } from './process-metrics.ts';

test('the event-loop delay histogram samples at eventLoopSamplingMs, not prom-client’s 10 ms', async () => {
  const registry = new Registry();
  registerProcessMetrics(registry);
  await registry.metrics(); // the first scrape starts a fresh window
  await new Promise((resolve) => setTimeout(resolve, eventLoopSamplingMs * 4));
  const text = await registry.metrics();
  const min = Number(/^nodejs_eventloop_lag_min_seconds (\S+)$/m.exec(text)?.[1]);
  // Every recorded delay is a whole sampling period or more: 10 ms sampling would read about 0.01.
  assert.ok(min >= (eventLoopSamplingMs * 0.9) / 1000, `lag min ${min} s`);
  assert.match(text, /^nodejs_heap_size_total_bytes /m);
});

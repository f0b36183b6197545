import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { createAgentServer, createMetricsServer } from './http.ts';
import { AgentMetrics } from './metrics.ts';
import type { Health } from './renewer.ts';

let health: Health = { healthy: true, reason: 'Healthy', message: 'renewing both Leases' };
let live = true;
const metrics = new AgentMetrics();
const server = createAgentServer(
  { live: () => ({ ok: live, message: 'renewal loop stuck: last round 99 s ago' }), ready: () => health },
  metrics,
);
let base = '';

before(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => server.close());

test('/readyz follows the agent health and says why it is not ready', async () => {
  assert.equal((await fetch(`${base}/readyz`)).status, 200);
  health = { healthy: false, reason: 'HubCredentialRejected', message: 'the hub rejected the credential' };
  const res = await fetch(`${base}/readyz`);
  assert.equal(res.status, 503);
  assert.match(await res.text(), /HubCredentialRejected: the hub rejected the credential/);
});

test('/healthz fails when the renewal loop is stuck', async () => {
  assert.equal((await fetch(`${base}/healthz`)).status, 200);
  live = false;
  const res = await fetch(`${base}/healthz`);
  assert.equal(res.status, 503);
  assert.match(await res.text(), /stuck/);
  live = true;
});

test('/metrics in the Prometheus text format', async () => {
  metrics.renewed('hub');
  metrics.failed('spoke', 'say "hi"\n');
  metrics.setCertificateNotAfter('hub', 1_900_000_000);
  const res = await fetch(`${base}/metrics`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /text\/plain; version=0.0.4/);
  const text = await res.text();
  assert.match(text, /# TYPE cluster_gateway_agent_lease_renewals_total counter/);
  assert.match(text, /cluster_gateway_agent_lease_renewals_total\{lease="hub"\} 1/);
  assert.match(text, /cluster_gateway_agent_lease_last_renew_age_seconds\{lease="hub"\} \d+\.\d{3}/);
  assert.doesNotMatch(text, /last_renew_age_seconds\{lease="spoke"\}/, 'absent until the first renewal');
  assert.match(text, /reason="say \\"hi\\"\\n"/, 'label values escaped');
  assert.match(text, /process_resident_memory_bytes \d+/);
  assert.match(text, /client_certificate_not_after_seconds\{lease="hub"\} 1900000000/);
  assert.doesNotMatch(text, /client_certificate_not_after_seconds\{lease="spoke"\}/);
});

test('unknown paths and methods', async () => {
  assert.equal((await fetch(`${base}/nope`)).status, 404);
  assert.equal((await fetch(`${base}/metrics`, { method: 'POST' })).status, 405);
});

test('with /metrics on its own listener, the probes listener points there and serves no metrics', async () => {
  const probes = createAgentServer(
    { live: () => ({ ok: true, message: 'ok' }), ready: () => health },
    { elsewhere: '127.0.0.1:8081' },
  );
  const only = createMetricsServer({ render: () => 'm_total 1\n' });
  await new Promise<void>((resolve) => probes.listen(0, '127.0.0.1', resolve));
  await new Promise<void>((resolve) => only.listen(0, '127.0.0.1', resolve));
  try {
    const probesBase = `http://127.0.0.1:${(probes.address() as AddressInfo).port}`;
    const refused = await fetch(`${probesBase}/metrics`);
    assert.equal(refused.status, 404);
    const text = await refused.text();
    assert.match(text, /served on 127\.0\.0\.1:8081/);
    assert.doesNotMatch(text, /m_total/);
    const metricsBase = `http://127.0.0.1:${(only.address() as AddressInfo).port}`;
    assert.equal(await (await fetch(`${metricsBase}/metrics`)).text(), 'm_total 1\n');
    assert.equal((await fetch(`${metricsBase}/readyz`)).status, 404);
  } finally {
    probes.close();
    only.close();
  }
});

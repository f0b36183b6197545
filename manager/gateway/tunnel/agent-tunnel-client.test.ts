import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import type { Connection } from '../../../agent/connection/kubeconfig.ts';
import { TunnelMetrics } from '../../../agent/tunnel/metrics.ts';
import { TunnelClient } from '../../../agent/tunnel/tunnel-client.ts';
import { agentUser, recordingAuthorizer, startTestGateway, type TestGateway } from './test-kit.ts';

const quietLog = { debug() {}, info() {}, warn() {} };

async function until(check: () => boolean, ms = 3000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('TunnelClient: the agent keeps its tunnel up', { timeout: 20_000 }, () => {
  let gateway: TestGateway;
  let allowed = true;
  const decisions = recordingAuthorizer(() => allowed);

  before(async () => {
    gateway = await startTestGateway({ authorizer: decisions.authorizer });
  });
  after(async () => {
    await gateway.close();
  });

  const running: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const stop of running.splice(0)) await stop();
  });

  function start(load: () => Connection) {
    const metrics = new TunnelMetrics();
    const stop = new AbortController();
    const client = new TunnelClient({
      cluster: 'c1',
      loadHub: load,
      target: () => ({ host: '127.0.0.1', port: 1 }),
      metrics,
      log: quietLog,
      backoff: { initialMs: 50, maxMs: 200 },
      credentialCheckMs: 20,
      drainGraceMs: 500,
    });
    const loop = client.run(stop.signal);
    const halt = () => {
      stop.abort();
      return loop;
    };
    running.push(halt);
    return { metrics, stop: halt };
  }

  it('connects, reconnects after the connection is cut, and drains on stop', async () => {
    const hub = await gateway.connection(agentUser('c1'));
    const agent = start(() => hub);
    await until(() => agent.metrics.isConnected);
    const first = gateway.tunnels.get('c1');
    first?.destroy('error');
    await until(() => /cluster_gateway_agent_tunnel_connects_total 2/.test(agent.metrics.render()));
    assert.notEqual(gateway.tunnels.get('c1'), first);
    // Destroying the session sends a GOAWAY first, when the connection still takes it.
    assert.match(
      agent.metrics.render(),
      /cluster_gateway_agent_tunnel_disconnects_total\{reason="(closed|goaway)"\} 1/,
    );
    const last = gateway.tunnels.get('c1');
    await agent.stop();
    assert.equal(await last?.ended, 'closed', "the agent's GOAWAY ends the gateway's session");
    await until(() => !gateway.endpoints.has('c1'));
  });

  it('a rotated credential: the new tunnel is up before the old one drains (the cluster never loses its endpoint)', async () => {
    let hub = await gateway.connection(agentUser('c1'));
    const agent = start(() => hub);
    await until(() => gateway.tunnels.get('c1') !== undefined);
    const first = gateway.tunnels.get('c1');
    let gaps = 0;
    const watch = setInterval(() => {
      if (!gateway.endpoints.has('c1')) gaps++;
    }, 1);
    hub = { ...hub, fingerprint: 'rotated' };
    await until(() => gateway.tunnels.get('c1') !== first);
    assert.equal(await first?.ended, 'replaced');
    await new Promise((r) => setTimeout(r, 50));
    clearInterval(watch);
    assert.equal(gaps, 0);
    await agent.stop();
  });

  it('a refused attach is retried with backoff and counted by reason', async () => {
    await until(() => gateway.tunnels.get('c1') === undefined);
    allowed = false;
    const hub = await gateway.connection(agentUser('c1'));
    const agent = start(() => hub);
    await until(() => /attach_failures_total\{reason="forbidden"\} [3-9]/.test(agent.metrics.render()));
    assert.equal(gateway.tunnels.get('c1'), undefined);
    allowed = true;
    await until(() => gateway.tunnels.get('c1') !== undefined, 5000);
    await agent.stop();
  });
});

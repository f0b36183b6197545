/**
 * Several gateway replicas (issue 9, item 4): an agent's tunnel lands on one replica, any replica
 * serves the cluster. Two gateway processes (A and B) share tunnels through per-cluster Leases in
 * the hub and a mutual-TLS peer port; the agent reaches them through a TCP front that stands for
 * the gateway's Service (it connects to the first replica that accepts, as kube-proxy sends new
 * connections to ready endpoints only). The cluster is cluster1 under another name, its hub
 * credential an admin's Secret (hub-credential: TLS runs from the serving replica to cluster1
 * inside the forwarded stream).
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { gatewayNamespace } from '../hack/localenv/gateway.ts';
import { ensureNamespace } from '../hack/localenv/ocm.ts';
import { freePort } from '../hack/localenv/ports.ts';
import { Supervisor } from '../hack/localenv/supervisor.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import { type Lease, leaseName } from '../manager/gateway/tunnel/leases.ts';
import { peerClusterHeader } from '../manager/gateway/tunnel/peers.ts';
import type { KubeClient, KubeObject } from '../shared/kube/client.ts';
import { StatusError } from '../shared/kube/status.ts';
import { createCertificateAuthority, type KeyPair } from '../shared/pki.ts';
import { applyClusterSecret, secretPath } from './support/credentials.ts';
import { e2eStateDir, environmentState, hubClient, managedClient } from './support/environment.ts';
import { gatewayRequest } from './support/gateway-client.ts';
import { kubectlResult } from './support/kubectl.ts';
import { portForwardPing } from './support/port-forward.ts';
import { grantInNamespace, serviceAccount } from './support/rbac.ts';
import { type SecondGateway, startSecondGateway } from './support/second-gateway.ts';
import {
  agentCertificate,
  agentHubKubeconfig,
  grantAgentOnHub,
  startTunnelAgent,
  type TunnelAgent,
} from './support/tunnel-agent.ts';
import { frontProxyClient, hubUserKubeconfig, proxyPrefix } from './support/users.ts';
import { startWorkload } from './support/workload.ts';

type Secret = KubeObject & { data?: Record<string, string> };

const cluster = 'replicacluster';
const leaseNamespace = 'cg-tunnel-replicas';
const admin = { frontProxy: { user: 'e2e-replicas-admin', groups: ['system:masters'] } };
const versionPath = `${proxyPrefix}/${cluster}/proxy/version`;
const decode = (b64: string | undefined) => Buffer.from(b64 ?? '', 'base64').toString();
/** The message of a Status body, or the body itself when it is not one. */
const messageOf = (body: string) => {
  try {
    return String((JSON.parse(body) as { message?: string }).message);
  } catch {
    return body;
  }
};

/**
 * The gateway's Service stand-in (and the path to a replica's peer port): each new connection goes to the first
 * target that accepts it, after `delayMs()` (0 unless a test makes the path slow; what the client sends meanwhile
 * waits).
 */
async function startFront(
  targets: () => number[],
  delayMs: () => number = () => 0,
): Promise<{ port: number; close(): void }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.once('close', () => sockets.delete(client));
    client.on('error', () => {});
    client.pause();
    const tryNext = (left: number[]) => {
      const port = left[0];
      if (port === undefined) return void client.destroy();
      const upstream = net.connect(port, '127.0.0.1');
      upstream.once('error', () => tryNext(left.slice(1)));
      upstream.once('connect', () => {
        upstream.removeAllListeners('error');
        upstream.on('error', () => client.destroy());
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
    };
    const delay = delayMs();
    if (delay > 0) setTimeout(() => tryNext(targets()), delay);
    else tryNext(targets());
  });
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return {
    port,
    close: () => {
      server.close();
      for (const s of sockets) s.destroy();
    },
  };
}

/**
 * What an attacker points a forged Lease at: a TLS server (a certificate of its own CA) that counts the
 * handshakes it completes and the HTTP/2 streams it receives.
 */
async function startListener(): Promise<{ port: number; streams: number; close(): void }> {
  const pair = await (await createCertificateAuthority('attacker')).issue({
    commonName: 'replica-evil',
    ipAddresses: ['127.0.0.1'],
    usage: 'both',
  });
  const state = { port: 0, streams: 0, close: () => {} };
  const server = http2.createSecureServer({ cert: pair.cert, key: pair.key, allowHTTP1: false });
  server.on('stream', (stream) => {
    state.streams++;
    stream.respond({ ':status': 200 });
  });
  server.on('error', () => {});
  state.port = await freePort();
  await new Promise<void>((r) => server.listen(state.port, '127.0.0.1', r));
  state.close = () => server.close();
  return state;
}

/** A watch through a replica's proxy; resolves with the first event whose text matches `want`. */
function watchThrough(base: string, collection: string, want: RegExp, timeoutMs = 20_000) {
  const fp = frontProxyClient();
  let req: import('node:http').ClientRequest | undefined;
  const opened = new Promise<void>((resolveOpen, rejectOpen) => {
    req = https.request(`${base}${proxyPrefix}/${cluster}/proxy${collection}?watch=true`, {
      ca: fp.ca,
      cert: fp.cert,
      key: fp.key,
      headers: { 'x-remote-user': admin.frontProxy.user, 'x-remote-group': admin.frontProxy.groups },
    });
    req.on('response', (res) => {
      if (res.statusCode !== 200) return rejectOpen(new Error(`watch answered ${res.statusCode}`));
      resolveOpen();
      res.setEncoding('utf8');
      let text = '';
      res.on('data', (c: string) => {
        text += c;
        if (want.test(text)) matched(text);
      });
    });
    req.on('error', rejectOpen);
    req.end();
  });
  let matched: (text: string) => void = () => {};
  const event = new Promise<string>((resolve, reject) => {
    matched = resolve;
    setTimeout(
      () => reject(new Error(`no watch event matching ${want} within ${timeoutMs} ms`)),
      timeoutMs,
    ).unref();
  });
  return { opened, event, close: () => req?.destroy() };
}

/** Opens a CONNECT stream on a peer port with `tlsOptions`: its status, or the error that refused it. */
function peerConnect(port: number, ca: string, tlsOptions: http2.SecureClientSessionOptions) {
  return new Promise<number | string>((resolve) => {
    const session = http2.connect(`https://127.0.0.1:${port}`, {
      ca,
      checkServerIdentity: () => undefined,
      ...tlsOptions,
    });
    const done = (v: number | string) => {
      resolve(v);
      session.destroy();
    };
    session.on('error', (err) => done(err.message));
    const stream = session.request(
      { ':method': 'CONNECT', ':authority': 'peer:443', [peerClusterHeader]: cluster },
      { endStream: false },
    );
    stream.on('error', (err) => done(err.message));
    stream.on('response', (h) => done(Number(h[':status'])));
    stream.on('close', () => done('closed without an answer'));
  });
}

describe('several gateway replicas share agent tunnels', { concurrency: false }, () => {
  let hub: KubeClient;
  let supervisor: Supervisor;
  let ca: KeyPair;
  let stranger: KeyPair;
  let replicaA: SecondGateway;
  let replicaB: SecondGateway;
  let peerPortA: number;
  let peerPortB: number;
  let front: { port: number; close(): void };
  /** Replica A's peer port as the other replicas reach it (its Lease's address): a path a test can slow. */
  let peerPathA: { port: number; close(): void };
  let peerPathDelayMs = 0;
  let agent: TunnelAgent;
  const cleanups: (() => Promise<unknown>)[] = [];
  const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${leaseNamespace}/leases/${leaseName(cluster)}`;

  async function startReplica(
    name: string,
    peerPort: number,
    dir: string,
    advertisedPort = peerPort,
  ): Promise<SecondGateway> {
    return startSecondGateway(`tunnel-${name}`, [
      `--tunnel-peer-port=${peerPort}`,
      `--tunnel-peer-cert=${path.join(dir, `${name}.crt`)}`,
      `--tunnel-peer-key=${path.join(dir, `${name}.key`)}`,
      `--tunnel-peer-ca=${path.join(dir, 'ca.crt')}`,
      `--tunnel-peer-address=127.0.0.1:${advertisedPort}`,
      `--tunnel-replica-name=${name}`,
      `--tunnel-lease-namespace=${leaseNamespace}`,
      '--tunnel-lease-duration=10',
      '--log-level=debug',
    ]);
  }

  before(async () => {
    hub = await hubClient();
    supervisor = new Supervisor(path.join(e2eStateDir, 'tunnel-replicas'));
    const env = environmentState();
    // The gateway's RBAC for its Leases: in their namespace only.
    await ensureNamespace(hub, leaseNamespace);
    await grantInNamespace(
      hub,
      leaseNamespace,
      'cluster-gateway-tunnel-leases',
      [serviceAccount(gatewayNamespace, 'cluster-gateway')],
      [
        {
          apiGroups: ['coordination.k8s.io'],
          resources: ['leases'],
          verbs: ['get', 'list', 'watch', 'create', 'update'],
        },
      ],
    );
    const hubPaths = await grantAgentOnHub(hub, cluster);
    cleanups.push(async () => {
      await hub.delete(secretPath(cluster));
      for (const p of hubPaths.filter((p) => !p.includes(`/namespaces/${cluster}/`))) await hub.delete(p);
      await hub.delete(`/api/v1/namespaces/${cluster}`);
      await hub.delete(`/api/v1/namespaces/${leaseNamespace}`);
    });
    const token = decode((await hub.get<Secret>(secretPath('cluster1'))).data?.token);
    await applyClusterSecret(
      hub,
      cluster,
      'ServiceAccountToken',
      { token, 'ca.crt': readFileSync(path.join(env.stateDir, 'cluster1', 'ca.crt'), 'utf8') },
      { 'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy' },
    );
    // Peer PKI: a CA for the replicas alone, one certificate each (server and client).
    const dir = path.join(e2eStateDir, 'tunnel-replicas', 'peer-pki');
    mkdirSync(dir, { recursive: true });
    const authority = await createCertificateAuthority('cluster-gateway-peers');
    ca = authority;
    writeFileSync(path.join(dir, 'ca.crt'), authority.cert);
    for (const name of ['replica-a', 'replica-b', 'replica-c']) {
      const pair = await authority.issue({ commonName: name, ipAddresses: ['127.0.0.1'], usage: 'both' });
      writeFileSync(path.join(dir, `${name}.crt`), pair.cert);
      writeFileSync(path.join(dir, `${name}.key`), pair.key, { mode: 0o600 });
    }
    stranger = await (await createCertificateAuthority('not-the-peer-ca')).issue({
      commonName: 'replica-x',
      ipAddresses: ['127.0.0.1'],
      usage: 'both',
    });
    peerPortA = await freePort();
    peerPortB = await freePort();
    peerPathA = await startFront(
      () => [peerPortA],
      () => peerPathDelayMs,
    );
    cleanups.push(async () => peerPathA.close());
    replicaA = await startReplica('replica-a', peerPortA, dir, peerPathA.port);
    replicaB = await startReplica('replica-b', peerPortB, dir);
    cleanups.push(async () => {
      replicaA.stop();
      replicaB.stop();
    });
    const portOf = (g: SecondGateway) => Number(new URL(g.url).port);
    front = await startFront(() => [portOf(replicaA), portOf(replicaB)]);
    cleanups.push(async () => front.close());
    agent = await startTunnelAgent(supervisor, {
      cluster,
      managedName: 'cluster1',
      hubKubeconfig: agentHubKubeconfig(cluster, await agentCertificate(cluster)),
      args: [
        `--tunnel-server=https://127.0.0.1:${front.port}`,
        `--tunnel-ca-file=${path.join(env.stateDir, 'hub', 'ca.crt')}`,
      ],
    });
  });

  after(async () => {
    await supervisor?.stop();
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    hub?.close();
  });

  test('the tunnel lands on replica A, whose Lease names it and its peer address', async () => {
    const lease = await waitFor('the Lease of the tunnel', () => hub.getOptional<Lease>(leasePath), {
      timeoutMs: 30_000,
      failFast: () => agent.process.assertRunning(),
    });
    assert.equal(lease.spec?.holderIdentity, 'replica-a');
    assert.equal(lease.spec?.leaseDurationSeconds, 10);
    assert.equal(
      lease.metadata?.annotations?.['cluster.core.oam.dev/tunnel-peer-address'],
      `127.0.0.1:${peerPathA.port}`,
    );
    assert.equal(lease.metadata?.annotations?.['cluster.core.oam.dev/cluster-name'], cluster);
  });

  test('a request through replica B reaches the cluster through A; B shows A as the holder', async () => {
    const res = await waitFor(
      'a GET through replica B',
      async () => {
        const r = await gatewayRequest('GET', versionPath, admin, replicaB.url);
        return r.status === 200 ? r : undefined;
      },
      { timeoutMs: 20_000 },
    );
    assert.ok(res.json<{ gitVersion?: string }>().gitVersion);
    const direct = await gatewayRequest('GET', versionPath, admin, replicaA.url);
    assert.equal(direct.status, 200);
    const gw = (await gatewayRequest('GET', `${proxyPrefix}/${cluster}`, admin, replicaB.url)).json<{
      spec: { access: { endpoint: { type: string } } };
      status: { tunnel?: { connected: boolean; replica?: string } };
    }>();
    assert.equal(gw.spec.access.endpoint.type, 'ClusterProxy');
    assert.equal(gw.status.tunnel?.connected, true);
    assert.equal(gw.status.tunnel?.replica, 'replica-a');
    // A's peer port saw B's streams (the proof that B did not dial anything else).
    assert.match(readFileSync(replicaB.logFile, 'utf8'), /tunnel held by another replica: forwarding to it/);
  });

  test('a watch through replica B streams events of the cluster', async () => {
    const spoke = await managedClient('cluster1');
    const name = `e2e-replicas-${Date.now()}`;
    const watch = watchThrough(
      replicaB.url,
      '/api/v1/namespaces/default/configmaps',
      new RegExp(`"ADDED".*"${name}"`),
    );
    try {
      await watch.opened;
      await spoke.create('/api/v1/namespaces/default/configmaps', {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name, namespace: 'default' },
        data: { from: 'tunnel-replicas' },
      });
      assert.match(await watch.event, new RegExp(name));
    } finally {
      watch.close();
      await spoke.delete(`/api/v1/namespaces/default/configmaps/${name}`).catch(() => {});
      spoke.close();
    }
  });

  test('exec (WebSocket and SPDY) and port-forward through replica B', async () => {
    const spoke = await managedClient('cluster1');
    const workload = await startWorkload(spoke);
    try {
      // kubectl straight at replica B with a hub client certificate (the gateway trusts the hub's client CA).
      const kubeconfig = await hubUserKubeconfig(
        'e2e-replicas-admin',
        ['system:masters'],
        `${replicaB.url}${proxyPrefix}/${cluster}/proxy`,
      );
      for (const websockets of ['true', 'false']) {
        const out = await kubectlResult(
          kubeconfig,
          ['exec', workload.pod.name, '--', 'echo', 'through', 'replica', 'b'],
          { env: { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: websockets } },
        );
        assert.equal(out.stdout, 'through replica b\n', `exec, websockets=${websockets}: ${out.stderr}`);
        const reply = await portForwardPing(kubeconfig, workload.pod.name, websockets === 'true');
        assert.match(reply, /hello from the pod/, `port-forward, websockets=${websockets}`);
      }
    } finally {
      await workload.stop();
      spoke.close();
    }
  });

  test('the peer port refuses a client without a peer certificate, even one the gateway itself trusts', async () => {
    const fp = frontProxyClient();
    // A replica is served (200): the same call with the wrong credentials must fail at TLS.
    const dir = path.join(e2eStateDir, 'tunnel-replicas', 'peer-pki');
    const replica = {
      cert: readFileSync(path.join(dir, 'replica-b.crt'), 'utf8'),
      key: readFileSync(path.join(dir, 'replica-b.key'), 'utf8'),
    };
    assert.equal(await peerConnect(peerPortA, ca.cert, replica), 200);
    for (const [what, options] of [
      ['no certificate', {}],
      ['a certificate of another CA', { cert: stranger.cert, key: stranger.key }],
      ["the aggregator's front-proxy certificate", { cert: fp.cert, key: fp.key }],
    ] as const) {
      const result = await peerConnect(peerPortA, ca.cert, options);
      assert.equal(typeof result, 'string', `${what}: refused at the TLS handshake (got ${result})`);
    }
    assert.match(
      readFileSync(replicaA.logFile, 'utf8'),
      /peer connection refused: no valid peer client certificate/,
    );
  });

  test('a replica started while A holds the tunnel: from its first 200 on /readyz, every request for the cluster sent to it is served', async () => {
    await waitFor(
      'the Lease to name replica A',
      async () => (await hub.getOptional<Lease>(leasePath))?.spec?.holderIdentity === 'replica-a',
      { timeoutMs: 30_000, failFast: () => agent.process.assertRunning() },
    );
    // The new replica's proof of A (a handshake on A's peer port) takes a while, as over a slow pod network:
    // until it has A's Lease applied it has no route to the cluster, and must not be ready.
    peerPathDelayMs = 2_000;
    const dir = path.join(e2eStateDir, 'tunnel-replicas', 'peer-pki');
    const started = Date.now();
    let replicaC: SecondGateway | undefined;
    try {
      // Returns on the first 200 of its /readyz (polled every 250 ms).
      replicaC = await startReplica('replica-c', await freePort(), dir);
      const readyAt = Date.now();
      const answers: string[] = [];
      // Sent to C itself, as the aggregator would once the kubelet marks it Ready: for longer than the slow path.
      while (answers.length < 5 || Date.now() - readyAt < peerPathDelayMs) {
        const r = await gatewayRequest('GET', versionPath, admin, replicaC.url);
        answers.push(r.status === 200 ? '200' : `${r.status}: ${messageOf(r.body)}`);
      }
      console.log(
        `new replica: ready ${readyAt - started} ms after its start; ${answers.length} requests to it in the ${Date.now() - readyAt} ms after`,
      );
      const failed = answers.filter((a) => a !== '200');
      assert.equal(
        failed.length,
        0,
        `${failed.length} of ${answers.length} requests to the Ready replica failed, the first: ${failed[0]}`,
      );
      assert.equal((await hub.get<Lease>(leasePath)).spec?.holderIdentity, 'replica-a', 'served through A');
    } finally {
      peerPathDelayMs = 0;
      replicaC?.stop();
    }
  });

  test('replica A killed: the agent reconnects to B, service is back within 5 s, the Lease names B', async () => {
    const before = await gatewayRequest('GET', versionPath, admin, replicaB.url);
    assert.equal(before.status, 200);
    const killedAt = Date.now();
    replicaA.process.kill('SIGKILL');
    const failures: { status: number; message: string }[] = [];
    let backAt = 0;
    while (Date.now() - killedAt < 15_000) {
      const r = await gatewayRequest('GET', versionPath, admin, replicaB.url);
      if (r.status === 200) {
        backAt = Date.now();
        break;
      }
      failures.push({ status: r.status, message: messageOf(r.body) });
      await new Promise((r) => setTimeout(r, 50));
    }
    const failoverMs = backAt - killedAt;
    console.log(
      `failover: service back through replica B ${failoverMs} ms after replica A was killed; ${failures.length} failed requests meanwhile${failures[0] ? `, e.g. ${failures[0].status}: ${failures[0].message}` : ''}`,
    );
    assert.ok(backAt > 0, 'service came back');
    assert.ok(failoverMs < 5_000, `service back within 5 s (took ${failoverMs} ms)`);
    // Meanwhile every failure was a clear 503 saying why, never a hang or a bare error.
    for (const f of failures) {
      assert.equal(f.status, 503);
      assert.match(f.message, /cluster "replicacluster"/);
    }
    const lease = await waitFor(
      'the Lease to name replica B',
      async () => {
        const l = await hub.getOptional<Lease>(leasePath);
        return l?.spec?.holderIdentity === 'replica-b' ? l : undefined;
      },
      { timeoutMs: 10_000 },
    );
    assert.equal(
      lease.metadata?.annotations?.['cluster.core.oam.dev/tunnel-peer-address'],
      `127.0.0.1:${peerPortB}`,
    );
    assert.equal(lease.spec?.leaseTransitions, 1);
  });

  test('replica B shut down gracefully (SIGTERM): its tunnel drains to a restarted A, served through A within 5 s', async () => {
    const dir = path.join(e2eStateDir, 'tunnel-replicas', 'peer-pki');
    replicaA = await startReplica('replica-a', peerPortA, dir);
    // A sees B's Lease and forwards to it before anything moves.
    await waitFor(
      'a GET through the restarted replica A',
      async () => (await gatewayRequest('GET', versionPath, admin, replicaA.url)).status === 200,
      { timeoutMs: 20_000 },
    );
    const stoppedAt = Date.now();
    replicaB.stop();
    let backAt = 0;
    while (Date.now() - stoppedAt < 15_000) {
      const r = await gatewayRequest('GET', versionPath, admin, replicaA.url);
      const holder = (await hub.getOptional<Lease>(leasePath))?.spec?.holderIdentity;
      if (r.status === 200 && holder === 'replica-a') {
        backAt = Date.now();
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    console.log(
      `graceful: tunnel held by replica A again ${backAt - stoppedAt} ms after replica B got SIGTERM`,
    );
    assert.ok(backAt > 0 && backAt - stoppedAt < 5_000, `back within 5 s (took ${backAt - stoppedAt} ms)`);
    assert.match(readFileSync(replicaB.logFile, 'utf8'), /"reason":"shutdown"/);
  });

  test('a forged update of the held Lease: no replica forwards to the forged holder, the real holder drains and the agent takes it back', async () => {
    // A holds the tunnel (the previous test); B comes back and forwards to A. Anyone who may write Leases here
    // (no admission policy in this namespace, on purpose: the gateway must not rely on it) then names another
    // holder at an address of theirs.
    const dir = path.join(e2eStateDir, 'tunnel-replicas', 'peer-pki');
    // A new process: the one stopped in the previous test may still be draining on its old peer port.
    peerPortB = await freePort();
    replicaB = await startReplica('replica-b', peerPortB, dir);
    await waitFor(
      'a GET through replica B (forwarded to A)',
      async () => (await gatewayRequest('GET', versionPath, admin, replicaB.url)).status === 200,
      { timeoutMs: 20_000 },
    );
    const listener = await startListener();
    cleanups.push(async () => listener.close());
    const logFrom = readFileSync(replicaA.logFile, 'utf8').length;
    // A read-modify-write against the holder's renewals: a 409 means it renewed in between, so read again.
    await waitFor(
      'the forged holder written over a renewal',
      async () => {
        const current = await hub.get<Lease>(leasePath);
        assert.equal(current.spec?.holderIdentity, 'replica-a');
        try {
          await hub.request('PUT', leasePath, {
            body: {
              ...current,
              metadata: {
                ...current.metadata,
                annotations: {
                  ...current.metadata?.annotations,
                  'cluster.core.oam.dev/tunnel-peer-address': `127.0.0.1:${listener.port}`,
                },
              },
              spec: { ...current.spec, holderIdentity: 'replica-evil' },
            } as KubeObject,
          });
          return true;
        } catch (err) {
          if (err instanceof StatusError && err.code === 409) return false;
          throw err;
        }
      },
      { timeoutMs: 10_000, intervalMs: 0 },
    );
    const forgedAt = Date.now();
    // Requests through B meanwhile: none may be forwarded to the forged holder (its Lease is not proven). A's next
    // renewal finds another holder: it stops serving as the holder (never renewing a Lease that names someone
    // else), and the agent's reconnection takes the Lease back.
    const answers: string[] = [];
    await waitFor(
      'the Lease back with a real replica and a GET through B answered',
      async () => {
        const r = await gatewayRequest('GET', versionPath, admin, replicaB.url);
        if (r.status !== 200) answers.push(`${r.status}: ${messageOf(r.body)}`);
        const holder = (await hub.get<Lease>(leasePath)).spec?.holderIdentity;
        return r.status === 200 && (holder === 'replica-a' || holder === 'replica-b');
      },
      { timeoutMs: 20_000, intervalMs: 50 },
    );
    console.log(
      `forged holder: served through a real holder again ${Date.now() - forgedAt} ms after the forgery; meanwhile ${answers.length} answers like ${answers[0] ?? '(none)'}`,
    );
    assert.deepEqual(
      answers.filter((a) => /replica-evil/.test(a)),
      [],
      'no request was forwarded to the forged holder',
    );
    assert.equal(listener.streams, 0, 'no stream opened to the forged address');
    const logA = readFileSync(replicaA.logFile, 'utf8').slice(logFrom);
    assert.match(logA, /tunnel Lease names another holder: draining/, 'A let the tunnel go');
    assert.match(logA, /tunnel Lease ignored: its holder did not prove it is that gateway replica/);
  });

  test('Leases whose holder cannot prove it is a replica route nothing, show nothing and invent no cluster', async () => {
    const listener = await startListener();
    cleanups.push(async () => listener.close());
    // The tunnel's agent goes: the Lease is released (emptied, the gateway needs no delete on Leases).
    await agent.process.stop();
    await waitFor(
      'the Lease to be released',
      async () => !(await hub.get<Lease>(leasePath)).spec?.holderIdentity,
      { timeoutMs: 10_000 },
    );
    const logFrom = readFileSync(replicaA.logFile, 'utf8').length;
    const deadPort = await freePort();
    const phantom = 'phantom-e2e';
    // A long cluster name is hashed into the Lease name: what follows the 230th character is not in it.
    const hostile = `${'a'.repeat(240)}/../../x\n"><svg onload=1>\u202e`;
    const forge = (name: string, forCluster: string, holderName: string, address: string) =>
      hub.apply(
        `/apis/coordination.k8s.io/v1/namespaces/${leaseNamespace}/leases/${name}`,
        {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: {
            name,
            namespace: leaseNamespace,
            labels: { 'cluster.core.oam.dev/tunnel-lease': 'true' },
            annotations: {
              'cluster.core.oam.dev/cluster-name': forCluster,
              'cluster.core.oam.dev/tunnel-peer-address': address,
            },
          },
          spec: { holderIdentity: holderName, leaseDurationSeconds: 30 },
        } as KubeObject,
        'e2e',
      );
    await forge(leaseName(cluster), cluster, 'replica-dead', `127.0.0.1:${deadPort}`);
    await forge(leaseName(hostile), hostile, 'replica-evil', `127.0.0.1:${listener.port}`);
    await forge(leaseName(phantom), phantom, 'replica-evil', `127.0.0.1:${listener.port}`);
    cleanups.push(async () => {
      for (const name of [leaseName(hostile), leaseName(phantom)])
        await hub.delete(`/apis/coordination.k8s.io/v1/namespaces/${leaseNamespace}/leases/${name}`);
    });
    // Lease events apply in order, each after its holder's proof: once the last one is refused, all were seen.
    // (Or the phantom is listed, which the assertions below then refuse.)
    const listNames = async () =>
      (await gatewayRequest('GET', proxyPrefix, admin, replicaA.url))
        .json<{ items: { metadata: { name: string } }[] }>()
        .items.map((i) => i.metadata.name);
    await waitFor(
      'replica A to refuse the phantom Lease',
      async () => {
        const log = readFileSync(replicaA.logFile, 'utf8').slice(logFrom);
        const refusedBoth =
          /"cluster":"phantom-e2e".*tunnel Lease ignored/.test(log) &&
          /"cluster":"replicacluster".*tunnel Lease ignored/.test(log);
        return refusedBoth || (await listNames()).includes(phantom);
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    // Nothing is forwarded to the dead or the chosen address: the cluster has no tunnel, said at once.
    const r = await gatewayRequest('GET', versionPath, admin, replicaA.url);
    assert.equal(r.status, 503);
    assert.match(messageOf(r.body), /no agent tunnel is connected/);
    assert.doesNotMatch(messageOf(r.body), /replica-dead|127\.0\.0\.1/);
    const list = (await gatewayRequest('GET', proxyPrefix, admin, replicaA.url)).json<{
      items: { metadata: { name: string }; status?: { tunnel?: { connected?: boolean } } }[];
    }>();
    const names = list.items.map((i) => i.metadata.name);
    assert.ok(!names.includes(phantom), 'no phantom ClusterGateway');
    assert.ok(
      !names.some((n) => n.includes('svg') || n.length > 253),
      'no ClusterGateway of the hostile name',
    );
    const shown = list.items.find((i) => i.metadata.name === cluster);
    assert.equal(shown?.status?.tunnel?.connected, false, 'not shown connected through the dead holder');
    assert.equal(listener.streams, 0, 'no stream opened to the chosen address');
    await hub.delete(leasePath);
  });
});

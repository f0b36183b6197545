/**
 * Streams and upgrades through the whole path: kubectl -> hub aggregator ->
 * gateway -> managed kube-apiserver -> (stand-in) kubelet. kubectl's server
 * is cluster1's proxy URL, as a KubeVela-style client's would be.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { binaryPath } from '../hack/localenv/binaries.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import { managedClient } from './support/environment.ts';
import { gatewayRequest } from './support/gateway-client.ts';
import { kubectlRun } from './support/kubectl.ts';
import { portForwardPing } from './support/port-forward.ts';
import { type StandIn, startStandIn } from './support/stand-in.ts';
import { proxyKubeconfig } from './support/users.ts';

let spoke: KubeClient;
let standIn: StandIn;
let kc: string;
let echoServer: net.Server;
let echoPort: number;

before(async () => {
  spoke = await managedClient('cluster1');
  // A TCP service "inside the pod" on port 8080: replies with a greeting and echoes.
  echoServer = net.createServer((socket) => {
    socket.write('hello from the pod\n');
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => echoServer.listen(0, '127.0.0.1', resolve));
  echoPort = (echoServer.address() as net.AddressInfo).port;
  standIn = await startStandIn(spoke, 'cluster1', { portMap: { 8080: echoPort } });
  kc = await proxyKubeconfig('cluster1');
});

after(async () => {
  await standIn?.stop();
  echoServer?.close();
  spoke?.close();
});

test('kubectl logs -f through the gateway stays open past 90 seconds, and the upstream closes when kubectl leaves', async () => {
  const child = spawn(binaryPath('kubectl'), [`--kubeconfig=${kc}`, 'logs', '-f', standIn.pod.name], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: { at: number; line: string }[] = [];
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    for (const line of chunk.split('\n').filter(Boolean)) lines.push({ at: Date.now(), line });
  });
  child.stderr.setEncoding('utf8').on('data', (c: string) => {
    stderr += c;
  });
  const started = Date.now();
  const closed = new Promise<void>((resolve) => standIn.kubelet.events.once('logsClosed', () => resolve()));
  try {
    await waitFor('the first log line', () => lines.length > 0, { timeoutMs: 30_000 });
    await new Promise((r) => setTimeout(r, 95_000));
    assert.equal(child.exitCode, null, `kubectl logs -f still running (stderr: ${stderr})`);
    const late = lines.filter((l) => l.at - started > 90_000);
    assert.ok(late.length > 0, `lines still arriving after 90 s (got ${lines.length} in all)`);
  } finally {
    child.kill('SIGINT');
  }
  await waitFor('the kubelet to see the stream closed', () => closed.then(() => true), { timeoutMs: 10_000 });
});

for (const protocol of ['websocket', 'spdy'] as const) {
  // kubectl 1.30+ uses WebSocket; KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false makes it use the SPDY fallback.
  const env = { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: protocol === 'websocket' ? 'true' : 'false' };

  test(`kubectl exec through the gateway (${protocol})`, async () => {
    const before = await upgradeCount(protocol);
    const out = await kubectlRun(kc, ['exec', standIn.pod.name, '--', 'echo', 'through', 'the', 'gateway'], {
      env,
    });
    assert.equal(out, 'through the gateway\n');
    // The gateway saw the protocol under test (kubectl did not silently fall back).
    assert.ok((await upgradeCount(protocol)) > before, `the gateway proxied a ${protocol} upgrade`);
    // Exit codes come back on the error stream.
    await assert.rejects(
      kubectlRun(kc, ['exec', standIn.pod.name, '--', 'sh', '-c', 'exit 3'], { env }),
      /exit code 3|command terminated with exit code 3/,
    );
  });

  test(`kubectl exec -i passes stdin through the gateway (${protocol})`, async () => {
    const out = await kubectlRun(kc, ['exec', '-i', standIn.pod.name, '--', 'cat'], {
      env,
      input: 'piped input\n',
    });
    assert.equal(out, 'piped input\n');
  });
}

for (const protocol of ['websocket', 'spdy'] as const) {
  test(`kubectl port-forward through the gateway (${protocol})`, async () => {
    const before = await upgradeCount(protocol);
    const reply = await portForwardPing(kc, standIn.pod.name, protocol === 'websocket');
    assert.match(reply, /hello from the pod/);
    assert.match(reply, /ping/);
    assert.ok((await upgradeCount(protocol)) > before, `the gateway proxied a ${protocol} upgrade`);
  });
}

async function upgradeCount(protocol: string): Promise<number> {
  const res = await gatewayRequest('GET', '/metrics', {
    frontProxy: { user: 'admin', groups: ['system:masters'] },
  });
  const match = new RegExp(`cluster_gateway_upgrade_requests_total\\{protocol="${protocol}"\\} (\\d+)`).exec(
    res.body,
  );
  return Number(match?.[1] ?? 0);
}

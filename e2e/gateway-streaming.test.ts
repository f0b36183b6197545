/**
 * Streams and upgrades through the whole path: kubectl -> hub aggregator ->
 * gateway -> managed kube-apiserver -> cluster1's kubelet -> a container
 * (support/workload.ts). kubectl's server is cluster1's proxy URL, as a
 * KubeVela-style client's would be.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { after, before, test } from 'node:test';
import { binaryPath } from '../hack/localenv/binaries.ts';
import { waitFor } from '../hack/localenv/wait.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import { managedClient } from './support/environment.ts';
import { gatewayRequest } from './support/gateway-client.ts';
import { kubectlRun } from './support/kubectl.ts';
import { portForwardPing } from './support/port-forward.ts';
import { proxyKubeconfig } from './support/users.ts';
import { startWorkload, type Workload } from './support/workload.ts';

let spoke: KubeClient;
let workload: Workload;
let kc: string;

before(async () => {
  spoke = await managedClient('cluster1');
  workload = await startWorkload(spoke);
  kc = await proxyKubeconfig('cluster1');
});

after(async () => {
  if (held?.exited() === undefined) held?.child.kill('SIGINT');
  await workload?.stop();
  spoke?.close();
});

/** Log streams cluster1's kube-apiserver holds open (its own gauge): each is a connection to the kubelet. */
async function openLogStreams(): Promise<number> {
  const text = await spoke.request<string>('GET', '/metrics');
  return text
    .split('\n')
    .filter((l) => l.startsWith('apiserver_longrunning_requests{') && l.includes('subresource="log"'))
    .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
}

/**
 * `kubectl logs -f` through the gateway, opened by the first test and held while the exec and port-forward
 * tests run; the last test of the file asserts it stayed open past 90 s, then closes it.
 */
let held:
  | {
      child: ChildProcess;
      started: number;
      streamsBefore: number;
      lines: { at: number; line: string }[];
      stderr: () => string;
      exited: () => number | null | undefined;
    }
  | undefined;

test("kubectl logs -f through the gateway: the first lines arrive, and cluster1's apiserver holds the stream", async () => {
  const streamsBefore = await openLogStreams();
  const child = spawn(binaryPath('kubectl'), [`--kubeconfig=${kc}`, 'logs', '-f', workload.pod.name], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: { at: number; line: string }[] = [];
  let stderr = '';
  let exited: number | null | undefined;
  child.once('exit', (code) => {
    exited = code;
  });
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    for (const line of chunk.split('\n').filter(Boolean)) lines.push({ at: Date.now(), line });
  });
  child.stderr?.setEncoding('utf8').on('data', (c: string) => {
    stderr += c;
  });
  held = { child, started: Date.now(), streamsBefore, lines, stderr: () => stderr, exited: () => exited };
  await waitFor('the first log line', () => lines.length > 0, { timeoutMs: 30_000 });
  assert.equal(await openLogStreams(), streamsBefore + 1, "cluster1's apiserver holds the stream open");
});

for (const protocol of ['websocket', 'spdy'] as const) {
  // kubectl 1.30+ uses WebSocket; KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false makes it use the SPDY fallback.
  const env = { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: protocol === 'websocket' ? 'true' : 'false' };

  test(`kubectl exec through the gateway (${protocol})`, async () => {
    const before = await upgradeCount(protocol);
    const out = await kubectlRun(kc, ['exec', workload.pod.name, '--', 'echo', 'through', 'the', 'gateway'], {
      env,
    });
    assert.equal(out, 'through the gateway\n');
    // The gateway saw the protocol under test (kubectl did not silently fall back).
    assert.ok((await upgradeCount(protocol)) > before, `the gateway proxied a ${protocol} upgrade`);
    // Exit codes come back on the error stream.
    await assert.rejects(
      kubectlRun(kc, ['exec', workload.pod.name, '--', 'sh', '-c', 'exit 3'], { env }),
      /exit code 3|command terminated with exit code 3/,
    );
  });

  test(`kubectl exec -i passes stdin through the gateway (${protocol})`, async () => {
    const out = await kubectlRun(kc, ['exec', '-i', workload.pod.name, '--', 'cat'], {
      env,
      input: 'piped input\n',
    });
    assert.equal(out, 'piped input\n');
  });
}

for (const protocol of ['websocket', 'spdy'] as const) {
  test(`kubectl port-forward through the gateway (${protocol})`, async () => {
    const before = await upgradeCount(protocol);
    const reply = await portForwardPing(kc, workload.pod.name, protocol === 'websocket');
    assert.match(reply, /hello from the pod/);
    assert.match(reply, /ping/);
    assert.ok((await upgradeCount(protocol)) > before, `the gateway proxied a ${protocol} upgrade`);
  });
}

test('kubectl logs -f through the gateway stays open past 90 seconds, and the upstream closes when kubectl leaves', async () => {
  assert.ok(held, 'the first test opened the stream');
  const { child, started, streamsBefore, lines, stderr, exited } = held;
  try {
    await waitFor(
      'a log line more than 90 s after kubectl logs -f started',
      () => lines.some((l) => l.at - started > 90_000),
      {
        timeoutMs: 120_000,
        intervalMs: 500,
        failFast: () => assert.equal(exited(), undefined, `kubectl logs -f exited (stderr: ${stderr()})`),
      },
    );
    assert.equal(child.exitCode, null, `kubectl logs -f still running (stderr: ${stderr()})`);
  } finally {
    child.kill('SIGINT');
  }
  await waitFor(
    "cluster1's apiserver to close the stream to the kubelet",
    async () => (await openLogStreams()) === streamsBefore,
    { timeoutMs: 10_000 },
  );
});

async function upgradeCount(protocol: string): Promise<number> {
  const res = await gatewayRequest('GET', '/metrics', {
    frontProxy: { user: 'admin', groups: ['system:masters'] },
  });
  const match = new RegExp(`cluster_gateway_upgrade_requests_total\\{protocol="${protocol}"\\} (\\d+)`).exec(
    res.body,
  );
  return Number(match?.[1] ?? 0);
}

/**
 * `cluster-gateway doctor`, run as a user runs it (a child process with Node 24, KUBECONFIG the hub's), against
 * the npm start environment: it passes on the healthy environment, and for each fault injected here it exits 1
 * and names that fault as the first failing check, with its fix.
 *
 * Each fault waits for its effect with cheap reads of the environment (the heartbeat's age, the prober's verdict,
 * the work's status feedback), then runs doctor once: a doctor process takes seconds to start on a loaded machine.
 * The faults, cheapest first: a hub user without `get clustergateways/proxy` (no change to the environment; the
 * printed fix is then run and doctor passes for that user); cluster1's heartbeat stale (its agent runs, but its
 * route to the hub is refused: hack/localenv/blocked-routes.ts); cluster1's kube-apiserver stopped (SIGSTOP to its
 * process, SIGCONT after: the environment supervises its apiservers and cannot restart one); cluster1's agent
 * scaled to 0 (the work agent leaves it so for minutes). The gateway stopped and the APIService gone are checked
 * where an uninstall makes them anyway, at no cost of repair: at the end of real-nodes.test.ts. A refused tunnel is not injected: the manager repairs the agent's attach permission
 * on the next event of its addon, so only the manager's absence keeps it refused, and doctor then rightly names the
 * manager first (the tunnel verdict is unit-tested in client/cli/doctor/agent.test.ts).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type BlockedRoute, blockRoute, nodePodRange } from '../../hack/localenv/blocked-routes.ts';
import { writeKubeconfig } from '../../hack/localenv/kubeconfig.ts';
import type { KubeClient, KubeObject } from '../../shared/kube/client.ts';
import { loadCertificateAuthority } from '../../shared/pki.ts';
import { kubectl } from '../support/kubectl.ts';
import { cliMain, describeRun, doctor, firstFails, firstFailure, type Run, scale } from './doctor-run.ts';
import { clientOf, kubeconfigOf, npmStartState } from './environment.ts';

const agentNamespace = 'open-cluster-management-agent-addon';
const viewer = 'doctor-e2e-viewer';
const gatewayApi = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways';
type ClusterGatewayView = KubeObject & { status?: { healthy?: boolean } };
type ManifestWorkView = KubeObject & {
  status?: {
    resourceStatus?: {
      manifests?: {
        resourceMeta: { kind?: string };
        statusFeedback?: { values?: { name: string; fieldValue: { integer?: number } }[] };
      }[];
    };
  };
};

/** Runs doctor until `done(run)` (each run is a fresh process, as a user would retry), or fails at the deadline. */
async function doctorUntil(
  args: string[],
  done: (run: Run) => boolean,
  what: string,
  timeoutMs: number,
): Promise<Run> {
  const deadline = Date.now() + timeoutMs;
  let last: Run | undefined;
  while (Date.now() < deadline) {
    last = await doctor(args);
    if (done(last)) return last;
    await new Promise((r) => setTimeout(r, 500));
  }
  assert.fail(
    `doctor ${args.join(' ')}: ${what} not seen within ${timeoutMs / 1000} s; last run: ${last ? describeRun(last) : 'none'}`,
  );
}

const passes = (run: Run) => run.code === 0;

/** Polls a cheap read of the environment (not doctor, a process per run) until it holds. */
async function until(what: string, holds: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await holds().catch(() => false))) {
    if (Date.now() > deadline) assert.fail(`${what}: not within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The pid of the kube-apiserver serving `server` (its --secure-port), from /proc. */
function apiserverPid(server: string): number {
  const port = new URL(server).port;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let args: string[];
    try {
      args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    if (args[0]?.endsWith('/kube-apiserver') && args.includes(`--secure-port=${port}`)) return Number(entry);
  }
  throw new Error(`no kube-apiserver process with --secure-port=${port}`);
}

describe('cluster-gateway doctor against npm start', { concurrency: false }, () => {
  let hub: KubeClient;
  let cluster1: KubeClient;
  let cluster3: KubeClient;
  const state = npmStartState();
  const undo: (() => Promise<void> | void)[] = [];

  before(async () => {
    hub = await clientOf('hub');
    cluster1 = await clientOf('cluster1');
    cluster3 = await clientOf('cluster3');
  });

  after(async () => {
    // Whatever a failed test left: put back in reverse order, every step tried.
    for (const step of undo.reverse()) await Promise.resolve(step()).catch(() => {});
    hub?.close();
    cluster1?.close();
    cluster3?.close();
  });

  test('passes on the healthy environment, every cluster checked from the hub down', async () => {
    const tableRun = new Promise<string>((resolve) => {
      const child = spawn(process.execPath, [cliMain, 'doctor', 'cluster3'], {
        env: { ...process.env, KUBECONFIG: kubeconfigOf('hub') },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      child.stdout.setEncoding('utf8').on('data', (c: string) => {
        out += c;
      });
      child.once('close', () => resolve(out));
    });
    const run = await doctorUntil([], passes, 'a healthy environment', 30_000);
    assert.equal(run.code, 0, describeRun(run));
    for (const cluster of ['cluster1', 'cluster2', 'cluster3']) {
      const names = run.checks.filter((c) => c.cluster === cluster).map((c) => c.name);
      assert.deepEqual(names, [
        'addon-enabled',
        'manifestwork-applied',
        'agent-running',
        'heartbeat-fresh',
        'tunnel-up',
        'proxy-permission',
        'proxied-healthz',
      ]);
    }
    assert.deepEqual(
      run.checks.filter((c) => !c.cluster).map((c) => c.name),
      [
        'apiservice-exists',
        'gateway-pods-ready',
        'apiservice-available',
        'apiservice-cabundle',
        'manager-leader',
        'manager-webhook',
        'clustermanagementaddon',
      ],
    );
    assert.ok(
      run.checks.every((c) => c.result === 'pass'),
      describeRun(run),
    );
    const healthz = run.checks.find((c) => c.name === 'proxied-healthz' && c.cluster === 'cluster3');
    assert.match(healthz?.message ?? '', /^ok in \d+ ms$/);
    // The table, off a terminal: PASS/FAIL words, no escape codes.
    const table = await tableRun;
    // The environment is shared: only the form is asserted here, the verdicts above.
    assert.match(table, /^(PASS|FAIL|SKIP) cluster3 +tunnel up +\S/m);
    assert.ok(!table.includes('\u001b['), 'no escape codes off a terminal');
    console.log(`doctor on 3 healthy clusters: ${run.ms} ms (process start included)`);
  });

  test('a caller without get clustergateways/proxy is told the missing permission and the commands; they work', async () => {
    // A hub user who may read ClusterGateways and nothing else (client certificate from the hub CA).
    const hubDir = path.join(state.stateDir, 'hub');
    const ca = await loadCertificateAuthority({
      cert: readFileSync(path.join(hubDir, 'ca.crt'), 'utf8'),
      key: readFileSync(path.join(hubDir, 'ca.key'), 'utf8'),
    });
    const client = await ca.issue({ commonName: viewer, organizations: [], usage: 'client' });
    const kubeconfig = writeKubeconfig(path.join(state.stateDir, `user-${viewer}.kubeconfig`), {
      name: 'hub',
      server: state.hub.server,
      caCert: ca.cert,
      client,
    });
    const rbac = '/apis/rbac.authorization.k8s.io/v1';
    undo.push(async () => {
      for (const name of [viewer, `cluster-gateway-proxy-${viewer}`]) {
        await hub.delete(`${rbac}/clusterrolebindings/${name}`);
        await hub.delete(`${rbac}/clusterroles/${name}`);
      }
    });
    await hub.create(`${rbac}/clusterroles`, {
      metadata: { name: viewer },
      rules: [
        { apiGroups: ['cluster.core.oam.dev'], resources: ['clustergateways'], verbs: ['get', 'list'] },
      ],
    });
    await hub.create(`${rbac}/clusterrolebindings`, {
      metadata: { name: viewer },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: viewer },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: viewer }],
    });

    const denied = await doctor(['cluster1'], kubeconfig);
    assert.equal(denied.code, 1, describeRun(denied));
    const first = firstFailure(denied);
    assert.equal(first?.name, 'proxy-permission', describeRun(denied));
    assert.match(
      first?.message ?? '',
      new RegExp(`${viewer} may not get clustergateways.cluster.core.oam.dev/proxy`),
    );
    assert.doesNotMatch(first?.message ?? '', /^refused \(403\)/);
    // Checks this user may not run are shown as not checked, not as failures.
    const apiservice = denied.checks.find((c) => c.name === 'apiservice-exists');
    assert.equal(apiservice?.result, 'skipped');
    assert.match(apiservice?.message ?? '', /you may not get apiservices/);

    // The printed fix, run by an admin, is what the user needed.
    const commands = (first?.fix ?? '').split('\n').filter((l) => l.startsWith('kubectl '));
    assert.equal(commands.length, 2, first?.fix);
    for (const command of commands) {
      await kubectl(kubeconfigOf('hub'), ...command.replace(/^kubectl /, '').split(' '));
    }
    const allowed = await doctor(['cluster1'], kubeconfig);
    assert.equal(allowed.code, 0, describeRun(allowed));
    assert.equal(allowed.checks.find((c) => c.name === 'proxy-permission')?.result, 'pass');
    assert.equal(allowed.checks.find((c) => c.name === 'proxied-healthz')?.result, 'pass');
  });

  test('agent stopped, heartbeat stale, the managed kube-apiserver stopped: each named first', async () => {
    const addonPath = (kind: string, name: string) => `/apis/${kind}/namespaces/cluster1/${name}`;
    const heartbeatAge = async () => {
      const lease = await hub.get<{ spec?: { renewTime?: string } } & KubeObject>(
        addonPath('coordination.k8s.io/v1', 'leases/cluster-gateway'),
      );
      return (Date.now() - Date.parse(lease.spec?.renewTime ?? '')) / 1000;
    };
    /** Available replicas of the agent, as its ManifestWork's status feedback says (absent: 0). */
    const agentReplicas = async () => {
      const works = await hub.list<ManifestWorkView>(
        `/apis/work.open-cluster-management.io/v1/namespaces/cluster1/manifestworks?labelSelector=${encodeURIComponent('open-cluster-management.io/addon-name=cluster-gateway')}`,
      );
      const values = works.items[0]?.status?.resourceStatus?.manifests?.find(
        (m) => m.resourceMeta.kind === 'Deployment',
      )?.statusFeedback?.values;
      // A Deployment at 0 omits status.replicas and availableReplicas, and the feedback then omits them.
      if (!values) return undefined;
      return values.find((v) => v.name === 'AvailableReplicas')?.fieldValue.integer ?? 0;
    };

    // The agent scaled to 0 (the work agent leaves it so for minutes): named before the heartbeat. First: the
    // work agent reports a change in seconds here, but is slow to after its apiserver was frozen.
    undo.push(() => scale(cluster1, agentNamespace, 'cluster-gateway-agent', 1));
    await scale(cluster1, agentNamespace, 'cluster-gateway-agent', 0);
    try {
      await until(
        "the agent's status feedback showing 0 replicas",
        async () => {
          return (await agentReplicas()) === 0;
        },
        40_000,
      );
      await until('the heartbeat of cluster1 stale', async () => (await heartbeatAge()) > 13, 30_000);
      const stopped = await doctor(['cluster1']);
      assert.ok(firstFails('agent-running', 'cluster1')(stopped), describeRun(stopped));
      const f = firstFailure(stopped);
      assert.match(f?.message ?? '', /scaled to 0/);
      assert.equal(f?.object, `deployment ${agentNamespace}/cluster-gateway-agent on cluster1`);
      assert.match(f?.fix ?? '', /scale deployment\/cluster-gateway-agent --replicas=1/);
      assert.equal(stopped.checks.find((c) => c.name === 'heartbeat-fresh')?.result, 'skipped');
    } finally {
      await scale(cluster1, agentNamespace, 'cluster-gateway-agent', 1);
    }
    // Back: its Deployment available in the feedback and its heartbeat fresh, before the next faults.
    await until(
      "the agent's status feedback and heartbeat back",
      async () => (await agentReplicas()) === 1 && (await heartbeatAge()) < 8,
      60_000,
    );

    // The agent of cluster1 runs but its route to the hub is refused: it cannot renew its heartbeat.
    const nodeIndex = state.managed.findIndex((m) => m.name === 'cluster1') + 1;
    const route: BlockedRoute = blockRoute(
      nodePodRange(nodeIndex),
      Number(new URL(state.hub.reachableServer).port),
    );
    undo.push(() => route.undo());
    try {
      await until('the heartbeat of cluster1 stale', async () => (await heartbeatAge()) > 13, 30_000);
      const stale = await doctor(['cluster1']);
      assert.ok(firstFails('heartbeat-fresh', 'cluster1')(stale), describeRun(stale));
      assert.match(
        firstFailure(stale)?.message ?? '',
        /last renewed its heartbeat .* ago \(stale after 12s\)/,
      );
      assert.match(firstFailure(stale)?.message ?? '', /the gateway reaches cluster1's kube-apiserver/);
      assert.equal(firstFailure(stale)?.object, 'lease cluster1/cluster-gateway');
      assert.match(firstFailure(stale)?.fix ?? '', /logs deploy\/cluster-gateway-agent/);
    } finally {
      route.undo();
    }

    // Its kube-apiserver frozen: the heartbeat stays stale, and now the gateway cannot reach it either.
    const pid = apiserverPid(state.managed.find((m) => m.name === 'cluster1')?.server ?? '');
    undo.push(() => {
      process.kill(pid, 'SIGCONT');
    });
    process.kill(pid, 'SIGSTOP');
    try {
      await until(
        "the gateway's prober finding cluster1 unhealthy",
        async () => (await hub.get<ClusterGatewayView>(`${gatewayApi}/cluster1`)).status?.healthy === false,
        30_000,
      );
      const down = await doctor(['cluster1']);
      assert.ok(firstFails('heartbeat-fresh', 'cluster1')(down), describeRun(down));
      assert.equal(firstFailure(down)?.object, 'the kube-apiserver of cluster1');
      assert.match(firstFailure(down)?.message ?? '', /the managed kube-apiserver is down or unreachable/);
      assert.match(firstFailure(down)?.fix ?? '', /kubectl get --raw \/readyz\?verbose {3}# on cluster1/);
    } finally {
      process.kill(pid, 'SIGCONT');
    }

    await doctorUntil(
      ['cluster1'],
      passes,
      'doctor passing after the agent and the kube-apiserver are back',
      60_000,
    );
  });
});

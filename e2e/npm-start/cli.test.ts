/**
 * The `cluster-gateway` CLI (client/cli/) run as a user runs it, a child process with Node 24 and KUBECONFIG set to
 * the hub's, against the npm start environment: `status` agrees with what the hub's objects say, `-o json` parses,
 * no escape codes off a terminal, usage errors exit 2; `kubectl cluster-gateway` works through kubectl's plugin
 * mechanism; and the kubeconfig `kubeconfig <cluster>` prints lets the real kubectl get, `logs -f` and exec on
 * cluster1 (dialled with a credential Secret) and cluster3 (reached only through its agent's tunnel), as the hub's
 * admin. `doctor` is tested in its own file.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { dump, load } from 'js-yaml';
import { binaryPath, repoRoot } from '../../hack/localenv/binaries.ts';
import type { EnvironmentState } from '../../hack/localenv/environment.ts';
import { waitFor } from '../../hack/localenv/wait.ts';
import { KubeClient, type KubeObject } from '../../shared/kube/client.ts';
import { loadKubeconfig } from '../../shared/kube/kubeconfig.ts';
import { kubectlResult } from '../support/kubectl.ts';
import { startWorkload, type Workload } from '../support/workload.ts';
import { clientOf, kubeconfigOf, npmStartClusters, npmStartState, tunnelOnlyCluster } from './environment.ts';

const cliMain = path.join(repoRoot, 'client', 'cli', 'main.ts');
const addonApi = '/apis/addon.open-cluster-management.io/v1alpha1';
const gatewayApi = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways';
const chartNamespace = 'open-cluster-management-addon';
// biome-ignore lint/suspicious/noControlCharactersInRegex: escape codes are what is looked for
const escapeCode = /\u001b\[/;

type Condition = { type: string; status: string; reason?: string };
type Mca = KubeObject & { status?: { conditions?: Condition[] } };
type Gateway = KubeObject & { spec?: { access?: { endpoint?: { type?: string } } } };
type Lease = KubeObject & { spec?: { holderIdentity?: string } };

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program to its end (killed after 30 s): exit code and output. */
function runProgram(
  command: string,
  args: string[],
  env: Record<string, string | undefined>,
): Promise<Result> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      stdout += c;
    });
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      stderr += c;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr });
    });
  });
}

/** `kubectl logs -f`, stopped once it has printed `lines` lines matching `pattern` (or after `timeoutMs`). */
function followLogs(kubeconfig: string, args: string[], pattern: RegExp, lines: number, timeoutMs = 15_000) {
  return new Promise<string[]>((resolve, reject) => {
    const child: ChildProcess = spawn(binaryPath('kubectl'), [`--kubeconfig=${kubeconfig}`, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    const seen = () => out.split('\n').filter((l) => pattern.test(l));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.stdout?.setEncoding('utf8').on('data', (c: string) => {
      out += c;
      if (seen().length >= lines) child.kill('SIGTERM');
    });
    child.stderr?.setEncoding('utf8').on('data', (c: string) => {
      err += c;
    });
    child.once('close', () => {
      clearTimeout(timer);
      const got = seen();
      if (got.length >= lines) resolve(got.slice(0, lines));
      else reject(new Error(`kubectl ${args.join(' ')}: ${got.length} of ${lines} lines (${err.trim()})`));
    });
  });
}

/** A kubectl-style table as objects keyed by its headers (no cell is empty or has spaces in this table). */
function parseTable(text: string): Record<string, string>[] {
  const [header, ...rows] = text.trimEnd().split('\n');
  const names = (header ?? '').trim().split(/\s{2,}/);
  return rows.map((row) => {
    const cells = row.trim().split(/\s{2,}/);
    return Object.fromEntries(names.map((n, i) => [n, cells[i] ?? '']));
  });
}

describe('cluster-gateway CLI: status and kubeconfig against the npm start environment', {
  concurrency: false,
}, () => {
  let state: EnvironmentState;
  let hub: KubeClient;
  let hubKubeconfig: string;
  let work: string;
  let workloads: Promise<Workload[]>;
  const spokes: KubeClient[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  const kubeconfigClusters = ['cluster1', tunnelOnlyCluster];

  const cli = (args: string[], env: Record<string, string | undefined> = {}) =>
    runProgram(process.execPath, [cliMain, ...args], {
      ...process.env,
      KUBECONFIG: hubKubeconfig,
      NO_COLOR: undefined,
      ...env,
    });

  before(async () => {
    state = npmStartState();
    hubKubeconfig = kubeconfigOf('hub', state);
    hub = await clientOf('hub', state);
    work = mkdtempSync(path.join(os.tmpdir(), 'cg-cli-'));
    // The pods `logs -f` and exec need, started now so that they are Ready by the time the kubeconfig test runs.
    workloads = Promise.all(
      kubeconfigClusters.map(async (c) => {
        const spoke = await clientOf(c, state);
        spokes.push(spoke);
        return startWorkload(spoke, { name: 'cg-cli', ...(state.image ? { image: state.image } : {}) });
      }),
    );
    workloads.catch(() => {}); // awaited (and reported) by the test that uses them
  });

  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    await Promise.allSettled((await workloads.catch(() => [])).map((w) => w.stop()));
    hub?.close();
    for (const s of spokes) s.close();
    rmSync(work, { recursive: true, force: true });
  });

  test('status: a row per managed cluster, agreeing with the MCA, the ClusterGateway and the tunnel Lease; no escape codes off a terminal', async () => {
    // AGENT reads each agent Deployment's rollout from its ManifestWork's status feedback, which the work
    // agent refreshes on its own period: it can still say "(rolling out)" when npm start is done waiting for
    // the addons (seen in CI). Wait for every agent to be rolled out, as a user would run status again.
    await waitFor(
      'every agent rolled out in its ManifestWork feedback',
      async () => {
        const json = await cli(['status', '-o', 'json']);
        const data = JSON.parse(json.stdout) as { clusters: { agent?: { rolledOut?: boolean } }[] };
        return data.clusters.every((c) => c.agent?.rolledOut === true);
      },
      { timeoutMs: 120_000, intervalMs: 1000 },
    );
    const started = Date.now();
    const out = await cli(['status']);
    const took = Date.now() - started;
    assert.equal(out.code, 0, out.stderr);
    assert.doesNotMatch(out.stdout + out.stderr, escapeCode, 'not a terminal: no colour');
    const rows = parseTable(out.stdout);
    assert.deepEqual(
      rows.map((r) => r.NAME),
      [...npmStartClusters],
    );
    assert.deepEqual(Object.keys(rows[0] ?? {}), [
      'NAME',
      'AVAILABLE',
      'REASON',
      'AGENT',
      'ENDPOINT',
      'TUNNEL',
      'REPLICA',
      'HEARTBEAT',
      'HEALTHY',
      'HEALTHZ',
    ]);
    const tag = (state.image ?? '').split(':').at(-1);
    for (const row of rows) {
      const c = row.NAME as string;
      const [mca, gateway] = await Promise.all([
        hub.get<Mca>(`${addonApi}/namespaces/${c}/managedclusteraddons/cluster-gateway`),
        hub.get<Gateway>(`${gatewayApi}/${c}`),
      ]);
      const available = mca.status?.conditions?.find((x) => x.type === 'Available');
      assert.equal(row.AVAILABLE, available?.status, `${c}: AVAILABLE`);
      assert.equal(row.REASON, available?.reason, `${c}: REASON`);
      assert.equal(row.ENDPOINT, gateway.spec?.access?.endpoint?.type, `${c}: ENDPOINT`);
      assert.equal(row.AGENT, tag, `${c}: AGENT is the tag of the image npm start built`);
      assert.equal(row.HEALTHY, 'true', `${c}: HEALTHY`);
      assert.match(row.HEALTHZ ?? '', /^\d+ms$/, `${c}: HEALTHZ is a round trip time`);
      assert.match(row.HEARTBEAT ?? '', /^\d+s$/, `${c}: HEARTBEAT is seconds old`);
    }
    const lease = await hub.get<Lease>(
      `/apis/coordination.k8s.io/v1/namespaces/${chartNamespace}/leases/cluster-gateway-tunnel-${tunnelOnlyCluster}`,
    );
    const tunnelRow = rows.find((r) => r.NAME === tunnelOnlyCluster);
    assert.equal(tunnelRow?.TUNNEL, 'Connected');
    assert.ok(lease.spec?.holderIdentity, 'the tunnel Lease names its holder');
    assert.equal(tunnelRow?.REPLICA, lease.spec?.holderIdentity, 'REPLICA is the holder of the tunnel Lease');
    process.stderr.write(`# status took ${took} ms (process start included)\n`);
  });

  test('status -o json: parses, the same data in full, times RFC 3339 and ages in seconds; NO_COLOR leaves no escape codes', async () => {
    const out = await cli(['status', '-o', 'json'], { NO_COLOR: '1' });
    assert.equal(out.code, 0, out.stderr);
    assert.doesNotMatch(out.stdout + out.stderr, escapeCode);
    const data = JSON.parse(out.stdout) as {
      time: string;
      clusters: {
        name: string;
        addon: { available: string; reason: string };
        endpointType: string;
        tunnel: { connected: boolean; replica: string; since: string; sinceSeconds: number };
        heartbeat: { renewTime: string; ageSeconds: number };
        healthz: { ok: boolean; milliseconds: number };
        agent: { image: string };
      }[];
      problems: unknown[];
    };
    assert.match(data.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.deepEqual(
      data.clusters.map((c) => c.name),
      [...npmStartClusters],
    );
    assert.deepEqual(data.problems, [], 'the admin may list everything status reads');
    for (const c of data.clusters) {
      assert.equal(c.agent.image, state.image, `${c.name}: the full image`);
      assert.equal(c.healthz.ok, true, `${c.name}: healthz`);
      assert.equal(typeof c.healthz.milliseconds, 'number');
      assert.ok(!Number.isNaN(Date.parse(c.heartbeat.renewTime)), `${c.name}: heartbeat renewTime is a time`);
      assert.equal(typeof c.heartbeat.ageSeconds, 'number');
      assert.equal(typeof c.tunnel.connected, 'boolean');
    }
    // The clusters reached through the tunnel (healthy, so connected) say since when, and through which replica.
    for (const c of data.clusters.filter((x) => x.endpointType === 'ClusterProxy')) {
      assert.equal(c.tunnel.connected, true, `${c.name}: tunnel`);
      assert.ok(c.tunnel.replica, `${c.name}: replica`);
      assert.ok(!Number.isNaN(Date.parse(c.tunnel.since)), `${c.name}: connected since a time`);
      assert.equal(typeof c.tunnel.sinceSeconds, 'number');
    }
  });

  test('status as a user who may not list everything: the columns say forbidden, a note names each missing permission, exit 0', async () => {
    const user = 'cg-cli-limited';
    const role = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: user },
      rules: [
        {
          apiGroups: ['cluster.core.oam.dev'],
          resources: ['clustergateways', 'clustergateways/proxy'],
          verbs: ['get', 'list'],
        },
        {
          apiGroups: ['cluster.open-cluster-management.io'],
          resources: ['managedclusters'],
          verbs: ['list'],
        },
      ],
    };
    const binding = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: user },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: user },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
    };
    cleanups.push(async () => {
      await hub.delete(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${user}`);
      await hub.delete(`/apis/rbac.authorization.k8s.io/v1/clusterroles/${user}`);
    });
    await hub.apply(`/apis/rbac.authorization.k8s.io/v1/clusterroles/${user}`, role, 'e2e-cli');
    await hub.apply(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${user}`, binding, 'e2e-cli');
    // The hub admin acting as the user (kubectl's --as, kept in the kubeconfig's user entry).
    const doc = load(readFileSync(hubKubeconfig, 'utf8')) as { users: { user: Record<string, unknown> }[] };
    for (const u of doc.users) u.user.as = user;
    const limited = path.join(work, 'limited.kubeconfig');
    writeFileSync(limited, dump(doc), { mode: 0o600 });
    const asUser = KubeClient.fromLoadedConfig(loadKubeconfig(limited));
    try {
      await waitFor('the RBAC of the limited user in effect', () =>
        asUser.list(`${gatewayApi}`).then(
          () => true,
          () => false,
        ),
      );
    } finally {
      asUser.close();
    }
    const out = await cli(['status'], { KUBECONFIG: limited });
    assert.equal(out.code, 0, out.stderr);
    const rows = parseTable(out.stdout);
    assert.deepEqual(
      rows.map((r) => r.NAME),
      [...npmStartClusters],
    );
    for (const row of rows) {
      assert.equal(row.AVAILABLE, 'forbidden', `${row.NAME}: AVAILABLE`);
      assert.equal(row.AGENT, 'forbidden', `${row.NAME}: AGENT`);
      assert.equal(row.HEARTBEAT, 'forbidden', `${row.NAME}: HEARTBEAT`);
      assert.equal(row.TUNNEL, 'Connected', `${row.NAME}: TUNNEL from the ClusterGateway's status`);
      assert.match(row.HEALTHZ ?? '', /^\d+ms$/, `${row.NAME}: HEALTHZ, allowed`);
    }
    for (const permission of [
      'list managedclusteraddons.addon.open-cluster-management.io in all namespaces',
      'list manifestworks.work.open-cluster-management.io in all namespaces',
      'list leases.coordination.k8s.io in all namespaces',
    ]) {
      assert.ok(
        out.stderr.includes(`missing permission ${permission}`),
        `names ${permission}: ${out.stderr}`,
      );
    }
    assert.doesNotMatch(out.stderr, /\n\s+at /, 'no stack trace');
  });

  test('a bad flag and a missing kubeconfig exit 2 with one line; --version exits 0', async () => {
    // (Each usage error's message and code: client/cli/main.test.ts; here, the process's exit code.)
    const [badFlag, noHub, version] = await Promise.all([
      cli(['status', '--bogus']),
      cli(['status'], { KUBECONFIG: path.join(work, 'missing.kubeconfig') }),
      cli(['--version']),
    ]);
    assert.equal(badFlag.code, 2);
    assert.match(badFlag.stderr, /unknown option '--bogus'/);
    assert.equal(noHub.code, 2);
    assert.match(noHub.stderr, /^error: .*missing\.kubeconfig/m);
    assert.doesNotMatch(noHub.stderr, /\n\s+at /, 'no stack trace');
    assert.equal(version.code, 0);
    assert.match(version.stdout, /^\d+\.\d+\.\d+/);
  });

  test('kubectl cluster-gateway: the CLI as a kubectl plugin (kubectl-cluster_gateway on PATH)', async () => {
    // As npm installs it: an executable named kubectl-cluster_gateway; here a script running the CLI with Node 24,
    // through a link whose name tells the CLI how it was invoked.
    const bin = path.join(work, 'bin');
    mkdirSync(path.join(bin, 'lib'), { recursive: true });
    const linked = path.join(bin, 'lib', 'kubectl-cluster_gateway.ts');
    symlinkSync(cliMain, linked);
    const plugin = path.join(bin, 'kubectl-cluster_gateway');
    writeFileSync(plugin, `#!/bin/sh\nexec '${process.execPath}' '${linked}' "$@"\n`);
    chmodSync(plugin, 0o755);
    const env = {
      ...process.env,
      PATH: `${bin}${path.delimiter}${process.env.PATH}`,
      KUBECONFIG: hubKubeconfig,
    };
    const [help, status] = await Promise.all([
      runProgram(binaryPath('kubectl'), ['cluster-gateway', '--help'], env),
      runProgram(binaryPath('kubectl'), ['cluster-gateway', 'status'], env),
    ]);
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /^Usage: kubectl cluster-gateway /);
    assert.equal(status.code, 0, status.stderr);
    assert.deepEqual(
      parseTable(status.stdout).map((r) => r.NAME),
      [...npmStartClusters],
    );
  });

  test('kubeconfig <cluster>: plain kubectl get, logs -f and exec through the gateway as the hub admin, on cluster1 and the tunnel-only cluster3', async () => {
    const hubUser = (
      load(readFileSync(hubKubeconfig, 'utf8')) as { users: { name: string; user: unknown }[] }
    ).users;
    const files = new Map<string, string>();
    const printed = await Promise.all(kubeconfigClusters.map((c) => cli(['kubeconfig', c])));
    for (const [i, c] of kubeconfigClusters.entries()) {
      const out = printed[i] as Result;
      assert.equal(out.code, 0, out.stderr);
      const doc = load(out.stdout) as {
        'current-context': string;
        clusters: { cluster: { server: string } }[];
        users: { name: string; user: unknown }[];
      };
      assert.equal(doc['current-context'], `hub@${c}`);
      assert.equal(doc.clusters[0]?.cluster.server, `${state.hub.server}${gatewayApi}/${c}/proxy`);
      assert.deepEqual(doc.users, hubUser, 'the hub user entry, copied as is, and no other credential');
      const file = path.join(work, `${c}.kubeconfig`);
      writeFileSync(file, out.stdout, { mode: 0o600 });
      files.set(c, file);
    }
    const ready = await workloads;
    await Promise.all(
      kubeconfigClusters.map(async (c, i) => {
        const file = files.get(c) as string;
        const { pod } = ready[i] as Workload;
        const pods = await kubectlResult(file, ['get', 'pods', '-A']);
        assert.equal(pods.code, 0, `${c}: get pods -A: ${pods.stderr}`);
        assert.match(
          pods.stdout,
          new RegExp(`\\n${pod.namespace}\\s+${pod.name}\\s+1/1\\s+Running`),
          `${c}: get pods -A`,
        );
        // Following: with --tail=1 the third line can only have arrived while kubectl was streaming.
        const lines = await followLogs(
          file,
          ['-n', pod.namespace, 'logs', '-f', '--tail=1', pod.name],
          /^log line \d+$/,
          3,
        );
        const numbers = lines.map((l) => Number(l.split(' ').at(-1)));
        assert.deepEqual(
          numbers,
          [numbers[0], (numbers[0] ?? 0) + 1, (numbers[0] ?? 0) + 2],
          `${c}: logs -f in order`,
        );
        const exec = await kubectlResult(file, [
          '-n',
          pod.namespace,
          'exec',
          pod.name,
          '--',
          'echo',
          `hello ${c}`,
        ]);
        assert.equal(exec.code, 0, `${c}: exec: ${exec.stderr}`);
        assert.equal(exec.stdout, `hello ${c}\n`);
      }),
    );
  });

  test('kubeconfig nosuch: exit 2, and the message says how to list the clusters', async () => {
    const out = await cli(['kubeconfig', 'nosuch']);
    assert.equal(out.code, 2);
    assert.equal(out.stdout, '', 'no kubeconfig printed');
    assert.equal(out.stderr, 'error: no ClusterGateway nosuch: kubectl get clustergateways lists them\n');
  });
});

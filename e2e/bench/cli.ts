/**
 * CLI benchmark (`npm run bench:cli`): how long the installed `cluster-gateway` takes to start, and to answer
 * `status` on a hub with 2 managed clusters and with --clusters more (default 1,000).
 *
 * Runs the CLI as the package ships it (dist/client/cli/main.js, built first with hack/build-package.ts: the
 * compiled JavaScript an `npm install` gets), each run a fresh process with Node 24 under /usr/bin/time, which
 * gives its wall time and peak RSS. `--help` is also run from the repository's TypeScript (type stripping), for
 * comparison. The first run of each row is a warm-up and is not counted (the files are then in the page cache, as
 * for a user's second command).
 *
 * The hub is bench:scale's (e2e/bench/scale.ts): its own local environment in .local/bench-cli (kube-apiservers,
 * etcd, OCM's hub and agents for cluster1 and cluster2, the gateway as a process on this machine). What `status`
 * lists for a cluster is written straight into the hub, for cluster1 and cluster2 first, then for each added
 * cluster: a ManagedCluster (accepted, joined, available, with cluster1's URL and CA, so each added cluster's
 * proxied /healthz reaches cluster1's kube-apiserver) and its token Secret, as bench:scale registers them; and as
 * the addon leaves a healthy cluster, the ManagedClusterAddOn `cluster-gateway` with its conditions, the agent's
 * heartbeat Lease, and the deploy ManifestWork as the addon manager renders it (manager/addon/deploy), with the
 * per-manifest status the work agent feeds back. No agent runs for the added clusters and none is needed: `status`
 * only reads these objects and times the proxied /healthz. (The ManagedClusterAddOns carry no `registrations`: on
 * cluster1 and cluster2 OCM's registration agent would act on them.)
 *
 * Flags: --clusters=1000 (0: 2 clusters only) --runs=10 --help-runs=20 --keep
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../../hack/localenv/binaries.ts';
import { startEnvironment } from '../../hack/localenv/environment.ts';
import { credentialNamespace } from '../../hack/localenv/gateway.ts';
import { defineAddon } from '../../manager/addon/core/addon.ts';
import { agentValues } from '../../manager/addon/deploy/deployment-config.ts';
import { deployWork } from '../../manager/addon/deploy/manifest-work.ts';
import type { KubeClient, KubeObject } from '../../shared/kube/client.ts';
import { percentile } from './measure.ts';

const stateDir = path.join(repoRoot, '.local', 'bench-cli');
const distMain = path.join(repoRoot, 'dist', 'client', 'cli', 'main.js');
const sourceMain = path.join(repoRoot, 'client', 'cli', 'main.ts');
const benchLabel = 'bench.cluster-gateway.local/cli';
const managedClusters = '/apis/cluster.open-cluster-management.io/v1/managedclusters';
const addonApi = '/apis/addon.open-cluster-management.io/v1alpha1';
const workApi = '/apis/work.open-cluster-management.io/v1';
const addonName = 'cluster-gateway';
const addonNameLabel = 'open-cluster-management.io/addon-name';

interface Flags {
  clusters: number;
  runs: number;
  helpRuns: number;
  keep: boolean;
}

function parseFlags(argv: string[]): Flags {
  const flags: Flags = { clusters: 1000, runs: 10, helpRuns: 20, keep: false };
  for (const arg of argv) {
    const [name, value = ''] = arg.replace(/^--/, '').split('=', 2) as [string, string | undefined];
    const count = (v: string, min: number) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < min) throw new Error(`bad value in ${arg}: an integer >= ${min}`);
      return n;
    };
    if (name === 'keep') flags.keep = true;
    else if (name === 'clusters') flags.clusters = count(value, 0);
    else if (name === 'runs') flags.runs = count(value, 1);
    else if (name === 'help-runs') flags.helpRuns = count(value, 1);
    else throw new Error(`unknown flag ${arg}; use --clusters=N --runs=N --help-runs=N --keep`);
  }
  return flags;
}

const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Run {
  ms: number;
  rssMb: number;
  stdout: string;
}

/** One CLI process to its end under /usr/bin/time: wall time (ms, measured here) and peak RSS (MB). */
function runCli(args: string[], env: NodeJS.ProcessEnv): Promise<Run> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn('/usr/bin/time', ['-f', 'peak-rss-kb=%M', process.execPath, ...args], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      stdout += c;
    });
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      stderr += c;
    });
    child.once('error', reject);
    child.once('close', (code) => {
      const ms = performance.now() - started;
      const rss = /peak-rss-kb=(\d+)/.exec(stderr);
      if (code !== 0 || !rss) {
        reject(new Error(`${args.join(' ')} exited ${code}:\n${stderr.slice(-2000)}`));
        return;
      }
      resolve({ ms, rssMb: Number(rss[1]) / 1024, stdout });
    });
  });
}

interface Row {
  label: string;
  runs: number;
  p50: number;
  p95: number;
  rssP50: number;
  rssMax: number;
  /** What `check` found worth saying, e.g. rows without a /healthz time. */
  notes: string[];
}

/** `runs` timed runs after one warm-up; `check` looks at each run's output and may return a note. */
async function measure(
  label: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  runs: number,
  check: (run: Run) => string | undefined = () => undefined,
): Promise<Row> {
  log(`${label}: 1 warm-up + ${runs} runs`);
  check(await runCli(args, env));
  const results: Run[] = [];
  const notes = new Set<string>();
  for (let i = 0; i < runs; i++) {
    const run = await runCli(args, env);
    const note = check(run);
    if (note) notes.add(note);
    results.push(run);
  }
  const ms = Float64Array.from(results.map((r) => r.ms)).sort();
  const rss = Float64Array.from(results.map((r) => r.rssMb)).sort();
  return {
    label,
    runs,
    p50: percentile(ms, 50),
    p95: percentile(ms, 95),
    rssP50: percentile(rss, 50),
    rssMax: rss[rss.length - 1] ?? Number.NaN,
    notes: [...notes],
  };
}

/**
 * `status` printed a header and one row per cluster (else the run does not count: an error), each with its proxied
 * /healthz time; a row without one (timeout, unavailable...) is noted, not an error: the time is still the answer's.
 */
function statusRows(expected: number) {
  return (run: Run): string | undefined => {
    const lines = run.stdout.trimEnd().split('\n');
    const rows = lines.slice(1);
    if (!lines[0]?.startsWith('NAME') || rows.length !== expected)
      throw new Error(`status printed ${rows.length} rows, not ${expected}:\n${run.stdout.slice(0, 2000)}`);
    const failed = rows.filter((r) => !/\s\d+ms\s*$/.test(r));
    return failed.length > 0 ? `${failed.length} rows without a /healthz time, e.g. ${failed[0]}` : undefined;
  };
}

// --- the hub's objects ---------------------------------------------------------------------------

type Template = { url: string; caBundle: string; tokenSecret: KubeObject & { data: Record<string, string> } };

async function clusterTemplate(hub: KubeClient): Promise<Template> {
  const tokenSecret = await hub.get<Template['tokenSecret']>(
    `/api/v1/namespaces/${credentialNamespace}/secrets/cluster1`,
  );
  const mc = await hub.get<
    KubeObject & { spec: { managedClusterClientConfigs: { url: string; caBundle: string }[] } }
  >(`${managedClusters}/cluster1`);
  const config = mc.spec.managedClusterClientConfigs[0];
  if (!config) throw new Error('ManagedCluster cluster1 has no managedClusterClientConfigs');
  return { url: config.url, caBundle: config.caBundle, tokenSecret };
}

const addon = defineAddon({
  addonName,
  displayName: 'Cluster Gateway',
  description: 'Multi-cluster Kubernetes API gateway',
  agentImage: `ghcr.io/oam-dev/cluster-gateway-ts:${
    (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version
  }`,
  agentInstallNamespace: 'open-cluster-management-agent-addon',
  namespace: 'open-cluster-management-addon',
  healthMode: 'Customized',
  installPlacements: [],
  credentialNamespace,
});

const condition = (type: string, reason: string, message: string, now: string) => ({
  type,
  status: 'True',
  reason,
  message,
  lastTransitionTime: now,
});

/** Creates `obj`, or leaves the one already there (e.g. a cluster's namespace, made by OCM's registration controller). */
async function ensure(hub: KubeClient, collection: string, obj: KubeObject): Promise<void> {
  try {
    await hub.create(collection, obj);
  } catch (err) {
    if ((err as { code?: number }).code !== 409) throw err;
  }
}

/** What a healthy addon leaves on the hub for `cluster`: ManagedClusterAddOn, heartbeat Lease, deploy ManifestWork. */
async function writeAddonObjects(hub: KubeClient, cluster: string): Promise<void> {
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const labels = { [benchLabel]: 'true' };
  await ensure(hub, '/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: cluster, labels },
  } as KubeObject);
  const mca = (await hub.create(`${addonApi}/namespaces/${cluster}/managedclusteraddons`, {
    apiVersion: 'addon.open-cluster-management.io/v1alpha1',
    kind: 'ManagedClusterAddOn',
    metadata: { name: addonName, namespace: cluster, labels },
    spec: { installNamespace: 'open-cluster-management-agent-addon' },
  } as KubeObject)) as KubeObject & { metadata: { name: string; namespace: string; uid: string } };
  await hub.mergePatch(`${addonApi}/namespaces/${cluster}/managedclusteraddons/${addonName}/status`, {
    status: {
      namespace: 'open-cluster-management-agent-addon',
      conditions: [
        condition(
          'RegistrationApplied',
          'SetPermissionApplied',
          'Registration of the addon agent is configured',
          now,
        ),
        condition('ClusterCertificateRotated', 'ClientCertificateUpdated', 'client certificate rotated', now),
        condition(
          'ManifestApplied',
          'AddonManifestApplied',
          'manifests of addon are applied successfully',
          now,
        ),
        condition('Available', 'AgentAvailable', 'the agent renews its heartbeat and its tunnel is up', now),
      ],
    },
  });
  await ensure(hub, `/apis/coordination.k8s.io/v1/namespaces/${cluster}/leases`, {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: addonName, namespace: cluster, labels: { ...labels, [addonNameLabel]: addonName } },
    spec: {
      holderIdentity: `cluster-gateway-agent-${cluster}`,
      leaseDurationSeconds: 3600,
      renewTime: new Date().toISOString().replace('Z', '000Z'),
    },
  } as KubeObject);
  const work = deployWork(addon, mca as never, agentValues(addon, mca as never, undefined), undefined);
  work.metadata.labels = { ...work.metadata.labels, ...labels };
  await ensure(hub, `${workApi}/namespaces/${cluster}/manifestworks`, work as KubeObject);
  // The work agent's report: every manifest applied and available, the Deployment's rollout fed back.
  const manifests = (work.spec?.workload?.manifests ?? []) as (KubeObject & { kind: string })[];
  const integer = (name: string) => ({ name, fieldValue: { type: 'Integer', integer: 1 } });
  await hub.mergePatch(`${workApi}/namespaces/${cluster}/manifestworks/${work.metadata.name}/status`, {
    status: {
      conditions: [
        condition('Applied', 'AppliedManifestWorkComplete', 'Apply manifest work complete', now),
        condition('Available', 'ResourcesAvailable', 'All resources are available', now),
      ],
      resourceStatus: {
        manifests: manifests.map((m, ordinal) => ({
          resourceMeta: {
            ordinal,
            kind: m.kind,
            name: m.metadata?.name,
            namespace: m.metadata?.namespace ?? '',
            version: m.apiVersion?.split('/').pop(),
          },
          conditions: [
            condition('Applied', 'AppliedManifestComplete', 'Apply manifest complete', now),
            condition('Available', 'ResourceAvailable', 'Resource is available', now),
            ...(m.kind === 'Deployment'
              ? [condition('StatusFeedbackSynced', 'StatusFeedbackSynced', '', now)]
              : []),
          ],
          ...(m.kind === 'Deployment'
            ? {
                statusFeedback: {
                  values: [
                    'ReadyReplicas',
                    'Replicas',
                    'AvailableReplicas',
                    'Generation',
                    'ObservedGeneration',
                    'UpdatedReplicas',
                  ].map(integer),
                },
              }
            : {}),
        })),
      },
    },
  });
}

/** As bench:scale registers its clusters: ManagedCluster (accepted, joined, available) and a token Secret. */
async function registerCluster(hub: KubeClient, template: Template, name: string): Promise<void> {
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  await hub.create(managedClusters, {
    apiVersion: 'cluster.open-cluster-management.io/v1',
    kind: 'ManagedCluster',
    metadata: { name, labels: { [benchLabel]: 'true' } },
    // A lease of an hour: no agent renews these, and the hub marks a cluster Unknown 5 durations after.
    spec: {
      hubAcceptsClient: true,
      leaseDurationSeconds: 3600,
      managedClusterClientConfigs: [{ url: template.url, caBundle: template.caBundle }],
    },
  } as KubeObject);
  await hub.mergePatch(`${managedClusters}/${name}/status`, {
    status: {
      conditions: [
        condition('ManagedClusterJoined', 'ManagedClusterJoined', 'registered by the CLI benchmark', now),
        condition(
          'ManagedClusterConditionAvailable',
          'ManagedClusterAvailable',
          'registered by the CLI benchmark',
          now,
        ),
      ],
    },
  });
  const secret = template.tokenSecret;
  await hub.create(`/api/v1/namespaces/${credentialNamespace}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name,
      namespace: credentialNamespace,
      labels: { ...secret.metadata?.labels, [benchLabel]: 'true' },
    },
    type: secret.type,
    data: secret.data,
  } as KubeObject);
}

async function inParallel(
  names: string[],
  work: (name: string) => Promise<void>,
  concurrency = 16,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < names.length) await work(names[next++] as string);
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

/** Until the hub's aggregated API lists `expected` ClusterGateways, all healthy. */
async function untilGatewaysHealthy(hub: KubeClient, expected: number): Promise<void> {
  const deadline = performance.now() + 600_000;
  for (;;) {
    const list = await hub
      .get<{ items: { status?: { healthy?: boolean } }[] }>(
        '/apis/cluster.core.oam.dev/v1alpha1/clustergateways',
      )
      .catch(() => ({ items: [] }));
    const healthy = list.items.filter((i) => i.status?.healthy === true).length;
    if (list.items.length === expected && healthy === expected) return;
    if (performance.now() > deadline)
      throw new Error(
        `the gateway lists ${list.items.length} clusters, ${healthy} healthy; waited for ${expected}`,
      );
    await sleep(250);
  }
}

// -------------------------------------------------------------------------------------------------

const flags = parseFlags(process.argv.slice(2));
log('building the package (node hack/build-package.ts)');
const built = spawnSync(process.execPath, [path.join(repoRoot, 'hack', 'build-package.ts')], {
  cwd: repoRoot,
  stdio: 'inherit',
});
if (built.status !== 0) process.exit(1);

const env = await startEnvironment({
  stateDir,
  managedClusters: ['cluster1', 'cluster2'],
  log: (line) => process.stderr.write(`[bench env] ${line}\n`),
}).catch((err: Error) => {
  console.error(`\nthe environment did not start: ${err.message}`);
  process.exit(1);
});

let failed = false;
try {
  const hub = env.hub.client;
  const cliEnv: NodeJS.ProcessEnv = { ...process.env, KUBECONFIG: env.hub.kubeconfig, NO_COLOR: '1' };
  delete cliEnv.NODE_COMPILE_CACHE; // a user's shell has none
  const rows: Row[] = [];
  const helpCheck = (run: Run) => {
    if (!/^Usage: cluster-gateway /m.test(run.stdout)) throw new Error(`--help printed:\n${run.stdout}`);
    return undefined;
  };
  rows.push(
    await measure('`--help` (dist/, as installed)', [distMain, '--help'], cliEnv, flags.helpRuns, helpCheck),
  );
  rows.push(
    await measure(
      '`--help` (client/ TypeScript, type stripping)',
      [sourceMain, '--help'],
      cliEnv,
      flags.helpRuns,
      helpCheck,
    ),
  );

  log('cluster1 and cluster2: the addon objects');
  await inParallel(['cluster1', 'cluster2'], (name) => writeAddonObjects(hub, name));
  await untilGatewaysHealthy(hub, 2);
  rows.push(await measure('`status`, 2 clusters', [distMain, 'status'], cliEnv, flags.runs, statusRows(2)));

  if (flags.clusters > 0) {
    const names = Array.from({ length: flags.clusters }, (_, i) => `cli-${String(i).padStart(5, '0')}`);
    log(`registering ${flags.clusters} clusters with their addon objects`);
    const started = performance.now();
    const template = await clusterTemplate(hub);
    await inParallel(names, async (name) => {
      await registerCluster(hub, template, name);
      await writeAddonObjects(hub, name);
    });
    log(
      `registered in ${((performance.now() - started) / 1000).toFixed(1)} s; waiting until all are healthy`,
    );
    const total = flags.clusters + 2;
    await untilGatewaysHealthy(hub, total);
    rows.push(
      await measure(
        `\`status\`, ${total.toLocaleString('en')} clusters`,
        [distMain, 'status'],
        cliEnv,
        flags.runs,
        statusRows(total),
      ),
    );
  }

  const ms = (v: number) => v.toFixed(0);
  console.log(
    [
      '',
      '| command | runs | p50 (ms) | p95 (ms) | peak RSS p50 / max (MB) |',
      '|:--|--:|--:|--:|--:|',
      ...rows.map(
        (r) =>
          `| ${r.label} | ${r.runs} | ${ms(r.p50)} | ${ms(r.p95)} | ${r.rssP50.toFixed(0)} / ${r.rssMax.toFixed(0)} |`,
      ),
      '',
      ...rows.flatMap((r) => r.notes.map((n) => `note, ${r.label}: ${n}`)),
    ].join('\n'),
  );
  if (flags.keep) {
    console.log(`--keep: the environment stays up until Ctrl-C (hub kubeconfig ${env.hub.kubeconfig}).`);
    await new Promise(() => {});
  }
} catch (err) {
  failed = true;
  console.error(`\nbenchmark failed: ${(err as Error).stack ?? err}`);
} finally {
  if (!flags.keep || failed) {
    await env.stop();
    process.exit(failed ? 1 : 0);
  }
}

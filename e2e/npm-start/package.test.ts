/**
 * The npm package as a user gets it: `npm pack` (its prepack builds dist/ with hack/build-package.ts) makes a
 * tarball that holds the library, the CLI, the examples, docs/client.md and docs/cli.md, and nothing of the
 * repository's tests, e2e, hack, manager or agent. Installed with npm into an empty folder (with
 * @kubernetes/client-node, the library's peer dependency), its `cluster-gateway` runs from node_modules/.bin
 * (`--help`, and `status` against the npm start environment's hub: a command's code loads only when it runs),
 * `kubectl cluster-gateway` runs through kubectl's plugin lookup, and examples/list-pods.ts, copied out of the
 * installed package and run there with Node 24, imports 'cluster-gateway' from that install and lists the pods of
 * every managed cluster of the hub.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { binaryPath, repoRoot } from '../../hack/localenv/binaries.ts';
import type { KubeObject } from '../../shared/kube/client.ts';
import { clientOf, kubeconfigOf, npmStartClusters } from './environment.ts';

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program to its end (killed after `timeoutMs`): exit code and output. */
function run(
  command: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<Result> {
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      cwd: options.cwd ?? repoRoot,
      env: options.env ?? process.env,
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
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 30_000);
    child.once('error', (err) => {
      clearTimeout(timer);
      resolve({ code: -1, stdout, stderr: `${stderr}${err.message}` });
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr });
    });
  });
}

function assertRan(result: Result, what: string): void {
  assert.equal(result.code, 0, `${what} exited ${result.code}:\n${result.stderr}\n${result.stdout}`);
}

/** Relative imports of an emitted .js or .d.ts file: static, re-exported, dynamic and `import("./x.js").T`. */
function relativeImports(source: string): string[] {
  const specifiers = [
    ...source.matchAll(/\bfrom\s*["'](\.{1,2}\/[^"']+)["']/g),
    ...source.matchAll(/\bimport\s*\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g),
    ...source.matchAll(/^\s*import\s*["'](\.{1,2}\/[^"']+)["']/gm),
  ];
  return specifiers.map((m) => m[1] as string);
}

const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
};
const peerVersion = (
  JSON.parse(
    readFileSync(path.join(repoRoot, 'node_modules', '@kubernetes', 'client-node', 'package.json'), 'utf8'),
  ) as { version: string }
).version;

describe('the npm package', () => {
  let work: string;
  let tarball: string;
  /** `tar -tvzf`: path (without the package/ prefix) -> its mode string, e.g. -rwxr-xr-x. */
  const entries = new Map<string, string>();
  let installDir: string;
  let installed: string;
  /** Node 24 first, then the install's node_modules/.bin: what a user's shell has after `npm install`. */
  let userEnv: NodeJS.ProcessEnv;

  before(async () => {
    work = mkdtempSync(path.join(os.tmpdir(), 'cg-package-'));
    installDir = path.join(work, 'user');
    mkdirSync(installDir);
    writeFileSync(
      path.join(installDir, 'package.json'),
      `${JSON.stringify({ name: 'a-user-project', private: true, type: 'module' }, null, 2)}\n`,
    );
    // npm itself on Node 24 too: the package's engines say >=24.
    const npmEnv = { ...process.env, PATH: `${path.dirname(process.execPath)}:${process.env.PATH ?? ''}` };
    const npmInstall = (...specs: string[]) =>
      run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--no-package-lock', ...specs], {
        cwd: installDir,
        env: npmEnv,
        timeoutMs: 180_000,
      });
    // The user's project already has the peer dependency (most of the install's time) while the package is packed.
    const [packed, peer] = await Promise.all([
      run('npm', ['pack', '--pack-destination', work, '--json'], { env: npmEnv, timeoutMs: 180_000 }),
      npmInstall(`@kubernetes/client-node@${peerVersion}`),
    ]);
    assertRan(packed, 'npm pack');
    assertRan(peer, `npm install @kubernetes/client-node@${peerVersion}`);
    const [answer] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as { filename: string }[];
    assert.ok(answer, `npm pack printed no tarball:\n${packed.stdout}`);
    tarball = path.join(work, answer.filename);
    const listed = await run('tar', ['-tvzf', tarball]);
    assertRan(listed, 'tar -tvzf');
    for (const line of listed.stdout.trim().split('\n')) {
      const [mode = '', , , , , name = ''] = line.trim().split(/\s+/);
      entries.set(name.replace(/^package\//, ''), mode);
    }
    assertRan(await npmInstall(tarball), 'npm install <tarball>');
    installed = path.join(installDir, 'node_modules', pkg.name);
    userEnv = {
      ...process.env,
      PATH: [
        path.dirname(process.execPath),
        path.join(installDir, 'node_modules', '.bin'),
        // Not the repository's own node_modules/.bin (npm test puts it on PATH): only what the user installed.
        ...(process.env.PATH ?? '').split(':').filter((dir) => !dir.startsWith(repoRoot)),
      ].join(':'),
      KUBECONFIG: kubeconfigOf('hub'),
    };
  });

  after(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  test('the tarball holds the library, the CLI, the examples and docs, and no tests, e2e, hack, manager or agent', () => {
    const files = [...entries.keys()].filter((f) => !f.endsWith('/'));
    for (const expected of [
      'package.json',
      'README.md',
      'dist/client/index.js',
      'dist/client/index.d.ts',
      'dist/client/cli/main.js',
      'dist/client/cli/main.d.ts',
      'docs/client.md',
      'docs/cli.md',
      'examples/list-pods.ts',
    ]) {
      assert.ok(files.includes(expected), `the tarball lacks ${expected}; it has:\n${files.join('\n')}`);
    }
    const allowed =
      /^(package\.json|README\.md|LICENSE|docs\/(client|cli)\.md|dist\/(client|shared)\/.+\.(js|d\.ts)|examples\/.+)$/;
    const unexpected = files.filter(
      (f) => !allowed.test(f) || /\.test\.|(^|\/)(test-kit|testing|test-fixtures)\./.test(f),
    );
    assert.deepEqual(unexpected, [], 'files that are not the library, the CLI, the examples or docs');
    for (const folder of ['e2e/', 'hack/', 'manager/', 'agent/', 'charts/', 'crds/', 'client/', 'shared/']) {
      assert.ok(!files.some((f) => f.startsWith(folder)), `the tarball has ${folder}`);
    }
    // Executable for everyone, as kubectl's plugin lookup and a shell need (npm keeps the mode it packs).
    assert.match(entries.get('dist/client/cli/main.js') ?? '', /^-rwxr-xr-x/, 'the CLI is not executable');
    assert.ok(
      readFileSync(path.join(installed, 'dist', 'client', 'cli', 'main.js'), 'utf8').startsWith(
        '#!/usr/bin/env node\n',
      ),
      'the CLI lost its shebang',
    );
  });

  test('dist/ holds only what the library and the CLI import, at run time or in their types', () => {
    const dist = path.join(installed, 'dist');
    const shipped = readdirSync(dist, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => path.relative(dist, path.join(e.parentPath, e.name)))
      .sort();
    // From the entry points through every relative import: of the JavaScript (what Node loads) and of the
    // declarations (a type-only import leaves an empty module that only the .d.ts files name).
    const reached = new Set<string>();
    const queue = ['client/index.js', 'client/index.d.ts', 'client/cli/main.js', 'client/cli/main.d.ts'];
    while (queue.length > 0) {
      const file = queue.pop() as string;
      if (reached.has(file)) continue;
      reached.add(file);
      const source = readFileSync(path.join(dist, file), 'utf8');
      for (const specifier of relativeImports(source)) {
        const target = path.join(path.dirname(file), specifier);
        let wanted = target;
        if (file.endsWith('.d.ts')) {
          // tsc keeps the .ts of a declaration's import; TypeScript resolves it, like .js, to the .d.ts beside it.
          wanted = target.replace(/\.(js|ts)$/, '.d.ts');
        } else {
          assert.ok(
            specifier.endsWith('.js'),
            `${file} imports ${specifier}: Node needs the .js it was rewritten to`,
          );
        }
        assert.ok(shipped.includes(wanted), `${file} imports ${specifier}, which the package does not ship`);
        queue.push(wanted);
        // The declarations of every module that is loaded: what a user's editor reads for it.
        if (wanted.endsWith('.js') && shipped.includes(wanted.replace(/\.js$/, '.d.ts')))
          queue.push(wanted.replace(/\.js$/, '.d.ts'));
      }
    }
    const unreached = shipped.filter(
      (f) =>
        !reached.has(f) &&
        !reached.has(f.replace(/\.d\.ts$/, '.js')) &&
        !reached.has(f.replace(/\.js$/, '.d.ts')),
    );
    assert.deepEqual(unreached, [], 'files neither the library nor the CLI imports');
    assert.ok(
      [...reached].some((f) => f.startsWith('shared/')),
      'the client imports nothing of shared/',
    );
  });

  test('`cluster-gateway --help` and `--version` run from node_modules/.bin', async () => {
    const help = await run('cluster-gateway', ['--help'], { cwd: installDir, env: userEnv });
    assertRan(help, 'cluster-gateway --help');
    assert.match(help.stdout, /^Usage: cluster-gateway /m);
    for (const command of ['status', 'doctor', 'kubeconfig'])
      assert.match(help.stdout, new RegExp(`^  ${command}\\b`, 'm'));
    const version = await run('cluster-gateway', ['--version'], { cwd: installDir, env: userEnv });
    assertRan(version, 'cluster-gateway --version');
    assert.equal(version.stdout.trim(), pkg.version);
  });

  test('the installed `cluster-gateway status` (a command loaded on use) lists the managed clusters', async () => {
    const status = await run('cluster-gateway', ['status', '-o', 'json'], { cwd: installDir, env: userEnv });
    assertRan(status, 'cluster-gateway status -o json');
    const { clusters } = JSON.parse(status.stdout) as { clusters: { name: string }[] };
    assert.deepEqual(clusters.map((c) => c.name).sort(), [...npmStartClusters].sort());
  });

  test('`kubectl cluster-gateway --help` runs the installed CLI as a kubectl plugin', async () => {
    const plugins = await run(binaryPath('kubectl'), ['plugin', 'list', '--name-only'], {
      cwd: installDir,
      env: userEnv,
    });
    assert.match(
      plugins.stdout,
      /^kubectl-cluster_gateway$/m,
      `kubectl plugin list:\n${plugins.stdout}${plugins.stderr}`,
    );
    const help = await run(binaryPath('kubectl'), ['cluster-gateway', '--help'], {
      cwd: installDir,
      env: userEnv,
    });
    assertRan(help, 'kubectl cluster-gateway --help');
    assert.match(help.stdout, /^Usage: kubectl cluster-gateway /m);
  });

  test('examples/list-pods.ts, run from the user project, lists the pods of every managed cluster', async (t) => {
    // A Pod of its own on each cluster, which no node may run (it stays Pending): a cluster without pods of its
    // own still shows the example read that cluster and no other.
    const marker = (cluster: string) => `package-test-${cluster}-${process.pid}`;
    const markerSelector = { 'package-test.cluster-gateway.local/nowhere': 'true' };
    for (const cluster of npmStartClusters) {
      const client = await clientOf(cluster);
      try {
        await client.create('/api/v1/namespaces/default/pods', {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: marker(cluster), namespace: 'default' },
          spec: {
            nodeSelector: markerSelector,
            containers: [{ name: 'pause', image: 'registry.k8s.io/pause:3.10' }],
          },
        } as KubeObject);
      } finally {
        client.close();
      }
      t.after(async () => {
        const c = await clientOf(cluster);
        try {
          await c.request(
            'DELETE',
            `/api/v1/namespaces/default/pods/${marker(cluster)}?gracePeriodSeconds=0`,
          );
        } finally {
          c.close();
        }
      });
    }
    const example = path.join(installDir, 'list-pods.ts');
    copyFileSync(path.join(installed, 'examples', 'list-pods.ts'), example);
    assert.ok(statSync(example).size > 0);
    const podsOf = async () => {
      const byCluster = new Map<string, string[]>();
      for (const cluster of npmStartClusters) {
        const client = await clientOf(cluster);
        try {
          const list = await client.get<{ items: KubeObject[] }>('/api/v1/pods');
          byCluster.set(
            cluster,
            list.items.map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`),
          );
        } finally {
          client.close();
        }
      }
      return byCluster;
    };
    const before = await podsOf();
    const listed = await run(process.execPath, [example], {
      cwd: installDir,
      env: userEnv,
      timeoutMs: 60_000,
    });
    const afterwards = await podsOf();
    assertRan(listed, 'node list-pods.ts');
    // The example prints `<cluster>: <n> pods`, then one indented `<namespace>/<name> <phase>` line per pod.
    const printed = new Map<string, string[]>();
    let current: string[] | undefined;
    for (const line of listed.stdout.split('\n')) {
      const heading = /^(\S+): \d+ pods$/.exec(line);
      if (heading) {
        current = [];
        printed.set(heading[1] as string, current);
      } else if (line.startsWith('  ') && current) current.push(line.trim().split(/\s+/)[0] as string);
    }
    for (const cluster of npmStartClusters) {
      const stable = (before.get(cluster) ?? []).filter((pod) => afterwards.get(cluster)?.includes(pod));
      assert.ok(stable.includes(`default/${marker(cluster)}`), `${cluster} lacks its marker Pod`);
      const pods = printed.get(cluster);
      assert.ok(pods, `list-pods.ts printed no pods of ${cluster}:\n${listed.stdout}${listed.stderr}`);
      const others = npmStartClusters.filter((c) => c !== cluster).map((c) => `default/${marker(c)}`);
      assert.deepEqual(
        pods.filter((pod) => others.includes(pod)),
        [],
        `list-pods.ts printed another cluster's Pod under ${cluster}`,
      );
      assert.deepEqual(
        stable.filter((pod) => !pods.includes(pod)),
        [],
        `pods of ${cluster} list-pods.ts did not print:\n${listed.stdout}`,
      );
    }
  });
});

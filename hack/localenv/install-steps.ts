/**
 * docs/install.md's steps, run as written: every shell block a user runs there is marked with an HTML
 * comment `<!-- install-step: <name> -->` on the line before its ```sh fence. `npm start`
 * (hack/local-up.ts) runs those very blocks with bash, so the install the document describes is the one
 * the local environment (and e2e/npm-start/real-nodes.test.ts) proves, with no shortcut of the
 * environment's own: a step sees only the variables a user sets (installStepVariables) and a PATH with
 * kubectl, helm and clusteradm.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { binaryPath, repoRoot } from './binaries.ts';

export const installDoc = path.join(repoRoot, 'docs', 'install.md');

export interface InstallStep {
  name: string;
  /** The block's text, as a user pastes it. */
  script: string;
  /** 1-based line of the marker in the document, for messages. */
  line: number;
}

/** What a step may read: what a user sets in their shell before pasting it (and nothing else). */
export const installStepVariables = [
  'KUBECONFIG',
  'CHART',
  'VALUES',
  'CLUSTER',
  'CLUSTER_KUBECONFIG',
] as const;
export type InstallStepEnv = Partial<Record<(typeof installStepVariables)[number], string>>;

const marker = /^<!--\s*install-step:\s*([a-z0-9][a-z0-9-]*)\s*-->\s*$/;

/**
 * The marked blocks of a Markdown document, by name (pure). Throws on a marker not followed by a ```sh
 * block, an unterminated block, or a name used twice: a document that says less than it seems to.
 */
export function extractInstallSteps(markdown: string): Map<string, InstallStep> {
  const lines = markdown.split('\n');
  const steps = new Map<string, InstallStep>();
  for (let i = 0; i < lines.length; i++) {
    const m = marker.exec(lines[i]!.trim());
    if (!m) continue;
    const name = m[1]!;
    const where = `install-step ${name} (line ${i + 1})`;
    if (steps.has(name))
      throw new Error(`${where}: the name is used twice (first on line ${steps.get(name)!.line})`);
    const fence = lines[i + 1]?.trim();
    if (fence !== '```sh' && fence !== '```bash') {
      throw new Error(
        `${where}: the next line must open a \`\`\`sh block, found ${JSON.stringify(fence ?? '')}`,
      );
    }
    const end = lines.findIndex((l, j) => j > i + 1 && l.trim() === '```');
    if (end < 0) throw new Error(`${where}: the block is never closed`);
    steps.set(name, { name, script: `${lines.slice(i + 2, end).join('\n')}\n`, line: i + 1 });
    i = end;
  }
  return steps;
}

/**
 * The shell variables a script reads that it does not set itself (pure, and deliberately simple:
 * `$NAME` and `${NAME...}` outside single-quoted heredocs). A step may read only installStepVariables.
 */
export function variablesRead(script: string): string[] {
  const withoutQuotedHeredocs = script.replace(/<<-?\s*'(\w+)'\n[\s\S]*?\n\1\n/g, '');
  const assigned = new Set(
    [...withoutQuotedHeredocs.matchAll(/(?:^|[\s;(])([A-Za-z_]\w*)=/gm)].map((m) => m[1]!),
  );
  const read = [...withoutQuotedHeredocs.matchAll(/\$\{?([A-Za-z_]\w*)/g)].map((m) => m[1]!);
  return [...new Set(read)].filter((v) => !assigned.has(v)).sort();
}

export function loadInstallSteps(file = installDoc): Map<string, InstallStep> {
  return extractInstallSteps(readFileSync(file, 'utf8'));
}

/** The PATH a step gets: the tools the project builds (kubectl, helm; clusteradm in its OCM folder), then the system's. */
export function installStepPath(): string {
  const dirs = [
    path.dirname(binaryPath('kubectl')),
    path.dirname(binaryPath('helm')),
    path.dirname(binaryPath('clusteradm')),
  ];
  return [
    ...new Set(dirs),
    '/usr/local/sbin',
    '/usr/local/bin',
    '/usr/sbin',
    '/usr/bin',
    '/sbin',
    '/bin',
  ].join(':');
}

export interface RunStepOptions {
  /** Default installStepPath(). */
  path?: string;
  timeoutMs?: number;
  /** Each line of output, as it comes. */
  onOutput?: (line: string) => void;
}

/**
 * Runs one step with `bash -euo pipefail` (a failing command fails the step, as a user would notice) in a
 * clean environment: PATH, HOME and the step's variables only. Resolves with its output; rejects with the
 * step's name, where it is, its exit status and its output.
 */
export function runInstallStep(
  step: InstallStep,
  vars: InstallStepEnv,
  options: RunStepOptions = {},
): Promise<string> {
  const env: Record<string, string> = {
    PATH: options.path ?? installStepPath(),
    HOME: process.env.HOME ?? '/root',
  };
  for (const name of installStepVariables) {
    const value = vars[name];
    if (value !== undefined) env[name] = value;
  }
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['--noprofile', '--norc', '-euo', 'pipefail', '-c', step.script], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    let partial = '';
    const take = (chunk: string) => {
      output += chunk;
      if (!options.onOutput) return;
      const parts = (partial + chunk).split('\n');
      partial = parts.pop() ?? '';
      for (const line of parts) options.onOutput(line);
    };
    child.stdout.setEncoding('utf8').on('data', take);
    child.stderr.setEncoding('utf8').on('data', take);
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 300_000);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`install step ${step.name} could not start bash: ${err.message}`));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (partial && options.onOutput) options.onOutput(partial);
      if (code === 0) return resolve(output);
      const how = signal
        ? `was killed (${signal}${signal === 'SIGKILL' ? ', timed out' : ''})`
        : `exited ${code}`;
      const given = Object.entries(vars)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ');
      reject(
        new Error(
          `install step ${step.name} (docs/install.md line ${step.line}; ${given}) ${how}:\n${output.trimEnd() || '(no output)'}`,
        ),
      );
    });
  });
}

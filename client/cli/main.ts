#!/usr/bin/env node
/**
 * `cluster-gateway`: is the gateway working, and if not, why? Installed
 * under two names: `cluster-gateway`, and `kubectl-cluster_gateway`, which
 * kubectl runs for `kubectl cluster-gateway ...` (kubectl's plugin naming:
 * dashes in the command become underscores in the file name).
 *
 * This file only parses arguments; each command is its own module, loaded
 * when it runs, and so is the hub's client, so `--help`, `--version` and a
 * mistyped flag answer before any command's or the client's code is read.
 */
import path from 'node:path';
import type { Writable } from 'node:stream';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { CliError, type ExitCode, exitCodes } from './exit-codes.ts';
import type { Hub, HubSelection } from './hub.ts';
import { Output, outputFormats, parseOutputFormat } from './output.ts';
import { healthzConcurrency, healthzTimeoutMs } from './status/limits.ts';
import { packageVersion } from './version.ts';

/** What every command gets: the hub (opened on first use) and where to write. */
export interface CommandContext {
  hub(): Hub;
  output: Output;
  /** The name the user typed the command by, for messages that show a command line. */
  commandName: string;
}

/** Where the CLI writes: the process's streams, or a test's. */
export interface Streams {
  stdout: Writable & { isTTY?: boolean };
  stderr: Writable & { isTTY?: boolean };
}

const processStreams: Streams = { stdout: process.stdout, stderr: process.stderr };

interface GlobalOptions extends HubSelection {
  output?: string;
}

export function invokedName(argv1: string | undefined): string {
  const base = path.basename(argv1 ?? '').replace(/\.(ts|js)$/, '');
  return base.startsWith('kubectl-')
    ? `kubectl ${base.slice('kubectl-'.length).replaceAll('_', '-')}`
    : 'cluster-gateway';
}

/** A positive integer option value, or a usage error that names the option. */
function positiveInteger(option: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`${option} must be a positive integer`);
    return n;
  };
}

function positiveSeconds(option: string) {
  return (value: string): number => {
    const n = Number(value.replace(/s$/, ''));
    if (!Number.isFinite(n) || n <= 0)
      throw new InvalidArgumentError(`${option} must be a number of seconds > 0`);
    return n;
  };
}

export function buildProgram(
  name: string,
  run: (exit: Promise<ExitCode>) => void,
  /** Each hub the commands open, to close its connections when the command ends. */
  opened: Hub[] = [],
  streams: Streams = processStreams,
): Command {
  const program = new Command(name)
    .description('Check and use the cluster-gateway addon of an Open Cluster Management hub.')
    .version(packageVersion(), '--version', 'print the version')
    .option('--kubeconfig <file>', "the hub's kubeconfig (default: KUBECONFIG, then ~/.kube/config)")
    .option('--context <name>', 'the kubeconfig context of the hub (default: its current context)')
    .addOption(
      new Option('-o, --output <format>', 'output format').choices([...outputFormats]).default('table'),
    )
    .showSuggestionAfterError()
    .configureOutput({
      writeOut: (text) => streams.stdout.write(text),
      writeErr: (text) => streams.stderr.write(text),
    })
    .exitOverride()
    .addHelpText(
      'after',
      `
Examples:
  ${name} status                      one row per managed cluster
  ${name} status -o json              the same, for scripts
  ${name} doctor cluster1             why is cluster1 not working?
  ${name} kubeconfig cluster1 > c1.kubeconfig && kubectl --kubeconfig c1.kubeconfig get pods -A

Exit codes: 0 ok (doctor: healthy), 1 a check failed (doctor), 2 usage or connection error.`,
    );

  /**
   * The context of the command about to run. The hub's client (and the transport code under it) is loaded here,
   * once a command runs, not when the program starts: --help, --version and usage errors answer without it.
   */
  async function context(cmd: Command): Promise<CommandContext> {
    const { openHub } = await import('./hub.ts');
    const opts = cmd.optsWithGlobals<GlobalOptions>();
    let hub: Hub | undefined;
    return {
      hub: () => {
        if (!hub) {
          hub = openHub({
            ...(opts.kubeconfig ? { kubeconfig: opts.kubeconfig } : {}),
            ...(opts.context ? { context: opts.context } : {}),
          });
          opened.push(hub);
        }
        return hub;
      },
      output: new Output(parseOutputFormat(opts.output), streams.stdout, streams.stderr),
      commandName: name,
    };
  }

  program
    .command('status')
    .description(
      'one row per managed cluster: addon Available and its reason, agent version, endpoint, tunnel, heartbeat, gateway health, proxied /healthz time',
    )
    .option(
      '--healthz-concurrency <n>',
      'how many proxied /healthz requests run at once',
      positiveInteger('--healthz-concurrency'),
      healthzConcurrency,
    )
    .option(
      '--healthz-timeout <seconds>',
      'how long each proxied /healthz may take before it shows "timeout"',
      positiveSeconds('--healthz-timeout'),
      healthzTimeoutMs / 1000,
    )
    .addHelpText(
      'after',
      `
Every collection is listed once for all clusters (ManagedClusters, ManagedClusterAddOns, ManifestWorks, the agents'
heartbeat Leases, the tunnel Leases, ClusterGateways), in parallel. Then GET clustergateways/<cluster>/proxy/healthz
is timed for each cluster, ${healthzConcurrency} at a time by default, each given ${healthzTimeoutMs / 1000} s: a failure shows as one word
(timeout, offline, forbidden, unavailable, http-<code>); -o json|yaml has the full message.

Columns: AVAILABLE/REASON the addon's Available condition; AGENT the agent image's tag in the ManifestWork ("rolling out"
until the work's status feedback shows every replica updated and available); ENDPOINT the ClusterGateway's endpoint
type; TUNNEL/REPLICA the agent's tunnel and the gateway replica holding it (its Lease); HEARTBEAT the age of the agent's
heartbeat Lease; HEALTHY the gateway's health verdict and reason; HEALTHZ the proxied /healthz round trip.
A collection you may not list shows the missing permission in a note (stderr) and "forbidden" in its columns.

Examples:
  ${name} status
  ${name} status -o yaml --healthz-timeout 5`,
    )
    .action(async (opts: { healthzConcurrency: number; healthzTimeout: number }, cmd: Command) => {
      const { runStatus } = await import('./commands/status.ts');
      run(
        runStatus(await context(cmd), {
          healthzConcurrency: opts.healthzConcurrency,
          healthzTimeoutMs: Math.round(opts.healthzTimeout * 1000),
        }),
      );
    });

  program
    .command('doctor')
    .description(
      'ordered checks from the hub down to each cluster; every failure names the object to look at and the command that fixes it (exit 0 healthy, 1 a check failed, 2 usage or connection error)',
    )
    .argument('[cluster...]', 'the managed clusters to check (default: every cluster with the addon)')
    .action(async (clusters: string[], _opts, cmd: Command) => {
      const { runDoctor } = await import('./commands/doctor.ts');
      run(runDoctor(await context(cmd), clusters));
    });

  program
    .command('kubeconfig')
    .description(
      'print a kubeconfig that reaches <cluster> through the gateway with your hub identity (kubectl get, logs -f, exec, port-forward)',
    )
    .argument('<cluster>', 'the managed cluster')
    .addHelpText(
      'after',
      `
The kubeconfig has the hub's cluster entry (CA, tls-server-name, proxy-url) with the server
<hub>/apis/cluster.core.oam.dev/v1alpha1/clustergateways/<cluster>/proxy, and your user entry copied as it is
(certificate files, token, exec plugin: referenced, not resolved; relative paths made absolute). Nothing else.

Examples:
  ${name} kubeconfig cluster1 > cluster1.kubeconfig
  kubectl --kubeconfig cluster1.kubeconfig get pods -A
  kubectl --kubeconfig cluster1.kubeconfig logs -f -n kube-system <pod>`,
    )
    .action(async (cluster: string, _opts, cmd: Command) => {
      const { runKubeconfig } = await import('./commands/kubeconfig.ts');
      run(runKubeconfig(await context(cmd), cluster));
    });

  return program;
}

export async function main(
  argv: string[] = process.argv,
  streams: Streams = processStreams,
): Promise<ExitCode> {
  let exit: Promise<ExitCode> | undefined;
  const opened: Hub[] = [];
  const program = buildProgram(
    invokedName(argv[1]),
    (p) => {
      exit = p;
    },
    opened,
    streams,
  );
  try {
    await program.parseAsync(argv);
    if (!exit) return exitCodes.ok;
    return await exit;
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end here too, with exit code 0; a usage error was already printed.
      return err.exitCode === 0 ? exitCodes.ok : exitCodes.usageOrConnection;
    }
    if (err instanceof CliError) {
      streams.stderr.write(`error: ${err.message}\n`);
      return err.exitCode;
    }
    streams.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    return exitCodes.usageOrConnection;
  } finally {
    // Keep-alive sockets to the hub would hold the process open after the answer.
    for (const hub of opened) hub.client.close();
  }
}

if (import.meta.main) {
  // `... | head` closes the pipe early: that is the reader's choice, not an error worth a stack trace.
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
      throw err;
    });
  }
  process.exitCode = await main();
}

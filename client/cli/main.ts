#!/usr/bin/env node
/**
 * `cluster-gateway`: is the gateway working, and if not, why? Installed
 * under two names: `cluster-gateway`, and `kubectl-cluster_gateway`, which
 * kubectl runs for `kubectl cluster-gateway ...` (kubectl's plugin naming:
 * dashes in the command become underscores in the file name).
 *
 * This file only parses arguments; each command is its own module, loaded
 * when it runs, so `--help` and a mistyped flag answer before any command's
 * code is read.
 */
import path from 'node:path';
import { Command, CommanderError, Option } from 'commander';
import { CliError, type ExitCode, exitCodes } from './exit-codes.ts';
import { type Hub, type HubSelection, openHub } from './hub.ts';
import { Output, outputFormats, parseOutputFormat } from './output.ts';

/** What every command gets: the hub (opened on first use) and where to write. */
export interface CommandContext {
  hub(): Hub;
  output: Output;
  /** The name the user typed the command by, for messages that show a command line. */
  commandName: string;
}

interface GlobalOptions extends HubSelection {
  output?: string;
}

export function invokedName(argv1: string | undefined): string {
  const base = path.basename(argv1 ?? '').replace(/\.(ts|js)$/, '');
  return base.startsWith('kubectl-')
    ? `kubectl ${base.slice('kubectl-'.length).replaceAll('_', '-')}`
    : 'cluster-gateway';
}

export function buildProgram(name: string, run: (exit: Promise<ExitCode>) => void): Command {
  const program = new Command(name)
    .description('Check and use the cluster-gateway addon of an Open Cluster Management hub.')
    .option('--kubeconfig <file>', "the hub's kubeconfig (default: KUBECONFIG, then ~/.kube/config)")
    .option('--context <name>', 'the kubeconfig context of the hub (default: its current context)')
    .addOption(
      new Option('-o, --output <format>', 'output format').choices([...outputFormats]).default('table'),
    )
    .showSuggestionAfterError()
    .exitOverride();

  function context(cmd: Command): CommandContext {
    const opts = cmd.optsWithGlobals<GlobalOptions>();
    let hub: Hub | undefined;
    return {
      hub: () => {
        hub ??= openHub({
          ...(opts.kubeconfig ? { kubeconfig: opts.kubeconfig } : {}),
          ...(opts.context ? { context: opts.context } : {}),
        });
        return hub;
      },
      output: new Output(parseOutputFormat(opts.output)),
      commandName: name,
    };
  }

  program
    .command('status')
    .description(
      'one row per managed cluster: addon Available and its reason, agent version, endpoint, tunnel, heartbeat, gateway health, proxied /healthz time',
    )
    .action(async (_opts, cmd: Command) => {
      const { runStatus } = await import('./commands/status.ts');
      run(runStatus(context(cmd)));
    });

  program
    .command('doctor')
    .description(
      'ordered checks from the hub down to each cluster; every failure names the object to look at and the command that fixes it (exit 0 healthy, 1 a check failed, 2 usage or connection error)',
    )
    .argument('[cluster...]', 'the managed clusters to check (default: every cluster with the addon)')
    .action(async (clusters: string[], _opts, cmd: Command) => {
      const { runDoctor } = await import('./commands/doctor.ts');
      run(runDoctor(context(cmd), clusters));
    });

  program
    .command('kubeconfig')
    .description(
      'print a kubeconfig that reaches <cluster> through the gateway with your hub identity (kubectl get, logs -f, exec, port-forward)',
    )
    .argument('<cluster>', 'the managed cluster')
    .action(async (cluster: string, _opts, cmd: Command) => {
      const { runKubeconfig } = await import('./commands/kubeconfig.ts');
      run(runKubeconfig(context(cmd), cluster));
    });

  return program;
}

export async function main(argv: string[] = process.argv): Promise<ExitCode> {
  let exit: Promise<ExitCode> | undefined;
  const program = buildProgram(invokedName(argv[1]), (p) => {
    exit = p;
  });
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
      process.stderr.write(`error: ${err.message}\n`);
      return err.exitCode;
    }
    process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    return exitCodes.usageOrConnection;
  }
}

if (import.meta.main) {
  process.exitCode = await main();
}

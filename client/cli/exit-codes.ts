/**
 * Exit codes scripts can rely on: 0 healthy (or the command did what was
 * asked), 1 a check failed, 2 the command could not run (bad usage, no
 * kubeconfig, the hub unreachable).
 */
export const exitCodes = {
  ok: 0,
  checkFailed: 1,
  usageOrConnection: 2,
} as const;

export type ExitCode = (typeof exitCodes)[keyof typeof exitCodes];

/** A failure that is the caller's to fix (usage, kubeconfig, connection): printed without a stack, exit 2. */
export class CliError extends Error {
  readonly exitCode: ExitCode;
  constructor(message: string, exitCode: ExitCode = exitCodes.usageOrConnection, options?: ErrorOptions) {
    super(message, options);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}

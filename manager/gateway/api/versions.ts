/**
 * resourceVersion semantics of reads and watches, as the hub's apiserver has them, over a directory
 * whose versions are the hub's own revisions (clusters/registry.ts):
 * - a version this replica has not applied yet (another replica handed it out a moment ago) is
 *   waited for, at most three seconds as the apiserver's watch cache does, then refused with its
 *   "Too large resource version" 504, which client-go answers by relisting;
 * - a version older than this replica's history is 410 Gone ("too old resource version").
 */
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import type { ClusterDirectory, VersionedDirectory } from '../clusters/cluster.ts';

/** The watch cache's blockTimeout. */
export const blockTimeoutMs = 3_000;

export function isVersioned(directory: ClusterDirectory): directory is VersionedDirectory {
  const d = directory as Partial<VersionedDirectory>;
  return typeof d.eventsSince === 'function' && typeof d.waitForVersion === 'function';
}

/** A resourceVersion as the hub writes them: a decimal integer. */
export function parseVersion(resourceVersion: string): number | undefined {
  return /^[0-9]{1,15}$/.test(resourceVersion) ? Number(resourceVersion) : undefined;
}

/** The apiserver's answer to a resourceVersion that is not a number. */
export function invalidVersion(resourceVersion: string): StatusError {
  return new StatusError(
    failureStatus(
      400,
      `invalid resource version: ${JSON.stringify(resourceVersion)}`,
      undefined,
      'BadRequest',
    ),
  );
}

export function tooOld(resourceVersion: string, current: string): StatusError {
  return new StatusError(
    failureStatus(410, `too old resource version: ${resourceVersion} (${current})`, undefined, 'Expired'),
  );
}

/** storage.NewTooLargeResourceVersionError: a 504 Timeout the client retries after a second. */
export function tooLarge(resourceVersion: number, current: string): StatusError {
  return new StatusError(
    failureStatus(
      504,
      `Too large resource version: ${resourceVersion}, current: ${current}`,
      {
        causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }],
        retryAfterSeconds: 1,
      },
      'Timeout',
    ),
  );
}

/** Resolves once `directory` has applied `version`; a 504 StatusError after blockTimeoutMs. */
export async function awaitVersion(directory: ClusterDirectory, version: number): Promise<void> {
  if (version <= Number(directory.version)) return;
  if (!isVersioned(directory)) throw tooLarge(version, directory.version);
  if (!(await directory.waitForVersion(version, blockTimeoutMs))) throw tooLarge(version, directory.version);
}

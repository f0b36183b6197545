import type { Verdict } from './model.ts';
import { fail, skipped } from './model.ts';
import type { Read } from './reads.ts';

/**
 * The verdict for a read that did not answer: not checked when the caller lacks the permission (that is not
 * the addon's fault, and the proxy-permission check is where missing access is a failure), a failure otherwise.
 */
export function unreadable(read: Read<unknown>, what: string, object: string): Verdict | undefined {
  if (read.state === 'forbidden') {
    return skipped(`not checked: you may not ${read.permission} (needed to read ${what})`, object);
  }
  if (read.state === 'error') {
    return fail(
      `cannot read ${what}: ${read.message}`,
      object,
      'retry; if it stays, check the hub kube-apiserver (kubectl get --raw /readyz)',
    );
  }
  return undefined;
}

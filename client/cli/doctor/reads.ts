/**
 * The doctor's reads of the hub. Each object or list is read once, however many checks need it, and all
 * start at once (a check awaits only the reads it needs). Every read also keeps the hub's clock (its Date
 * header): the age of a Lease is the hub's now minus its renewTime, so a laptop whose clock is off does not
 * turn a fresh heartbeat stale.
 *
 * A read the caller may not do is not an error of the addon: it comes back as `forbidden` with the permission
 * it needed, and the checks that need it say "not checked" instead of failing.
 */
import type { KubeClient } from '../../../shared/kube/client.ts';
import { StatusError } from '../../../shared/kube/status.ts';

export type Read<T> =
  | { state: 'found'; value: T; hubTime: number }
  | { state: 'missing'; hubTime: number }
  | { state: 'forbidden'; permission: string; message: string }
  | { state: 'error'; message: string; code?: number; connection: boolean };

/** How long one read may take: a hub that does not answer in this time is reported, not waited on. */
export const readTimeoutMs = 10_000;

export type Requester = Pick<KubeClient, 'send'>;

/** GET `path`; 404 is `missing`, 403 is `forbidden` with `permission` (what the caller would need). */
export async function readPath<T>(
  client: Requester,
  path: string,
  permission: string,
  timeoutMs = readTimeoutMs,
): Promise<Read<T>> {
  return sendAndRead<T>(client, 'GET', path, undefined, permission, timeoutMs);
}

export async function sendAndRead<T>(
  client: Requester,
  method: string,
  path: string,
  body: unknown,
  permission: string,
  timeoutMs = readTimeoutMs,
): Promise<Read<T>> {
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const res = await client.send(method, path, { signal, ...(body !== undefined ? { body } : {}) });
    let text = '';
    for await (const chunk of res) text += chunk.toString();
    const date = Date.parse(String(res.headers.date ?? ''));
    // The Date header has whole seconds: half a second is the unbiased guess of the rest.
    const hubTime = Number.isNaN(date) ? Date.now() : date + 500;
    const code = res.statusCode ?? 0;
    if (code === 404) return { state: 'missing', hubTime };
    if (code >= 400) throw StatusError.fromResponse(code, text, `${method} ${path}`);
    const type = String(res.headers['content-type'] ?? '');
    const value = (type.includes('json') && text ? JSON.parse(text) : text) as T;
    return { state: 'found', value, hubTime };
  } catch (err) {
    if (err instanceof StatusError) {
      if (err.code === 403) return { state: 'forbidden', permission, message: err.message };
      return { state: 'error', message: err.message, code: err.code, connection: false };
    }
    if (signal.aborted) {
      return {
        state: 'error',
        message: `${method} ${path}: no answer within ${timeoutMs / 1000} s`,
        connection: true,
      };
    }
    return { state: 'error', message: err instanceof Error ? err.message : String(err), connection: true };
  }
}

/** Memoises reads by path: the first caller starts it, the others share its answer. */
export class Reads {
  readonly client: Requester;
  readonly #cache = new Map<string, Promise<Read<unknown>>>();

  constructor(client: Requester) {
    this.client = client;
  }

  get<T>(path: string, permission: string): Promise<Read<T>> {
    let read = this.#cache.get(path);
    if (!read) {
      read = readPath<unknown>(this.client, path, permission);
      this.#cache.set(path, read);
    }
    return read as Promise<Read<T>>;
  }

  /** Every read started so far (to find out whether the hub answered at all). */
  all(): Promise<Read<unknown>>[] {
    return [...this.#cache.values()];
  }
}

/** The value of a found read, else undefined. */
export function foundValue<T>(read: Read<T>): T | undefined {
  return read.state === 'found' ? read.value : undefined;
}

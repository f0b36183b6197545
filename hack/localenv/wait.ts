import type { KubeClient, KubeObject } from '../../shared/kube/client.ts';

/** Polls `check` until it returns a value other than undefined/false, or throws after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  {
    timeoutMs = 60_000,
    intervalMs = 250,
    failFast,
  }: { timeoutMs?: number; intervalMs?: number; failFast?: () => void } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    failFast?.();
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value as T;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const detail = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}${detail}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

type Conditioned = { status?: { conditions?: { type: string; status: string }[] } };

/** Waits until the object at `path` reports every condition in `types` as True. */
export function waitForConditions(
  client: Pick<KubeClient, 'get'>,
  path: string,
  types: string[],
  options: Parameters<typeof waitFor>[2] & { what?: string } = {},
): Promise<true> {
  const what = options.what ?? `${path} to report ${types.join(' and ')}`;
  return waitFor(
    what,
    async () => {
      const obj = await client.get<KubeObject & Conditioned>(path);
      return types.every((type) =>
        obj.status?.conditions?.some((c) => c.type === type && c.status === 'True'),
      );
    },
    options,
  );
}

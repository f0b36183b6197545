/**
 * Reading and removing request headers the way Kubernetes' authenticators
 * do. Node joins repeated headers with ", " in `req.headers`, which would
 * turn two X-Remote-Group values into one group named "a, b"; these helpers
 * read each value separately from `headersDistinct`.
 */
import type { IncomingMessage } from 'node:http';

/** All values of a header, one entry per occurrence. */
export function headerValues(req: IncomingMessage, name: string): string[] {
  return req.headersDistinct[name.toLowerCase()] ?? [];
}

/** The first value of the first listed header whose first value is non-empty (Go's Header.Get). */
export function firstHeaderValue(req: IncomingMessage, names: readonly string[]): string | undefined {
  for (const name of names) {
    const value = headerValues(req, name)[0];
    if (value) return value;
  }
  return undefined;
}

/** Every non-empty value of every listed header, in order. */
export function allHeaderValues(req: IncomingMessage, names: readonly string[]): string[] {
  const values: string[] = [];
  for (const name of names) {
    for (const value of headerValues(req, name)) if (value) values.push(value);
  }
  return values;
}

/**
 * Removes headers from the request once they have been consumed, so that
 * credentials and identity headers are never forwarded to a managed cluster
 * by code that copies `headers` or `rawHeaders`.
 */
export function removeHeaders(req: IncomingMessage, matches: (lowerCaseName: string) => boolean): void {
  for (const name of Object.keys(req.headers)) if (matches(name)) delete req.headers[name];
  for (const name of Object.keys(req.headersDistinct)) if (matches(name)) delete req.headersDistinct[name];
  const raw = req.rawHeaders;
  let kept = 0;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (matches(raw[i]!.toLowerCase())) continue;
    raw[kept++] = raw[i]!;
    raw[kept++] = raw[i + 1]!;
  }
  raw.length = kept;
}

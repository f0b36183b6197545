/**
 * Message framing of a proxied request: how the cluster learns where the
 * body ends.
 *
 * Framing is never a header that travels. Node's HTTP parser has already
 * decided how long the caller's body is (from `Content-Length`, or chunked
 * `Transfer-Encoding`); the upstream request declares exactly that length,
 * whatever the caller's other headers say. This is what Go's transport does
 * with `Request.ContentLength`, and it is what closes request smuggling: if a
 * caller names `Content-Length` in `Connection` (making it "hop-by-hop") and
 * the gateway dropped it, the body of a GET would go out unframed on a pooled
 * keep-alive connection, and the cluster would read it as the next request —
 * one that swallows the headers, the gateway's credential among them, of
 * whatever request is sent next on that connection.
 */
import type { IncomingMessage } from 'node:http';

export type Framing =
  /** No body: nothing is written upstream. */
  | { kind: 'none' }
  /** A body of exactly this many bytes (decimal string, as parsed by Node). */
  | { kind: 'length'; length: string }
  /** A body of unknown length, re-chunked upstream. */
  | { kind: 'chunked' };

/** Thrown for a request whose framing the gateway will not forward; the message says why. */
export class FramingError extends Error {
  readonly code: 400 | 501;
  constructor(message: string, code: 400 | 501) {
    super(message);
    this.code = code;
  }
}

const DIGITS = /^\d+$/;

/**
 * The framing Node's parser applied to `req`. Only `Transfer-Encoding:
 * chunked` alone is accepted, as Go's server does (501 otherwise): a coding
 * such as `gzip, chunked` would be de-chunked here and sent on as plain bytes
 * the cluster would read differently.
 */
export function requestFraming(req: IncomingMessage): Framing {
  const te = req.headers['transfer-encoding'];
  if (te !== undefined) {
    if (te.trim().toLowerCase() !== 'chunked') {
      throw new FramingError(`unsupported Transfer-Encoding "${te}": only "chunked" is accepted`, 501);
    }
    return { kind: 'chunked' };
  }
  const length = req.headers['content-length'];
  if (length === undefined) return { kind: 'none' };
  // Node's parser rejects malformed and conflicting lengths before this point; checked again
  // because the upstream declaration below is built from this string.
  if (!DIGITS.test(length)) throw new FramingError(`invalid Content-Length "${length}"`, 400);
  return Number(length) === 0 ? { kind: 'none' } : { kind: 'length', length };
}

/**
 * An upgrade request (exec, attach, port-forward) has no body: bytes after its
 * headers belong to the upgraded protocol. One that declares a body is refused,
 * rather than forwarded with a `Content-Length` the cluster would wait on.
 */
export function assertNoBody(framing: Framing): void {
  if (framing.kind !== 'none') {
    throw new FramingError(
      'upgrade requests must not carry a body (Content-Length or Transfer-Encoding)',
      400,
    );
  }
}

/** Methods for which Node, like Go, sends no framing at all when there is no body. */
const BODYLESS_BY_DEFAULT = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT']);

/**
 * The framing headers of the upstream request. A body-less POST/PUT/PATCH
 * declares `Content-Length: 0`, as Go's transport does; otherwise Node would
 * chunk-encode an empty body.
 */
export function framingHeaders(framing: Framing, method: string): string[] {
  switch (framing.kind) {
    case 'length':
      return ['Content-Length', framing.length];
    case 'chunked':
      return ['Transfer-Encoding', 'chunked'];
    case 'none':
      return BODYLESS_BY_DEFAULT.has(method) ? [] : ['Content-Length', '0'];
  }
}

/**
 * The two pieces of an HTTP/1.1 response the pass-through path (passthrough.ts) reads itself: its
 * head, parsed strictly, and its body's framing, followed byte by byte without copying so the body
 * can go to the caller as it came. Pure functions of bytes, no I/O.
 *
 * Why strict: the bytes of a chunked body reach the caller's connection (the hub's aggregator)
 * unchanged, so a cluster that sent a malformed or ambiguous framing could otherwise desynchronise
 * that connection (response smuggling). Every framing byte is checked before anything after it is
 * forwarded, and anything llhttp would refuse in strict mode is refused here.
 */

/** The upstream broke HTTP/1.1: the request fails (503 before the head is answered, truncated after). */
export class UpstreamProtocolError extends Error {
  override name = 'UpstreamProtocolError';
}

export type BodyFraming =
  | { kind: 'none' }
  | { kind: 'length'; length: number }
  | { kind: 'chunked' }
  /** Neither length nor chunked: the body ends when the connection does. */
  | { kind: 'close' };

export interface ResponseHead {
  status: number;
  statusMessage: string;
  /** Names and values alternating, as Node's `rawHeaders`. */
  rawHeaders: string[];
  framing: BodyFraming;
  /** Whether the connection may carry another request after this response. */
  keepAlive: boolean;
  /** Bytes of the head, the blank line included: the body starts there. */
  headBytes: number;
}

/** Node's default --max-http-header-size: a longer head is refused, as Node's own client does. */
export const MAX_HEAD_BYTES = 16 * 1024;

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Field values: visible characters, space, tab, obs-text; no control characters (RFC 9110 §5.5). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is checked for
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is checked for
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: ([\t\x20-\x7e\x80-\xff]*))?$/;

/**
 * Parses the response head if `data` holds all of it: undefined while the blank line has not come.
 * Throws UpstreamProtocolError for anything malformed or ambiguous, or a head over MAX_HEAD_BYTES.
 * `noBody` is for answers that have none whatever the headers say (a HEAD request).
 */
export function parseResponseHead(data: Buffer, noBody = false): ResponseHead | undefined {
  const end = data.indexOf('\r\n\r\n', 0, 'latin1');
  if (end < 0) {
    if (data.length > MAX_HEAD_BYTES) throw new UpstreamProtocolError('response head too large');
    return undefined;
  }
  if (end + 4 > MAX_HEAD_BYTES) throw new UpstreamProtocolError('response head too large');
  const lines = data.toString('latin1', 0, end).split('\r\n');
  const statusLine = STATUS_LINE.exec(lines[0] ?? '');
  if (!statusLine) throw new UpstreamProtocolError('malformed status line');
  const http10 = statusLine[1] === '0';
  const status = Number(statusLine[2]);
  if (status < 200) throw new UpstreamProtocolError(`unexpected interim response ${status}`);
  const rawHeaders: string[] = [];
  let contentLength: string | undefined;
  let transferEncoding: string | undefined;
  let connection = '';
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] as string;
    const colon = line.indexOf(':');
    // obs-fold (a line starting with whitespace), a bare CR or LF, and names with spaces are all refused.
    if (colon <= 0) throw new UpstreamProtocolError('malformed header line');
    const name = line.slice(0, colon);
    const value = line.slice(colon + 1).trim();
    if (!TOKEN.test(name) || !FIELD_VALUE.test(value))
      throw new UpstreamProtocolError(`malformed header ${name}`);
    const lower = name.toLowerCase();
    if (lower === 'content-length') {
      if (!/^\d{1,15}$/.test(value) || (contentLength !== undefined && contentLength !== value)) {
        throw new UpstreamProtocolError('invalid Content-Length');
      }
      contentLength = value;
    } else if (lower === 'transfer-encoding') {
      if (transferEncoding !== undefined) throw new UpstreamProtocolError('repeated Transfer-Encoding');
      transferEncoding = value.toLowerCase();
    } else if (lower === 'connection') {
      connection += `,${value.toLowerCase()}`;
    }
    rawHeaders.push(name, value);
  }
  let framing: BodyFraming;
  if (noBody || status === 204 || status === 304) framing = { kind: 'none' };
  else if (transferEncoding !== undefined) {
    // Both is how smuggling starts (RFC 9112 §6.3); any coding but chunked alone is not forwarded raw.
    if (contentLength !== undefined)
      throw new UpstreamProtocolError('both Transfer-Encoding and Content-Length');
    if (transferEncoding !== 'chunked')
      throw new UpstreamProtocolError(`unsupported Transfer-Encoding ${transferEncoding}`);
    framing = { kind: 'chunked' };
  } else if (contentLength !== undefined) {
    const length = Number(contentLength);
    framing = length === 0 ? { kind: 'none' } : { kind: 'length', length };
  } else framing = { kind: 'close' };
  const tokens = connection.split(',').map((t) => t.trim());
  const keepAlive =
    framing.kind !== 'close' && (http10 ? tokens.includes('keep-alive') : !tokens.includes('close'));
  return { status, statusMessage: statusLine[3] ?? '', rawHeaders, framing, keepAlive, headBytes: end + 4 };
}

/** What a piece of body tells the forwarder: forward [0, forwardEnd) of it; done once the body has ended. */
export interface ScanResult {
  /** Bytes of this piece (after any held back before it, see `held`) that may go to the caller. */
  forwardEnd: number;
  /**
   * Framing bytes of earlier pieces that were held back until they could be checked, and that now
   * go to the caller before [0, forwardEnd). Empty in the common case.
   */
  held: Buffer[];
  /** The response's last byte is in this piece. */
  done: boolean;
  /** Bytes after the response's end: the connection cannot be reused. */
  trailing: boolean;
}

/** Where the scanner is in the chunked framing (numbers: Node strips types, so no TypeScript enum). */
const State = {
  Size: 0,
  Extension: 1,
  SizeLf: 2,
  Data: 3,
  DataCr: 4,
  DataLf: 5,
  Trailer: 6,
  TrailerLf: 7,
  Done: 8,
} as const;
type State = (typeof State)[keyof typeof State];

/** A size line longer than this is refused (llhttp has no limit; kube-apiserver's are 2 to 6 bytes). */
const MAX_SIZE_LINE = 1024;
/** Twelve hex digits: 256 TiB, and well inside a double's exact integers. */
const MAX_SIZE_DIGITS = 12;
const MAX_TRAILER_BYTES = MAX_HEAD_BYTES;

function hexValue(byte: number): number {
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  if (byte >= 0x61 && byte <= 0x66) return byte - 0x57;
  if (byte >= 0x41 && byte <= 0x46) return byte - 0x37;
  return -1;
}

/**
 * Follows a chunked body (RFC 9112 §7.1) across the pieces it arrives in. Chunk data and each chunk's
 * size line pass as they are; the last chunk (`0`), its trailers and the final CRLF are not
 * forwarded: the caller's side writes its own end (Node's `res.end()` sends `0\r\n\r\n`), and
 * trailers are dropped, as the HTTP/2 path drops them. A size line split across pieces is held back
 * until it is complete and checked.
 */
export class ChunkedScanner {
  #state: State = State.Size;
  #size = 0;
  #digits = 0;
  #lineBytes = 0;
  #remaining = 0;
  #trailerBytes = 0;
  /** The pieces of a size line not yet complete (held back, not forwarded). */
  #held: Buffer[] = [];

  get done(): boolean {
    return this.#state === State.Done;
  }

  /** Throws UpstreamProtocolError at the first byte that breaks the framing. */
  scan(piece: Buffer): ScanResult {
    // Where the bytes not yet forwardable start in this piece (a size line in progress), or -1.
    let lineStart =
      this.#state === State.Size || this.#state === State.Extension || this.#state === State.SizeLf ? 0 : -1;
    const heldBefore = this.#held;
    this.#held = [];
    let released: Buffer[] = []; // heldBefore, once the size line they began is complete
    let forwardEnd = 0;
    let i = 0;
    const n = piece.length;
    while (i < n) {
      switch (this.#state) {
        case State.Data: {
          const take = Math.min(this.#remaining, n - i);
          this.#remaining -= take;
          i += take;
          forwardEnd = i;
          if (this.#remaining === 0) this.#state = State.DataCr;
          continue;
        }
        case State.DataCr:
          if (piece[i] !== 0x0d) throw new UpstreamProtocolError('chunk data not followed by CRLF');
          this.#state = State.DataLf;
          i++;
          forwardEnd = i;
          continue;
        case State.DataLf:
          if (piece[i] !== 0x0a) throw new UpstreamProtocolError('chunk data not followed by CRLF');
          this.#startSizeLine();
          i++;
          forwardEnd = i;
          lineStart = i;
          continue;
        case State.Size: {
          const byte = piece[i] as number;
          const value = hexValue(byte);
          this.#countLineByte();
          if (value >= 0) {
            if (++this.#digits > MAX_SIZE_DIGITS) throw new UpstreamProtocolError('chunk size too large');
            this.#size = this.#size * 16 + value;
          } else if (this.#digits === 0) {
            throw new UpstreamProtocolError('malformed chunk size');
          } else if (byte === 0x3b /* ; */ || byte === 0x20 || byte === 0x09) {
            this.#state = State.Extension;
          } else if (byte === 0x0d) {
            this.#state = State.SizeLf;
          } else throw new UpstreamProtocolError('malformed chunk size');
          i++;
          continue;
        }
        case State.Extension: {
          const byte = piece[i] as number;
          this.#countLineByte();
          if (byte === 0x0d) this.#state = State.SizeLf;
          else if (byte !== 0x09 && (byte < 0x20 || byte === 0x7f)) {
            throw new UpstreamProtocolError('malformed chunk extension');
          }
          i++;
          continue;
        }
        case State.SizeLf:
          if (piece[i] !== 0x0a) throw new UpstreamProtocolError('chunk size line not ended by CRLF');
          i++;
          if (this.#size === 0) {
            // The last chunk: neither it nor what follows goes to the caller.
            // (Bytes of this line held from earlier pieces were never released: they are dropped.)
            this.#state = State.Trailer;
            this.#lineBytes = 0;
            lineStart = -1;
            continue;
          }
          // A complete, valid size line: it and the data after it may go.
          if (lineStart === 0) released = heldBefore;
          this.#state = State.Data;
          this.#remaining = this.#size;
          forwardEnd = i;
          lineStart = -1;
          continue;
        case State.Trailer: {
          const byte = piece[i] as number;
          if (++this.#trailerBytes > MAX_TRAILER_BYTES) throw new UpstreamProtocolError('trailers too large');
          if (byte === 0x0d) this.#state = State.TrailerLf;
          else if (byte === 0x0a || (byte !== 0x09 && (byte < 0x20 || byte === 0x7f))) {
            throw new UpstreamProtocolError('malformed trailer');
          } else this.#lineBytes++;
          i++;
          continue;
        }
        case State.TrailerLf:
          if (piece[i] !== 0x0a) throw new UpstreamProtocolError('malformed trailer');
          i++;
          if (this.#lineBytes === 0) {
            this.#state = State.Done;
            return { forwardEnd, held: released, done: true, trailing: i < n };
          }
          this.#lineBytes = 0;
          this.#state = State.Trailer;
          continue;
        case State.Done:
          return { forwardEnd, held: released, done: true, trailing: true };
      }
    }
    // The piece ended inside a size line: hold its bytes (and any held before) until it completes.
    if (lineStart >= 0 && this.#state !== State.Data) {
      if (lineStart === 0) this.#held = [...heldBefore, piece.subarray(0, n)];
      else this.#held = [piece.subarray(lineStart, n)];
      if (lineStart === 0) return { forwardEnd: 0, held: [], done: false, trailing: false };
    }
    return { forwardEnd, held: released, done: false, trailing: false };
  }

  #startSizeLine(): void {
    this.#state = State.Size;
    this.#size = 0;
    this.#digits = 0;
    this.#lineBytes = 0;
  }

  #countLineByte(): void {
    if (++this.#lineBytes > MAX_SIZE_LINE) throw new UpstreamProtocolError('chunk size line too long');
  }
}

/**
 * A request target read the way a Go server reads it (net/url, Go 1.17 and
 * later), because a managed kube-apiserver is a Go server: what the gateway
 * authorizes with --authorize-proxy-subpath must be what that server
 * executes, and WHATWG's URLSearchParams reads some queries differently.
 *
 * Go's `URL.Query()` (url.ParseQuery):
 * - splits on `&` only, and silently drops every segment that holds a `;`
 *   (before Go 1.17, `;` was a separator: both readings exist in the wild);
 * - drops every segment whose key or value has a `%` not followed by two
 *   hex digits; URLSearchParams keeps such a segment, byte for byte;
 * - drops empty segments; a key without `=` has the value "";
 * - `+` is a space and `%XX` any byte: a value need not be UTF-8;
 * - reads nothing at all past GODEBUG urlmaxqueryparams (10,000 segments).
 *
 * `URL.Path` is the whole path percent-decoded once (`%2F` included); a bad
 * escape makes Go's server answer 400 before any handler runs.
 *
 * Strings here are Go strings rendered as JavaScript strings: decoded bytes
 * read as UTF-8, each byte that is not part of a valid UTF-8 sequence
 * becoming U+FFFD. That is exactly how Go's encoding/json writes such a
 * string, so a name in a SubjectAccessReview is the one the managed
 * cluster's audit log and authorizer would show.
 */

export interface GoQuery {
  /** The values Go reads, per key, in order of appearance. */
  values: Map<string, string[]>;
  /**
   * The raw query rebuilt from exactly the segments Go keeps, each byte for
   * byte as the caller sent it, joined with `&`; '' when none are kept.
   * Any Go version (and any parser that honours `&` and `%XX`) reads it as
   * `values`: no `;`, no malformed escape, no empty segment is left.
   */
  accepted: string;
  /** How many non-empty segments Go drops (a `;`, a malformed escape, or over the limit). */
  dropped: number;
}

/** GODEBUG urlmaxqueryparams' default: Go reads no parameter at all from a longer query. */
export const goMaxQueryParams = 10_000;

const BAD_ESCAPE = /%(?![0-9A-Fa-f]{2})/;

/** url.ParseQuery: the query without its leading '?'. */
export function parseGoQuery(rawQuery: string): GoQuery {
  const values = new Map<string, string[]>();
  if (rawQuery === '') return { values, accepted: '', dropped: 0 };
  const segments = rawQuery.split('&');
  if (segments.length > goMaxQueryParams) {
    return { values, accepted: '', dropped: segments.filter((s) => s !== '').length };
  }
  const kept: string[] = [];
  let dropped = 0;
  for (const segment of segments) {
    if (segment === '') continue;
    // A malformed escape in the key or in the value drops the segment; an
    // escape cannot span the '=' (not a hex digit), so checking the whole
    // segment is the same as checking both halves.
    if (segment.includes(';') || BAD_ESCAPE.test(segment)) {
      dropped++;
      continue;
    }
    const eq = segment.indexOf('=');
    const key = goQueryUnescape(eq === -1 ? segment : segment.slice(0, eq));
    const value = eq === -1 ? '' : goQueryUnescape(segment.slice(eq + 1));
    const list = values.get(key);
    if (list) list.push(value);
    else values.set(key, [value]);
    kept.push(segment);
  }
  return { values, accepted: kept.join('&'), dropped };
}

/**
 * url.QueryUnescape of a component already known to be well-formed: `+` is
 * a space, `%XX` a byte.
 */
function goQueryUnescape(component: string): string {
  if (!component.includes('%') && !component.includes('+')) return goStringFromRaw(component);
  return goString(rawBytes(component, true));
}

/**
 * URL.Path: the raw path percent-decoded once (`+` stays `+`). Undefined
 * when Go's server would refuse the request target (a malformed escape).
 */
export function goPathUnescape(rawPath: string): string | undefined {
  if (BAD_ESCAPE.test(rawPath)) return undefined;
  if (!rawPath.includes('%')) return goStringFromRaw(rawPath);
  return goString(rawBytes(rawPath, false));
}

// Node hands over the request target as latin1: one character per byte
// received. A character above 0xFF can only come from a caller-built string;
// it stands for its UTF-8 bytes.
function goStringFromRaw(raw: string): string {
  // Printable ASCII is the same in every reading.
  if (/^[\x20-\x7e]*$/.test(raw)) return raw;
  return goString(rawBytes(raw, false));
}

function rawBytes(raw: string, plusIsSpace: boolean): Uint8Array {
  const bytes: number[] = [];
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c === 0x25 /* % */) {
      bytes.push(Number.parseInt(raw.slice(i + 1, i + 3), 16));
      i += 2;
    } else if (c === 0x2b /* + */ && plusIsSpace) {
      bytes.push(0x20);
    } else if (c <= 0xff) {
      bytes.push(c);
    } else {
      for (const b of Buffer.from(String.fromCodePoint(raw.codePointAt(i)!), 'utf8')) bytes.push(b);
      if (c >= 0xd800 && c <= 0xdbff) i++;
    }
  }
  return Uint8Array.from(bytes);
}

/**
 * Bytes as Go's encoding/json renders a string: valid UTF-8 sequences
 * decoded (unicode/utf8 rules: no overlong forms, no surrogates, nothing
 * above U+10FFFF), every other byte U+FFFD on its own.
 */
export function goString(bytes: Uint8Array): string {
  let out = '';
  let i = 0;
  while (i < bytes.length) {
    const b0 = bytes[i]!;
    if (b0 < 0x80) {
      out += String.fromCharCode(b0);
      i++;
      continue;
    }
    const [size, lo, hi] = leadingByte(b0);
    let valid = size > 0 && i + size <= bytes.length;
    if (valid) {
      const b1 = bytes[i + 1]!;
      valid = b1 >= lo && b1 <= hi;
      for (let k = 2; valid && k < size; k++) valid = (bytes[i + k]! & 0xc0) === 0x80;
    }
    if (!valid) {
      out += '\uFFFD';
      i++;
      continue;
    }
    let cp = b0 & (size === 2 ? 0x1f : size === 3 ? 0x0f : 0x07);
    for (let k = 1; k < size; k++) cp = (cp << 6) | (bytes[i + k]! & 0x3f);
    out += String.fromCodePoint(cp);
    i += size;
  }
  return out;
}

/** Sequence length and the accepted range of the second byte, as utf8.DecodeRune's table. */
function leadingByte(b: number): [size: number, lo: number, hi: number] {
  if (b >= 0xc2 && b <= 0xdf) return [2, 0x80, 0xbf];
  if (b === 0xe0) return [3, 0xa0, 0xbf];
  if (b === 0xed) return [3, 0x80, 0x9f];
  if (b >= 0xe1 && b <= 0xef) return [3, 0x80, 0xbf];
  if (b === 0xf0) return [4, 0x90, 0xbf];
  if (b >= 0xf1 && b <= 0xf3) return [4, 0x80, 0xbf];
  if (b === 0xf4) return [4, 0x80, 0x8f];
  return [0, 0, 0];
}

/**
 * Identity header values as Go writes and reads them: UTF-8 bytes.
 *
 * Kubernetes keeps a user name, group or extra value as a Go string, i.e. its UTF-8 bytes, and
 * puts those bytes on the wire as they are (the aggregator's X-Remote-*, client-go's
 * Impersonate-*); its requestheader authenticator and impersonation filter read them back the same
 * way. Node does neither: it hands header values over as latin1 strings (one character per byte)
 * and writes strings as latin1, refusing characters above U+00FF. Without these two conversions a
 * hub user `h-jösé` becomes `h-jÃ¶sÃ©` on the way in and the invalid-UTF-8 `h-j\xF6s\xE9` on the
 * way out.
 */

const NON_ASCII = /[\u0080-\uffff]/;
const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The text of a header value Node read (latin1: one character per byte) whose bytes are UTF-8.
 * Undefined when the bytes are not valid UTF-8: no identity is guessed from them (a latin1
 * reading would name a different user than the sender meant).
 */
export function utf8HeaderValue(nodeValue: string): string | undefined {
  if (!NON_ASCII.test(nodeValue)) return nodeValue;
  // Characters above U+00FF cannot come from Node's parser; refuse rather than truncate them.
  if (/[\u0100-\uffff]/.test(nodeValue)) return undefined;
  try {
    return strictUtf8.decode(Buffer.from(nodeValue, 'latin1'));
  } catch {
    return undefined;
  }
}

/**
 * The string to give Node so that the value's UTF-8 bytes reach the wire, as Go's net/http writes
 * them: every non-ASCII character (latin1 ones too, which Node would otherwise send as one byte).
 */
export function utf8WireValue(text: string): string {
  return NON_ASCII.test(text) ? Buffer.from(text, 'utf8').toString('latin1') : text;
}

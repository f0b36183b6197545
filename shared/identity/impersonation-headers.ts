/**
 * Kubernetes' impersonation headers, written as client-go's impersonating round tripper writes them:
 * what a kube-apiserver reads to act as another user.
 */
import { utf8WireValue } from './header-encoding.ts';
import type { UserInfo } from './user.ts';

/** A raw header array, `[name, value, name, value, ...]` (Node's `req.rawHeaders` shape). */
type RawHeaders = string[];

/**
 * Appends Impersonate-User, -Uid, -Group (one line each) and -Extra-<key>
 * (one line per value), exactly as client-go's impersonating round tripper.
 */
export function appendImpersonation(out: RawHeaders, identity: UserInfo): void {
  out.push('Impersonate-User', wireValue(identity.name));
  if (identity.uid) out.push('Impersonate-Uid', wireValue(identity.uid));
  for (const group of identity.groups) out.push('Impersonate-Group', wireValue(group));
  for (const key of Object.keys(identity.extra)) {
    const name = 'Impersonate-Extra-' + escapeExtraKey(key);
    for (const value of identity.extra[key] ?? []) out.push(name, wireValue(value));
  }
}

/**
 * client-go's headerKeyEscape: a header name may only hold RFC 7230 token
 * characters, so every other byte of the UTF-8 key, and '%' itself, becomes
 * %XX (upper case). `example.com/team` → `example.com%2Fteam`; the API server
 * unescapes it back.
 */
export function escapeExtraKey(key: string): string {
  let out = '';
  for (const byte of Buffer.from(key, 'utf8')) {
    out += isTokenByte(byte) && byte !== 0x25 ? String.fromCharCode(byte) : '%' + hex(byte);
  }
  return out;
}

function hex(byte: number): string {
  return byte.toString(16).toUpperCase().padStart(2, '0');
}

/** RFC 7230 tchar, as a lookup table built once. */
const TOKEN_BYTES = new Uint8Array(128);
for (const c of "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&'*+-.^_`|~") {
  TOKEN_BYTES[c.charCodeAt(0)] = 1;
}

function isTokenByte(b: number): boolean {
  return b < 128 && TOKEN_BYTES[b] === 1;
}

/**
 * Node writes header strings as latin1 and rejects characters above U+00FF.
 * User names, groups and extra values may be any UTF-8 (OIDC claims, certificate
 * CNs): send their UTF-8 bytes, as Go does, for every non-ASCII character
 * (header-encoding.ts); a latin1 `ö` sent as one byte would be another name.
 */
function wireValue(value: string): string {
  return utf8WireValue(value);
}

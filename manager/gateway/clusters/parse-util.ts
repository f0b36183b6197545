/**
 * Small parsers shared by the Secret and ManagedCluster sources. They return
 * a problem message instead of throwing: a bad cluster must show up with a
 * clear reason, never vanish or take the registry down.
 */

export type Parsed<T> = { ok: true; value: T } | { ok: false; problem: string };

/**
 * A managed kube-apiserver address. Like client-go's defaultServerUrlFor, an
 * address without a scheme means https. The text is kept as written (no
 * trailing slash added) because the proxy joins request paths onto it.
 */
export function parseEndpointAddress(raw: string, source: string): Parsed<string> {
  const text = raw.trim();
  if (!text) return { ok: false, problem: `${source} is empty` };
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `https://${text}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    return { ok: false, problem: `${source} ${JSON.stringify(text)} is not a valid URL` };
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    return { ok: false, problem: `${source} ${JSON.stringify(text)} must use https:// or http://` };
  }
  if (!url.hostname) return { ok: false, problem: `${source} ${JSON.stringify(text)} has no host` };
  return { ok: true, value: withScheme };
}

const proxySchemes = new Set(['http:', 'https:', 'socks5:', 'socks5h:']);

/** An egress proxy URL: http, https or socks5 (what Go's http.ProxyURL accepts). */
export function parseProxyUrl(raw: string, source: string): Parsed<string> {
  const text = raw.trim();
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { ok: false, problem: `${source} ${JSON.stringify(redactUrlPassword(text))} is not a valid URL` };
  }
  if (!proxySchemes.has(url.protocol)) {
    return {
      ok: false,
      problem: `${source} scheme ${url.protocol.replace(/:$/, '')} is not supported (use http, https or socks5)`,
    };
  }
  return { ok: true, value: text };
}

/**
 * Proxy URLs may carry a password: never echo it in a message or an API
 * object. Like Go's url.Redacted, the password becomes "xxxxx".
 */
export function redactUrlPassword(text: string): string {
  return text.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/@:]*):[^/@]*@/i, '$1:xxxxx@');
}

/** True if the text holds at least one PEM certificate block. */
export function isPemCertificate(text: string): boolean {
  return /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.test(text);
}

/** Go's strconv.ParseBool, which the original uses for the healthy annotation. */
export function parseGoBool(text: string): boolean | undefined {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(text)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(text)) return false;
  return undefined;
}

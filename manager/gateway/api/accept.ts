/**
 * Accept header parsing. Kubernetes clients select alternative
 * representations with media type parameters, e.g.
 * `application/json;as=Table;v=v1;g=meta.k8s.io` (kubectl get) or
 * `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`
 * (the aggregator's discovery), usually listing fallbacks after them.
 */

export interface MediaRange {
  type: string;
  subtype: string;
  /** Lower-cased parameter names; q is removed. */
  params: Record<string, string>;
  q: number;
}

/** Ranges by descending q, ties in header order (like Kubernetes' negotiation). */
export function parseAccept(header: string | undefined): MediaRange[] {
  const text = header?.trim() || '*/*';
  const ranges: MediaRange[] = [];
  for (const part of text.split(',')) {
    const [mediaType = '', ...paramTexts] = part.split(';').map((s) => s.trim());
    if (!mediaType) continue;
    const [type = '', subtype = '*'] = mediaType.toLowerCase().split('/');
    const params: Record<string, string> = {};
    let q = 1;
    for (const param of paramTexts) {
      const eq = param.indexOf('=');
      if (eq < 0) continue;
      const name = param.slice(0, eq).trim().toLowerCase();
      const value = param
        .slice(eq + 1)
        .trim()
        .replace(/^"(.*)"$/, '$1');
      if (name === 'q') q = Number.isFinite(Number(value)) ? Number(value) : 0;
      else params[name] = value;
    }
    if (q > 0) ranges.push({ type, subtype, params, q });
  }
  return ranges
    .map((range, index) => ({ range, index }))
    .sort((a, b) => b.range.q - a.range.q || a.index - b.index)
    .map(({ range }) => range);
}

/** application/json, application/*, or *\/*. */
export function acceptsJson(range: MediaRange): boolean {
  return (
    (range.type === 'application' && (range.subtype === 'json' || range.subtype === '*')) ||
    (range.type === '*' && range.subtype === '*')
  );
}

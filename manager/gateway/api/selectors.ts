/**
 * labelSelector and fieldSelector, with the grammar and semantics of
 * k8s.io/apimachinery/pkg/labels and pkg/fields:
 *
 *   label:  key | !key | key=v | key==v | key!=v | key in (a,b) |
 *           key notin (a,b) | key>n | key<n      (comma = AND)
 *   field:  f=v | f==v | f!=v                  (comma = AND, \ escapes)
 *
 * Like Kubernetes, `!=` and `notin` also match objects without the label.
 * A malformed selector is a 400 with a message that says what is wrong.
 */
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';

type Operator = 'exists' | '!' | '=' | '!=' | 'in' | 'notin' | '>' | '<';

export interface Requirement {
  key: string;
  operator: Operator;
  values: string[];
}

export interface LabelSelector {
  readonly requirements: readonly Requirement[];
  matches(labels: Record<string, string> | undefined): boolean;
}

export interface FieldSelector {
  readonly terms: readonly { field: string; operator: '=' | '!='; value: string }[];
  matches(fields: Record<string, string>): boolean;
}

function invalid(kind: 'label' | 'field', selector: string, detail: string): StatusError {
  return new StatusError(
    failureStatus(400, `invalid ${kind} selector ${JSON.stringify(selector)}: ${detail}`),
  );
}

const nameRe = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const subdomainRe = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A label key: [DNS-subdomain prefix "/"] name, name at most 63 characters. */
export function labelKeyError(key: string): string | undefined {
  const slash = key.lastIndexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && (!prefix || prefix.length > 253 || !subdomainRe.test(prefix))) {
    return `key ${JSON.stringify(key)}: prefix must be a DNS subdomain`;
  }
  if (!name || name.length > 63 || !nameRe.test(name)) {
    return `key ${JSON.stringify(key)}: name must be 63 characters or less, alphanumerics with '-', '_' or '.' inside`;
  }
  return undefined;
}

export function labelValueError(value: string): string | undefined {
  if (value === '') return undefined;
  if (value.length > 63 || !nameRe.test(value)) {
    return `value ${JSON.stringify(value)} must be 63 characters or less, alphanumerics with '-', '_' or '.' inside`;
  }
  return undefined;
}

type Token =
  | { kind: 'word'; text: string }
  | { kind: 'op'; text: '!' | '=' | '==' | '!=' | '>' | '<' }
  | { kind: 'open' | 'close' | 'comma' };

const special = new Set(['!', '=', '>', '<', '(', ')', ',']);

function tokenize(text: string, fail: (detail: string) => StatusError): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i] ?? '';
    if (/\s/.test(c)) {
      i++;
    } else if (c === '(') {
      tokens.push({ kind: 'open' });
      i++;
    } else if (c === ')') {
      tokens.push({ kind: 'close' });
      i++;
    } else if (c === ',') {
      tokens.push({ kind: 'comma' });
      i++;
    } else if (c === '!' || c === '=') {
      const two = text.slice(i, i + 2);
      if (two === '!=' || two === '==') {
        tokens.push({ kind: 'op', text: two });
        i += 2;
      } else {
        tokens.push({ kind: 'op', text: c });
        i++;
      }
    } else if (c === '>' || c === '<') {
      tokens.push({ kind: 'op', text: c });
      i++;
    } else {
      let j = i;
      while (j < text.length && !special.has(text[j] ?? '') && !/\s/.test(text[j] ?? '')) j++;
      if (j === i) throw fail(`unexpected character ${JSON.stringify(c)}`);
      tokens.push({ kind: 'word', text: text.slice(i, j) });
      i = j;
    }
  }
  return tokens;
}

export function parseLabelSelector(selector: string | null | undefined): LabelSelector {
  const text = selector ?? '';
  const fail = (detail: string) => invalid('label', text, detail);
  const tokens = tokenize(text, fail);
  const requirements: Requirement[] = [];
  let pos = 0;
  const peek = () => tokens[pos];
  const next = () => tokens[pos++];
  const describe = (t: Token | undefined) =>
    !t ? 'end of selector' : t.kind === 'word' || t.kind === 'op' ? JSON.stringify(t.text) : t.kind;

  while (pos < tokens.length) {
    let negated = false;
    if (peek()?.kind === 'op' && (peek() as { text: string }).text === '!') {
      negated = true;
      pos++;
    }
    const keyToken = next();
    if (keyToken?.kind !== 'word') throw fail(`expected a label key, found ${describe(keyToken)}`);
    const key = keyToken.text;
    const keyError = labelKeyError(key);
    if (keyError) throw fail(keyError);

    const after = peek();
    if (negated || !after || after.kind === 'comma') {
      if (negated && after && after.kind !== 'comma') {
        throw fail(`"!${key}" takes no operator, found ${describe(after)}`);
      }
      requirements.push({ key, operator: negated ? '!' : 'exists', values: [] });
    } else if (after.kind === 'op') {
      pos++;
      const op = after.text === '==' ? '=' : after.text;
      if (op === '!') throw fail(`unexpected "!" after key ${JSON.stringify(key)}`);
      // An empty value is legal for = and != ("key=" matches an empty label).
      const valueToken = peek();
      let value = '';
      if (valueToken?.kind === 'word') {
        value = valueToken.text;
        pos++;
      } else if (op === '>' || op === '<') {
        throw fail(`operator ${op} for key ${JSON.stringify(key)} needs an integer value`);
      }
      if ((op === '>' || op === '<') && !/^-?\d+$/.test(value)) {
        throw fail(
          `operator ${op} for key ${JSON.stringify(key)} needs an integer value, found ${JSON.stringify(value)}`,
        );
      }
      if (op === '=' || op === '!=') {
        const valueError = labelValueError(value);
        if (valueError) throw fail(valueError);
      }
      requirements.push({ key, operator: op, values: [value] });
    } else if (after.kind === 'word' && (after.text === 'in' || after.text === 'notin')) {
      pos++;
      if (next()?.kind !== 'open') throw fail(`expected "(" after ${after.text}`);
      const values: string[] = [];
      let expectValue = true;
      for (;;) {
        const t = next();
        if (!t) throw fail(`missing ")" for ${after.text} on key ${JSON.stringify(key)}`);
        if (t.kind === 'close') {
          if (expectValue && values.length) values.push('');
          break;
        }
        if (t.kind === 'comma') {
          if (expectValue) values.push('');
          expectValue = true;
        } else if (t.kind === 'word' && expectValue) {
          const valueError = labelValueError(t.text);
          if (valueError) throw fail(valueError);
          values.push(t.text);
          expectValue = false;
        } else {
          throw fail(`unexpected ${describe(t)} in the value list of key ${JSON.stringify(key)}`);
        }
      }
      if (!values.length) throw fail(`${after.text} needs at least one value for key ${JSON.stringify(key)}`);
      requirements.push({ key, operator: after.text, values });
    } else {
      throw fail(`expected an operator after key ${JSON.stringify(key)}, found ${describe(after)}`);
    }

    const separator = next();
    if (separator && separator.kind !== 'comma') {
      throw fail(`expected "," between requirements, found ${describe(separator)}`);
    }
    if (separator && pos >= tokens.length) throw fail('trailing ","');
  }

  return {
    requirements,
    matches: (labels) => requirements.every((r) => matchRequirement(r, labels ?? {})),
  };
}

function matchRequirement(r: Requirement, labels: Record<string, string>): boolean {
  const has = Object.hasOwn(labels, r.key);
  const value = labels[r.key];
  switch (r.operator) {
    case 'exists':
      return has;
    case '!':
      return !has;
    case '=':
    case 'in':
      return has && r.values.includes(value ?? '');
    case '!=':
    case 'notin':
      return !has || !r.values.includes(value ?? '');
    case '>':
    case '<': {
      if (!has || !/^-?\d+$/.test(value ?? '')) return false;
      const actual = Number(value);
      const bound = Number(r.values[0]);
      return r.operator === '>' ? actual > bound : actual < bound;
    }
  }
}

/** The fields a ClusterGateway can be selected by (the generic registry's cluster-scoped default). */
export const supportedFields = ['metadata.name'] as const;

export function parseFieldSelector(
  selector: string | null | undefined,
  supported: readonly string[] = supportedFields,
): FieldSelector {
  const text = selector ?? '';
  const terms: { field: string; operator: '=' | '!='; value: string }[] = [];
  for (const part of splitUnescaped(text, ',')) {
    if (!part.trim()) {
      if (text.trim()) throw invalid('field', text, 'empty term');
      continue;
    }
    const match = /^(.*?)(!=|==|=)(.*)$/s.exec(findUnescapedOperator(part));
    if (!match)
      throw invalid('field', text, `term ${JSON.stringify(part)} has no operator (use =, == or !=)`);
    const field = unescapeSelector(part.slice(0, match[1]?.length)).trim();
    const operator = match[2] === '!=' ? '!=' : '=';
    const value = unescapeSelector(part.slice((match[1]?.length ?? 0) + (match[2]?.length ?? 0)));
    if (!supported.includes(field)) {
      throw new StatusError(failureStatus(400, `field label not supported: ${field}`));
    }
    terms.push({ field, operator, value });
  }
  return {
    terms,
    matches: (fields) =>
      terms.every((t) => (t.operator === '=' ? fields[t.field] === t.value : fields[t.field] !== t.value)),
  };
}

/** Splits on a separator not preceded by a backslash escape. */
function splitUnescaped(text: string, separator: string): string[] {
  const parts: string[] = [];
  let current = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i] ?? '';
    if (c === '\\' && i + 1 < text.length) {
      current += c + (text[i + 1] ?? '');
      i++;
    } else if (c === separator) {
      parts.push(current);
      current = '';
    } else current += c;
  }
  parts.push(current);
  return parts;
}

/** Masks escaped characters so the operator regex only sees real operators (same length). */
function findUnescapedOperator(term: string): string {
  return term.replace(/\\./g, '__');
}

function unescapeSelector(text: string): string {
  return text.replace(/\\(.)/g, '$1');
}

/**
 * The original's userPattern / groupPattern / clusterPattern are Go RE2
 * expressions used with regexp.Match: unanchored, so "ext-" matches
 * "my-ext-user" (write ^ and $ to anchor). This compiles them to JavaScript
 * RegExps with the same meaning for the syntax both share, translates the
 * few RE2 spellings JavaScript lacks, and refuses what RE2 refuses
 * (lookaround, backreferences): such a pattern never worked in the
 * original, and those constructs are what makes a backtracking engine's
 * matching time unbounded.
 */

export const MAX_PATTERN_LENGTH = 1024;

/** A compiled pattern, or the reason it cannot be used (for the field's message). */
export function compilePattern(pattern: string): RegExp | string {
  if (pattern.length > MAX_PATTERN_LENGTH) return `longer than ${MAX_PATTERN_LENGTH} characters`;
  let body = pattern;
  let flags = 'u';
  // RE2's leading flag group, (?i) or (?is): JavaScript takes flags separately.
  const leading = /^\(\?([a-zA-Z]+)\)/.exec(body);
  if (leading) {
    for (const flag of leading[1]!) {
      if (flag === 'U')
        return 'the ungreedy flag (?U) has no JavaScript equivalent; write lazy quantifiers instead';
      if (!'ism'.includes(flag)) return `unknown flag "${flag}" in (?${leading[1]})`;
      if (!flags.includes(flag)) flags += flag;
    }
    body = body.slice(leading[0].length);
  }
  if (/\(\?<?[=!]/.test(body)) return 'lookaround ((?=, (?!, (?<=, (?<!) is not RE2 syntax';
  if (/\\[1-9]|\\k</.test(body)) return 'backreferences are not RE2 syntax';
  body = translateEscapes(body).replace(/\(\?P</g, '(?<');
  try {
    return new RegExp(body, flags);
  } catch (err) {
    return `not a valid regular expression: ${(err as Error).message.replace(/^Invalid regular expression: /, '')}`;
  }
}

/** RE2's \A and \z (start and end of text) are JavaScript's ^ and $ without the m flag. */
function translateEscapes(body: string): string {
  let out = '';
  for (let i = 0; i < body.length; i++) {
    const char = body[i]!;
    if (char !== '\\' || i + 1 >= body.length) {
      out += char;
      continue;
    }
    const next = body[++i]!;
    if (next === 'A') out += '^';
    else if (next === 'z') out += '$';
    else out += `\\${next}`;
  }
  return out;
}

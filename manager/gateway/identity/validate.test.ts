import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type FieldProblem, InvalidConfigurationError } from './configuration.ts';
import { validateSpec } from './validate.ts';

const origin = 'test';

function problems(spec: unknown): FieldProblem[] {
  try {
    validateSpec(spec, origin);
  } catch (err) {
    assert.ok(err instanceof InvalidConfigurationError);
    return err.problems;
  }
  assert.fail('expected the spec to be refused');
}

function rules(...list: unknown[]) {
  return { clientIdentityExchanger: { rules: list } };
}

test("the seed's example is accepted, and rules run by priority (highest first), ties in written order", () => {
  const config = validateSpec(
    rules(
      { name: 'super-user', source: { group: 'sudoer' }, type: 'PrivilegedIdentityExchanger', priority: 10 },
      {
        name: 'mapping',
        source: { user: 'user-12345', cluster: 'cluster-34567' },
        target: { user: 'user-34567' },
        type: 'StaticMappingIdentityExchanger',
        priority: 100,
      },
      {
        name: 'external',
        source: { userPattern: 'ext-*' },
        url: 'https://external.exchanger/',
        type: 'ExternalIdentityExchanger',
        priority: 20,
      },
      { name: 'tie-a', source: { user: 'a' }, type: 'PrivilegedIdentityExchanger', priority: 20 },
      { name: 'no-priority', source: { user: 'b' }, type: 'PrivilegedIdentityExchanger' },
    ),
    origin,
  );
  assert.deepEqual(
    config.rules.map((r) => r.name),
    ['mapping', 'external', 'tie-a', 'super-user', 'no-priority'],
  );
  const mapping = config.rules[0]!;
  assert.equal(mapping.type, 'StaticMappingIdentityExchanger');
  if (mapping.type === 'StaticMappingIdentityExchanger')
    assert.deepEqual(mapping.target, { user: 'user-34567', groups: [] });
  const external = config.rules[1]!;
  assert.equal(external.type, 'ExternalIdentityExchanger');
  if (external.type === 'ExternalIdentityExchanger') {
    assert.equal(external.external.url.href, 'https://external.exchanger/');
    assert.equal(external.external.timeoutMs, 5000);
    assert.equal(external.external.cacheTtlMs, 60_000);
  }
  assert.equal(config.authorizeProxySubpath, undefined);
});

test('an empty or absent spec is a valid configuration with no rules', () => {
  for (const spec of [undefined, null, {}, { clientIdentityExchanger: {} }, rules()]) {
    assert.deepEqual(validateSpec(spec, origin).rules, []);
  }
  assert.equal(validateSpec({ authorizeProxySubpath: true }, origin).authorizeProxySubpath, true);
});

test('every problem is reported with the field it is in', () => {
  const found = problems({
    authorizeProxySubpath: 'yes please',
    clientIdentityExchanger: {
      rules: [
        { name: 'bad-pattern', source: { userPattern: 'ext-(' }, type: 'PrivilegedIdentityExchanger' },
        { name: 'no-type', source: { user: 'x' } },
        { name: 'typo', source: { userPatern: 'x' }, type: 'PrivilegedIdentityExchanger' },
        { name: 'no-target', source: { user: 'x' }, type: 'StaticMappingIdentityExchanger' },
        { name: 'http', source: { user: 'x' }, type: 'ExternalIdentityExchanger', url: 'http://x/' },
        { name: 'bad-type', source: { user: 'x' }, type: 'Magic' },
        { name: 'bad-type', source: { user: 'x' }, type: 'PrivilegedIdentityExchanger', url: 'https://x' },
        { source: { user: 'x' }, type: 'PrivilegedIdentityExchanger' },
        {
          name: 'groups-only',
          source: { user: 'x' },
          type: 'StaticMappingIdentityExchanger',
          target: { groups: ['g'] },
        },
        { name: 'numeric', source: { uid: 12345 }, type: 'PrivilegedIdentityExchanger' },
      ],
    },
  });
  const fields = new Map(found.map((p) => [p.field, p.message]));
  const r = 'spec.clientIdentityExchanger.rules';
  assert.match(fields.get('spec.authorizeProxySubpath') ?? '', /true or false/);
  assert.match(fields.get(`${r}[0].source.userPattern`) ?? '', /"ext-\(": not a valid regular expression/);
  assert.match(fields.get(`${r}[1].type`) ?? '', /required/);
  assert.match(fields.get(`${r}[2].source.userPatern`) ?? '', /unknown field/);
  assert.match(fields.get(`${r}[2].source`) ?? '', /at least one of/);
  assert.match(fields.get(`${r}[3].target`) ?? '', /required/);
  assert.match(fields.get(`${r}[4].url`) ?? '', /https/);
  assert.match(fields.get(`${r}[5].type`) ?? '', /unknown type "Magic"/);
  assert.match(fields.get(`${r}[6].url`) ?? '', /only an ExternalIdentityExchanger/);
  assert.match(fields.get(`${r}[6].name`) ?? '', /already the name of rules\[5\]/);
  assert.match(fields.get(`${r}[7].name`) ?? '', /required/);
  assert.match(fields.get(`${r}[8].target.user`) ?? '', /without a user/);
  assert.match(fields.get(`${r}[9].source.uid`) ?? '', /must be a string, got number/);
});

test('a rule without a source or with an empty one is refused, not turned into "never" or "everyone"', () => {
  assert.match(
    problems(rules({ name: 'x', type: 'PrivilegedIdentityExchanger' }))[0]!.message,
    /never matches/,
  );
  assert.match(
    problems(rules({ name: 'x', type: 'PrivilegedIdentityExchanger', source: {} }))[0]!.message,
    /at least one of/,
  );
});

test('external exchanger settings are checked: URL, CA bundle, timeout and cache TTL bounds', () => {
  const base = { name: 'ext', source: { user: 'x' }, type: 'ExternalIdentityExchanger' };
  const cases: Array<[Record<string, unknown>, string, RegExp]> = [
    [{ url: 'https://u:p@host/' }, 'url', /credentials/],
    [{ url: 'not a url' }, 'url', /not a URL/],
    [{ url: 'https://h/#frag' }, 'url', /fragment/],
    [{ url: 'https://h/', caBundle: 'hello' }, 'caBundle', /no PEM certificate/],
    [
      { url: 'https://h/', caBundle: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----' },
      'caBundle',
      /cannot be parsed/,
    ],
    [{ url: 'https://h/', timeoutSeconds: 0 }, 'timeoutSeconds', /1 to 30/],
    [{ url: 'https://h/', timeoutSeconds: 1.5 }, 'timeoutSeconds', /whole number/],
    [{ url: 'https://h/', cacheTTLSeconds: 7200 }, 'cacheTTLSeconds', /0 to 3600/],
  ];
  for (const [extra, field, message] of cases) {
    const found = problems(rules({ ...base, ...extra }));
    assert.equal(found[0]?.field, `spec.clientIdentityExchanger.rules[0].${field}`, JSON.stringify(extra));
    assert.match(found[0]!.message, message);
  }
  const ok = validateSpec(
    rules({ ...base, url: 'https://h/x?y=1', timeoutSeconds: 2, cacheTTLSeconds: 0 }),
    origin,
  );
  const rule = ok.rules[0]!;
  assert.ok(rule.type === 'ExternalIdentityExchanger');
  assert.equal(rule.external.timeoutMs, 2000);
  assert.equal(rule.external.cacheTtlMs, 0);
});

test('too many rules and bad priorities are refused', () => {
  const many = Array.from({ length: 129 }, (_, i) => ({
    name: `r${i}`,
    source: { user: 'x' },
    type: 'PrivilegedIdentityExchanger',
  }));
  assert.match(problems(rules(...many))[0]!.message, /at most 128/);
  assert.match(
    problems(
      rules({ name: 'x', source: { user: 'x' }, type: 'PrivilegedIdentityExchanger', priority: 'high' }),
    )[0]!.message,
    /whole number/,
  );
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { configSpecHash, goJson } from './spec-hash.ts';

// Expected values from Go 1.26 (encoding/json + crypto/sha256, as addon-framework's GetSpecHash).
describe('configSpecHash', () => {
  const config = {
    apiVersion: 'x',
    metadata: { name: 'a' },
    spec: {
      customizedVariables: [{ name: 'LOG_LEVEL', value: 'a<b>&c\u2028 é 😀 \u0001\b\f\n' }],
      nodePlacement: { tolerations: [{ key: 'edge', operator: 'Exists', tolerationSeconds: 300 }] },
      zeta: 1.5,
      big: 1e21,
      small: 0.0000001,
      agentInstallNamespace: 'ns',
    },
    status: {},
  };

  test("byte for byte Go's json.Marshal: sorted keys, HTML and line-separator escapes, numbers", () => {
    assert.equal(
      goJson({ spec: config.spec }),
      '{"spec":{"agentInstallNamespace":"ns","big":1e+21,"customizedVariables":[{"name":"LOG_LEVEL","value":"a\\u003cb\\u003e\\u0026c\\u2028 é 😀 \\u0001\\b\\f\\n"}],"nodePlacement":{"tolerations":[{"key":"edge","operator":"Exists","tolerationSeconds":300}]},"small":1e-7,"zeta":1.5}}',
    );
  });

  test('the sha256 Go computes; apiVersion, kind, metadata and status do not count', () => {
    const expected = '2014b923f9725169121f458ab851d1ae6ca7854d827c68d42644cc7a4c27ca9b';
    assert.equal(configSpecHash(config), expected);
    assert.equal(
      configSpecHash({ ...config, kind: 'Other', metadata: { name: 'b', resourceVersion: '9' } }),
      expected,
    );
    assert.notEqual(configSpecHash({ ...config, spec: { ...config.spec, zeta: 2 } }), expected);
  });

  test('an empty spec, and keys sorted by UTF-8 bytes (not UTF-16 units)', () => {
    assert.equal(
      configSpecHash({ spec: {} }),
      '53aa778a9b137a0ca7ab79937d069870b14440dae5922f51d940ffa4b178d5cb',
    );
    // U+FF61 (UTF-8 EF BD A1) sorts before U+1F600 (F0 ...); in UTF-16 units it would come after.
    assert.equal(goJson({ '😀': 1, '｡': 2 }), '{"｡":2,"😀":1}');
    assert.equal(goJson('\ud800'), '"\ufffd"');
  });
});

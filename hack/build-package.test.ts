import assert from 'node:assert/strict';
import { test } from 'node:test';
import { distProblems } from './build-package.ts';

const bins = {
  'cluster-gateway': 'dist/client/cli/main.js',
  'kubectl-cluster_gateway': 'dist/client/cli/main.js',
};
const shebang = '#!/usr/bin/env node\nconsole.log(1);\n';

test('a dist/ of the client and the shared files it imports, with its bin, is fit to pack', () => {
  const files = ['client/index.js', 'client/index.d.ts', 'client/cli/main.js', 'shared/kube/client.js'];
  assert.deepEqual(
    distProblems(files, bins, () => shebang),
    [],
  );
});

test('test code, hub or spoke code, a missing bin and a bin without its shebang are each named', () => {
  const problems = distProblems(
    ['client/index.js', 'client/backoff.test.js', 'shared/test-kit.js', 'manager/gateway/main.js'],
    { 'cluster-gateway': 'dist/client/cli/main.js' },
    () => shebang,
  );
  assert.equal(problems.length, 4, problems.join('\n'));
  assert.match(problems[0] ?? '', /backoff\.test\.js is test code/);
  assert.match(problems[1] ?? '', /test-kit\.js is test code/);
  assert.match(problems[2] ?? '', /imports manager\//);
  assert.match(problems[3] ?? '', /dist\/client\/cli\/main\.js was not built/);
  assert.match(
    distProblems(['client/cli/main.js'], bins, () => 'console.log(1);\n')[0] ?? '',
    /does not start with #!\/usr\/bin\/env node/,
  );
});

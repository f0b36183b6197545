import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  extractInstallSteps,
  installStepVariables,
  loadInstallSteps,
  runInstallStep,
  variablesRead,
} from './install-steps.ts';

const doc = [
  '# Install',
  '',
  'Not a step:',
  '```sh',
  'echo ignored',
  '```',
  '<!-- install-step: first -->',
  '```sh',
  'echo "one $CLUSTER"',
  'echo two',
  '```',
  'text',
  '  <!--install-step:second-->  ',
  '```bash',
  '```',
].join('\n');

describe('extractInstallSteps', () => {
  test('takes the marked blocks only, with their text and the marker line', () => {
    const steps = extractInstallSteps(doc);
    assert.deepEqual([...steps.keys()], ['first', 'second']);
    assert.deepEqual(steps.get('first'), {
      name: 'first',
      script: 'echo "one $CLUSTER"\necho two\n',
      line: 7,
    });
    assert.equal(steps.get('second')?.script, '\n');
  });

  test('a marker not followed by a sh block, an unclosed block or a name used twice is an error', () => {
    assert.throws(
      () => extractInstallSteps('<!-- install-step: a -->\ntext\n```sh\nx\n```'),
      /install-step a \(line 1\): the next line must open a ```sh block, found "text"/,
    );
    assert.throws(() => extractInstallSteps('<!-- install-step: a -->\n```sh\nx\n'), /never closed/);
    assert.throws(
      () => extractInstallSteps('<!-- install-step: a -->\n```sh\n```\n<!-- install-step: a -->\n```sh\n```'),
      /install-step a \(line 4\): the name is used twice \(first on line 1\)/,
    );
  });
});

describe('variablesRead', () => {
  test('what a script reads and does not set itself, not inside a quoted heredoc', () => {
    const script = [
      'token=$(kubectl get x)',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: shell, not a template
      'echo "$token ${CLUSTER} $CLUSTER_KUBECONFIG ${VALUES:+--values "$VALUES"}"',
      "kubectl apply -f - <<'EOF'",
      'name: $NOT_READ',
      'EOF',
      'cat <<EOF',
      'name: $READ',
      'EOF',
    ].join('\n');
    assert.deepEqual(variablesRead(script), ['CLUSTER', 'CLUSTER_KUBECONFIG', 'READ', 'VALUES']);
  });
});

describe('docs/install.md', () => {
  const steps = loadInstallSteps();
  test('has the steps npm start runs, each reading only what a user sets', () => {
    for (const name of ['helm-install', 'secret-cluster', 'ocm-cluster', 'tunnel-cluster', 'check']) {
      assert.ok(steps.has(name), `install-step ${name} is in docs/install.md`);
    }
    for (const step of steps.values()) {
      const foreign = variablesRead(step.script).filter(
        (v) => !(installStepVariables as readonly string[]).includes(v),
      );
      assert.deepEqual(
        foreign,
        [],
        `install-step ${step.name} (line ${step.line}) reads only user variables`,
      );
    }
  });
});

describe('runInstallStep', () => {
  test('runs the block with bash, the given variables and nothing else of this process', async () => {
    process.env.CG_INSTALL_STEPS_SECRET = 'leaked';
    const [step] = extractInstallSteps(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: shell, not a template
      '<!-- install-step: s -->\n```sh\necho "$CLUSTER ${CG_INSTALL_STEPS_SECRET:-none}"\n```\n',
    ).values();
    const out = await runInstallStep(step!, { CLUSTER: 'c1' }, { path: '/usr/bin:/bin' });
    assert.equal(out, 'c1 none\n');
    delete process.env.CG_INSTALL_STEPS_SECRET;
  });

  test('a failing command fails the step, with its name, line, variables, status and output', async () => {
    const [step] = extractInstallSteps(
      'x\n<!-- install-step: broken -->\n```sh\necho before\nfalse | cat\necho after\n```\n',
    ).values();
    await assert.rejects(
      runInstallStep(step!, { CLUSTER: 'c2' }, { path: '/usr/bin:/bin' }),
      (err: Error) => {
        assert.match(
          err.message,
          /^install step broken \(docs\/install.md line 2; CLUSTER=c2\) exited 1:\nbefore$/,
        );
        return true;
      },
    );
  });

  test('an unset variable fails the step (a user would have set it)', async () => {
    const [step] = extractInstallSteps('<!-- install-step: u -->\n```sh\necho "$CLUSTER"\n```\n').values();
    await assert.rejects(runInstallStep(step!, {}, { path: '/usr/bin:/bin' }), /CLUSTER: unbound variable/);
  });
});

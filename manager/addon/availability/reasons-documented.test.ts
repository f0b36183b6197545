/**
 * The README's table of `Available` reasons is what users read when an addon is not
 * Available: every reason the manager can write must have its row, and the table must not
 * name a reason the manager never writes (besides the two that come from elsewhere).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { availableReasons } from './available.ts';

const readme = readFileSync(path.join(import.meta.dirname, '..', '..', '..', 'README.md'), 'utf8');
const section = readme.slice(readme.indexOf('### Available reasons'));
const documented = [...section.matchAll(/^\| (?:True|False|Unknown) \| `(\w+)`/gm)].map((m) => m[1]);
/** Written by the LeaseNotFound webhook (lease-not-found-webhook.ts), not by computeAvailable. */
const fromWebhook = ['WaitingForAddonManager'];

test('every Available reason the manager writes has a row in the README, and no row is stale', () => {
  assert.ok(section.length > 0, 'README.md has a "### Available reasons" section');
  for (const reason of availableReasons) assert.ok(documented.includes(reason), `README lacks ${reason}`);
  for (const reason of documented) {
    assert.ok(
      (availableReasons as readonly string[]).includes(reason as string) ||
        fromWebhook.includes(reason as string),
      `README documents ${reason}, which nothing writes`,
    );
  }
});

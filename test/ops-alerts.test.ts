/**
 * ops/prometheus/alerts.yml, the alerting rules shipped for people who run Prometheus: `promtool check
 * rules` accepts them, each alert has a `for:`, a severity and a summary and description, and
 * `promtool test rules` passes ops/prometheus/alerts.test.yml, which holds for every alert a case where it
 * fires and one where it must not. (test/ops-dashboard.test.ts evaluates the same rules on a real
 * Prometheus scraping every family, so that none reads a metric bulwark does not expose.)
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promtool, promtoolBinary } from './support/prometheus.js';
import { skipReason } from './support/servers.js';

const rulesPath = fileURLToPath(new URL('../ops/prometheus/alerts.yml', import.meta.url));
const testsPath = fileURLToPath(new URL('../ops/prometheus/alerts.test.yml', import.meta.url));

/** alerts answers each alert of alerts.yml with the text of its rule (up to the next rule). */
function alerts(): Map<string, string> {
  const text = readFileSync(rulesPath, 'utf8');
  const out = new Map<string, string>();
  for (const block of text.split(/^ {6}- alert: /m).slice(1)) {
    const name = /^(\S+)/.exec(block)![1]!;
    assert.ok(!out.has(name), `${name} defined twice`);
    out.set(name, block);
  }
  return out;
}

/** cases answers, per alert name, whether alerts.test.yml has a case where it fires and one where it does not. */
function cases(): Map<string, { fires: boolean; silent: boolean }> {
  const text = readFileSync(testsPath, 'utf8');
  const out = new Map<string, { fires: boolean; silent: boolean }>();
  for (const block of text.split(/^\s+- eval_time: /m).slice(1)) {
    const name = /alertname: (\S+)/.exec(block)?.[1];
    assert.ok(name !== undefined, `a case without alertname: ${block.slice(0, 80)}`);
    const c = out.get(name) ?? { fires: false, silent: false };
    if (/exp_alerts: \[\]/.test(block)) c.silent = true;
    else if (/exp_alerts:\s*\n\s+- exp_labels:/.test(block)) c.fires = true;
    out.set(name, c);
  }
  return out;
}

describe('ops/prometheus/alerts.yml', { skip: skipReason(promtoolBinary, 'promtool') }, () => {
  it('passes promtool check rules', async () => {
    const { code, output } = await promtool(['check', 'rules', rulesPath]);
    assert.equal(code, 0, output);
    assert.match(output, new RegExp(`SUCCESS: ${alerts().size} rules found`));
  });

  it('gives every alert a for:, a severity and a summary and description', () => {
    const all = alerts();
    assert.ok(all.size >= 8, `${all.size} alerts`);
    for (const [name, rule] of all) {
      assert.match(rule, /^ {8}for: \d+[smh]$/m, `${name}: for:`);
      assert.match(rule, /^ {10}severity: (critical|warning|info)$/m, `${name}: severity`);
      assert.match(rule, /^ {10}summary: "[^"]+"$/m, `${name}: summary`);
      assert.match(rule, /^ {10}description: "[^"]+"$/m, `${name}: description`);
    }
  });

  it('has a case where each alert fires and one where it does not, and passes promtool test rules', async () => {
    const tested = cases();
    for (const name of alerts().keys()) {
      assert.deepEqual(tested.get(name), { fires: true, silent: true }, `${name}: firing and not-firing cases in alerts.test.yml`);
    }
    assert.deepEqual(
      [...tested.keys()].filter((n) => !alerts().has(n)),
      [],
      'cases of alerts that do not exist',
    );
    const { code, output } = await promtool(['test', 'rules', testsPath]);
    assert.equal(code, 0, output);
    assert.match(output, /SUCCESS/);
  });
});

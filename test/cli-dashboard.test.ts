/**
 * `bulwark dashboard`'s flags as an operator meets them: help, a bad flag or value exits 2 with the
 * reason, and a listen address beyond loopback is refused without a token. (Following a fleet is tested
 * in a browser: test/dashboard-browser.test.ts.)
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { runBulwark } from './serve-harness.js';

describe('bulwark dashboard', () => {
  it('prints its help, and exits 2 naming what is wrong with a bad flag', async () => {
    const help = await runBulwark(['dashboard', '--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /^bulwark dashboard — one page for the fleet/);
    assert.match(help.stdout, /"bulwark\.status"/);
    assert.match(help.stdout, /--rules <spec>/);
    assert.match(help.stdout, /--controls/);
    const cases: Array<[string[], RegExp]> = [
      [[], /--registry etcd:\/\/host:port is required/],
      [['--registry', 'memory'], /--registry must be etcd:\/\/host:port/],
      [['--registry', 'etcd://127.0.0.1:2379', '--bogus'], /Unknown option '--bogus'/],
      [['--registry', 'etcd://127.0.0.1:2379', '--listen', 'nowhere'], /--listen must be host:port/],
      [['--registry', 'etcd://127.0.0.1:2379', '--listen', '0.0.0.0:9090'], /--listen 0\.0\.0\.0:9090 is beyond loopback: give --token/],
      [['--registry', 'etcd://127.0.0.1:2379', '--token', 'short'], /--token must be at least 8 characters/],
      [['--registry', 'etcd://127.0.0.1:2379', '--tick', '10ms'], /--tick must be at least 100ms/],
      [['--registry', 'etcd://127.0.0.1:2379', '--controls'], /--controls writes rules: give --rules etcd:\/\/host:port/],
      [['--registry', 'etcd://127.0.0.1:2379', '--rules', 'etcd://127.0.0.1:2379'], /--rules is the store the controls write to: give --controls as well/],
      [['--registry', 'etcd://127.0.0.1:2379', '--rules', 'memory', '--controls'], /--rules must be etcd:\/\/host:port\[,host:port\], got "memory"/],
      [
        ['--registry', 'etcd://127.0.0.1:2379', '--rules', 'etcd://127.0.0.1:2379', '--rules-prefix', '/r', '--controls'],
        /--rules-prefix must end in \/, got "\/r"/,
      ],
    ];
    // All at once on a loaded machine: each start may take long, hence the generous deadline.
    const runs = await Promise.all(cases.map(([args]) => runBulwark(['dashboard', ...args], 120_000)));
    for (const [i, r] of runs.entries()) {
      assert.equal(r.code, 2, `${cases[i]![0].join(' ')}: ${r.stderr}`);
      assert.match(r.stderr.split('\n')[0]!, cases[i]![1]);
      assert.match(r.stderr, /^bulwark dashboard: /);
    }
  });
});

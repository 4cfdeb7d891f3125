import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UsageError } from '../args.js';
import { envName, parseSize, readServeConfig, serveHelp, SERVE_OPTIONS, type ServeConfig } from './config.js';

const ORIGIN = ['--origin', 'http://127.0.0.1:9/items/{key}'];

function read(argv: string[], env: NodeJS.ProcessEnv = {}): ServeConfig {
  const c = readServeConfig(argv, env);
  assert.notEqual(c, 'help');
  return c as ServeConfig;
}

describe('readServeConfig', () => {
  it('has a default for everything but the origin', () => {
    const c = read(ORIGIN);
    assert.equal(c.listenHost, '127.0.0.1');
    assert.equal(c.listenPort, 8080);
    assert.equal(c.advertise, 'http://127.0.0.1:8080');
    assert.deepEqual(c.registry, { kind: 'memory', peers: [] });
    assert.deepEqual(c.groups, ['default']);
    assert.equal(c.cacheBytes, 64 << 20);
    assert.equal(c.hotCacheBytes, 8 << 20);
    assert.equal(c.staleBytes, 16 << 20);
    assert.equal(c.ttlMs, 0);
    assert.equal(c.negativeTtlMs, 5_000);
    assert.equal(c.originTimeoutMs, 2_000);
    assert.equal(c.loadTimeoutMs, 4_000);
    assert.equal(c.peerTimeoutMs, 4_500, "a peer waits out the owner's load");
    assert.equal(c.originRate, 0);
    assert.equal(c.peerSecret, undefined);
    assert.equal(c.owners, 1);
    assert.equal(c.ttlJitter, 0.1);
    assert.equal(c.protocol, 'bulwark');
  });

  it('reads --ttl-jitter as a share in 0–0.99', () => {
    assert.equal(read([...ORIGIN, '--ttl-jitter', '0']).ttlJitter, 0);
    assert.equal(read([...ORIGIN, '--ttl-jitter', '0.25']).ttlJitter, 0.25);
    assert.throws(
      () => read([...ORIGIN, '--ttl-jitter', '1']),
      (e: Error) => e instanceof UsageError && /--ttl-jitter must be a share in 0–0.99, got 1/.test(e.message),
    );
    assert.throws(
      () => read([...ORIGIN, '--ttl-jitter', 'lots']),
      (e: Error) => e instanceof UsageError && /--ttl-jitter must be a number/.test(e.message),
    );
  });

  it('reads --owners and --protocol, and refuses what Go groupcache nodes cannot do', () => {
    assert.equal(read([...ORIGIN, '--owners', '2']).owners, 2);
    assert.equal(read([...ORIGIN, '--protocol', 'groupcache']).protocol, 'groupcache');
    assert.throws(
      () => read([...ORIGIN, '--owners', '9']),
      (e: Error) => e instanceof UsageError && /--owners must be a whole number in 1–8/.test(e.message),
    );
    assert.throws(
      () => read([...ORIGIN, '--protocol', 'http']),
      (e: Error) => e instanceof UsageError && /--protocol must be 'bulwark' or 'groupcache', got 'http'/.test(e.message),
    );
    assert.throws(
      () => read([...ORIGIN, '--protocol', 'groupcache', '--owners', '2']),
      (e: Error) => e instanceof UsageError && /--owners must be 1 with --protocol groupcache/.test(e.message),
    );
    assert.throws(
      () => read([...ORIGIN, '--protocol', 'groupcache', '--peer-secret', 'sixteen-chars-secret!']),
      (e: Error) => e instanceof UsageError && /--peer-secret cannot be used with --protocol groupcache/.test(e.message),
    );
  });

  it('takes a flag over the environment over the config file over the default, each meaning the same', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bulwark-config-'));
    try {
      const file = join(dir, 'serve.json');
      writeFileSync(file, JSON.stringify({ 'cache-bytes': '1MiB', ttl: 30, 'origin-timeout': '1s', group: ['a', 'b'], origin: 'http://o/{key}' }));
      const c = read(['--config', file, '--origin-timeout', '3s'], { [envName('ttl')]: '2m', [envName('cache-bytes')]: '2MiB' });
      assert.equal(c.cacheBytes, 2 << 20, 'environment over file');
      assert.equal(c.ttlMs, 120_000, 'environment over file');
      assert.equal(c.originTimeoutMs, 3_000, 'flag over file');
      assert.deepEqual(c.groups, ['a', 'b']);
      assert.equal(read(['--config', file]).ttlMs, 30_000, 'a bare number of a duration is seconds in a file as on the command line');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads etcd endpoints, repeated groups, a secret from a file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bulwark-secret-'));
    try {
      writeFileSync(join(dir, 's'), 'sixteen-chars-secret!\n');
      const c = read([...ORIGIN, '--registry', 'etcd://127.0.0.1:2379,10.0.0.2:2379', '--group', 'a', '--group', 'b,c', '--peer-secret-file', join(dir, 's')]);
      assert.deepEqual(c.registry, { kind: 'etcd', hosts: ['http://127.0.0.1:2379', 'http://10.0.0.2:2379'], prefix: '/bulwark/services', leaseTtlMs: 15_000 });
      assert.deepEqual(c.groups, ['a', 'b', 'c']);
      assert.equal(c.peerSecret, 'sixteen-chars-secret!');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  for (const [argv, env, flag] of [
    [['--cache-bytes', '12 parsecs'], {}, '--cache-bytes'],
    [['--cache-bytes', '100'], {}, '--cache-bytes'],
    [['--listen', '8080'], {}, '--listen'],
    [['--listen', '0.0.0.0:8080'], {}, '--advertise'],
    [['--advertise', 'http://h:1/path'], {}, '--advertise'],
    [['--registry', 'etcd://'], {}, '--registry'],
    [['--registry', 'etcd://h:1', '--peers', 'http://x:1'], {}, '--peers'],
    [['--registry', 'etcd://h:1', '--lease-ttl', '1s'], {}, '--lease-ttl'],
    [['--group', 'bad name'], {}, '--group'],
    [['--group', 'a,a'], {}, '--group'],
    [['--peer-secret', 'short'], {}, '--peer-secret'],
    [['--peer-secret-file', '/nonexistent/secret'], {}, '--peer-secret-file'],
    [['--getter', './g.js'], {}, '--origin and --getter'],
    [['--origin-timeout', '0'], {}, '--origin-timeout'],
    [['--load-timeout', '1s'], {}, '--load-timeout'],
    [['--origin-rate', '-1'], {}, '--origin-rate'],
    [['--origin-concurrency', '0'], {}, '--origin-concurrency'],
    [['--headers-timeout', '10s'], {}, '--headers-timeout'],
    [[], { BULWARK_TTL: 'later' }, 'BULWARK_TTL must be a duration'],
    [[], { BULWARK_PEER_SECRET: 'short' }, 'BULWARK_PEER_SECRET must be at least 16 characters'],
    [['--peer-secret', 'short'], { BULWARK_PEER_SECRET: 'sixteen-chars-secret!' }, '--peer-secret must be at least 16 characters'],
    [[], { BULWARK_REGISTRY: 'consul://h:1' }, 'BULWARK_REGISTRY must be memory or etcd://'],
  ] as const) {
    it(`refuses ${[...argv, ...Object.entries(env).map(([k, v]) => `${k}=${v}`)].join(' ')} naming ${flag}`, () => {
      assert.throws(
        () => readServeConfig([...ORIGIN, ...argv], env),
        (e: unknown) => e instanceof UsageError && e.message.includes(flag) && !e.message.includes('\n'),
      );
    });
  }

  it('names a bad value from the config file by its key and the file, and a short secret file by its flag', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bulwark-config-'));
    try {
      writeFileSync(join(dir, 'c.json'), '{"cache-bytes": "lots"}');
      assert.throws(
        () => readServeConfig([...ORIGIN, '--config', join(dir, 'c.json')], {}),
        (e: unknown) =>
          e instanceof UsageError && e.message === `"cache-bytes" in ${join(dir, 'c.json')} must be a size like 64MiB, 512KiB or a number of bytes, got "lots"`,
      );
      writeFileSync(join(dir, 's'), 'short\n');
      assert.throws(
        () => readServeConfig([...ORIGIN, '--peer-secret-file', join(dir, 's')], {}),
        (e: unknown) => e instanceof UsageError && e.message === '--peer-secret-file must hold a secret of at least 16 characters',
      );
      assert.throws(
        () => readServeConfig(ORIGIN, { BULWARK_PEER_SECRET_FILE: join(dir, 's') }),
        (e: unknown) => e instanceof UsageError && e.message === 'BULWARK_PEER_SECRET_FILE must hold a secret of at least 16 characters',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses an unknown option in the config file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bulwark-config-'));
    try {
      writeFileSync(join(dir, 'c.json'), '{"cache-size": "1MiB"}');
      assert.throws(() => readServeConfig([...ORIGIN, '--config', join(dir, 'c.json')], {}), /unknown option "cache-size"/);
      writeFileSync(join(dir, 'c.json'), '{not json');
      assert.throws(() => readServeConfig([...ORIGIN, '--config', join(dir, 'c.json')], {}), /--config .* cannot be read as JSON/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('--help lists every option, with its default where it has one', () => {
    assert.equal(readServeConfig(['--help'], {}), 'help');
    const lines = serveHelp().split('\n');
    for (const [name, spec] of Object.entries(SERVE_OPTIONS)) {
      // The option's row and its continuation lines (indented past the flag column), whitespace collapsed.
      const at = lines.findIndex((l) => new RegExp(`^\\s+(-\\w, )?--${name}( |$)`).test(l));
      assert.ok(at >= 0, `--${name} is not in --help`);
      let end = at + 1;
      while (end < lines.length && /^ {20,}\S/.test(lines[end]!)) end++;
      const text = lines.slice(at, end).join(' ').replace(/\s+/g, ' ');
      const d = (spec as { default?: string }).default;
      if (d !== undefined && d !== '' && name !== 'group') assert.ok(text.includes(`(default ${d})`), `--${name}: ${text}`);
      for (const l of lines.slice(at, end)) assert.ok(l.length <= 100, `--${name}: a line of ${l.length} columns`);
    }
  });
});

describe('parseSize', () => {
  for (const [text, bytes] of [
    ['1048576', 1 << 20],
    ['512KiB', 512 << 10],
    ['64MiB', 64 << 20],
    ['1GiB', 1 << 30],
    ['2k', 2048],
    ['1.5MiB', 1.5 * (1 << 20)],
  ] as const) {
    it(`reads ${text} as ${bytes}`, () => assert.equal(parseSize('x', text), bytes));
  }
  for (const text of ['', 'MiB', '-1', '1TB', '64 megs', '17GiB'])
    it(`refuses ${JSON.stringify(text)}`, () => assert.throws(() => parseSize('x', text), UsageError));
});

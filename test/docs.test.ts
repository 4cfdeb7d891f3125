/**
 * Every ```ts block in docs/*.md is a complete program: this test runs each one against the built
 * package (imports of 'bulwark' resolve to dist/ through the package's own exports map) and expects
 * exit code 0. A block whose first line is `// requires: etcd` or `// requires: redis` gets a real
 * server started for it, its address in ETCD_ENDPOINT or REDIS_URL. Blocks fenced as ```ts no-run are
 * shown, type-checked by nobody and not run: use them only for fragments.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { redisBinary, startRedis, type RedisServer } from './support/redis.js';

const root = new URL('..', import.meta.url).pathname;
const docsDir = join(root, 'docs');
const scratch = join(root, '.tmp', 'docs');

interface Example {
  page: string;
  index: number;
  line: number;
  code: string;
  requires: string[];
}

function examples(): Example[] {
  const out: Example[] = [];
  for (const page of readdirSync(docsDir).filter((f) => f.endsWith('.md')).sort()) {
    const lines = readFileSync(join(docsDir, page), 'utf8').split('\n');
    let inBlock = false;
    let start = 0;
    let buf: string[] = [];
    let n = 0;
    for (let i = 0; i < lines.length; i++) {
      const l = lines[i]!;
      if (!inBlock && /^```ts\s*$/.test(l)) {
        inBlock = true;
        start = i + 1;
        buf = [];
      } else if (inBlock && /^```\s*$/.test(l)) {
        inBlock = false;
        const code = buf.join('\n');
        const m = /^\/\/ requires: (.+)$/m.exec(buf[0] ?? '');
        out.push({ page, index: n++, line: start, code, requires: m ? m[1]!.split(/[ ,]+/) : [] });
      } else if (inBlock) buf.push(l);
    }
  }
  return out;
}

describe('docs examples', () => {
  const all = examples();
  it('exist: every module page has at least one runnable example', () => {
    const pages = new Set(all.map((e) => e.page));
    for (const page of readdirSync(docsDir).filter((f) => f.endsWith('.md') && f !== 'README.md')) {
      assert.ok(pages.has(page), `docs/${page} has no runnable \`\`\`ts example`);
    }
  });

  for (const ex of all) {
    const needsEtcd = ex.requires.includes('etcd');
    const needsRedis = ex.requires.includes('redis');
    const skip = (needsEtcd && etcdBinary === undefined) || (needsRedis && redisBinary === undefined);
    it(`docs/${ex.page} example ${ex.index + 1} (line ${ex.line}) runs`, { skip: skip ? 'server not installed' : false }, async () => {
      mkdirSync(scratch, { recursive: true });
      const file = join(scratch, `${ex.page.replace(/\.md$/, '')}-${ex.index + 1}.ts`);
      writeFileSync(file, ex.code);
      let etcd: EtcdServer | undefined;
      let redis: RedisServer | undefined;
      try {
        const env: NodeJS.ProcessEnv = { ...process.env };
        if (needsEtcd) env.ETCD_ENDPOINT = (etcd = await startEtcd()).endpoint;
        if (needsRedis) env.REDIS_URL = (redis = await startRedis()).url;
        const r = spawnSync(process.execPath, ['--import', 'tsx', file], { cwd: root, env, encoding: 'utf8', timeout: 60_000 });
        assert.equal(r.status, 0, `docs/${ex.page}:${ex.line} exited ${r.status}\n${r.stdout}\n${r.stderr}`);
      } finally {
        await etcd?.stop();
        await redis?.stop();
        rmSync(file, { force: true });
      }
    });
  }
});

/**
 * A/B of the breaker and window hot paths between two compiled trees (e.g. the code before a change and
 * after it), in one run: every (op, build) pair runs in its own child process, the builds alternate op by
 * op and round by round, and the table shows the median ns/op of each and the ratio B / A.
 *
 *   node bench/ab/breaker-ab.mjs <dirA> <dirB> [rounds=7] [ms=600] [op-filter, or !text to leave out ops naming text]
 *
 * Each child measures its own CPU time (user + system), not wall time, so that a machine shared with
 * other jobs slows neither build's numbers by waiting for a core.
 *
 * `dirA` / `dirB` are `tsc -p tsconfig.bench.json --outDir <dir>` outputs. The trees may differ in names
 * (`allow`/`tryAllow` before the verbs were renamed, `admit`/`tryAdmit` after; RollingWindow's
 * `bucketMs` before, `windowMs` after): each op asks the tree what it has.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { join, resolve } from 'node:path';

const self = fileURLToPath(import.meta.url);

async function task() {
  return 1;
}
const boom = new Error('down');

function admitOf(b) {
  return typeof b.admit === 'function' ? () => b.admit() : () => b.allow();
}
function tryAdmitOf(b) {
  return typeof b.tryAdmit === 'function' ? () => b.tryAdmit() : () => b.tryAllow();
}

function tripSre(m) {
  const b = new m.SreBreaker({ forcePassMs: 3_600_000, random: () => 0 });
  const admit = admitOf(b);
  for (let i = 0; i < 1_000; i++) {
    try {
      admit().failure(boom);
    } catch {
      // dropping already
    }
  }
  return b;
}
function tripCircuit(m) {
  const b = new m.CircuitBreaker({ openMs: 3_600_000 });
  const admit = admitOf(b);
  for (let i = 0; i < 20 && b.state === 'closed'; i++) admit().failure(boom);
  if (b.state !== 'open') throw new Error('setup: breaker did not open');
  return b;
}
function swallowing(make) {
  return async () => {
    try {
      await make();
    } catch {
      // expected
    }
  };
}
function catching(f) {
  return () => {
    try {
      f();
    } catch {
      // expected
    }
  };
}

const prebuilt = new Error('prebuilt');
const rejectedFloor = Promise.reject(prebuilt);
rejectedFloor.catch(() => {});

/** lookup: 100 000 names in a fixed pseudo-random order; `get` then read the breaker's `execute`. */
function lookup(map, names) {
  let seed = 12_345;
  const order = Uint32Array.from({ length: 1 << 20 }, () => {
    seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0;
    return seed % names.length;
  });
  let i = 0;
  let sink = 0;
  return { op: () => (typeof map.get(names[order[i++ & 0xfffff]]).execute === 'function' ? ++sink : sink) };
}
const lookupNames = () => Array.from({ length: 100_000 }, (_, i) => `service-${i % 1_000}/10.0.${(i >> 8) & 255}.${i & 255}:8080`);

/**
 * Each op: (breaker module, core module) → { op, async }. The floors do not depend on the build: their
 * B / A shows the noise of the run.
 */
const OPS = {
  'floor: bare await fn()': () => ({ op: () => task(), async: true }),
  'floor: await prebuilt rejected promise': () => ({ op: swallowing(() => rejectedFloor), async: true }),
  'floor: throw prebuilt error': () => ({
    op: catching(() => {
      throw prebuilt;
    }),
  }),
  'SreBreaker.execute': (m) => {
    const b = new m.SreBreaker();
    return { op: () => b.execute(task), async: true };
  },
  'CircuitBreaker.execute': (m) => {
    const b = new m.CircuitBreaker();
    return { op: () => b.execute(task), async: true };
  },
  'CircuitBreaker.execute (count window)': (m) => {
    // The count window's spelling by build: flat windowCalls (one window shape), { calls }, or { kind, size } before that.
    const w = m.circuitBreakerDefaults.window;
    const b = new m.CircuitBreaker(w === undefined ? { windowCalls: 100 } : { window: 'kind' in w ? { kind: 'count', size: 100 } : { calls: 100 } });
    return { op: () => b.execute(task), async: true };
  },
  'CircuitBreaker.execute (slowCallMs)': (m) => {
    const b = new m.CircuitBreaker({ slowCallMs: 1_000 });
    return { op: () => b.execute(task), async: true };
  },
  'BreakerGroup.execute': (m) => {
    const g = new m.BreakerGroup();
    return { op: () => g.execute('payments', task), async: true };
  },
  'SreBreaker admit+success': (m) => {
    const admit = admitOf(new m.SreBreaker());
    return { op: () => admit().success() };
  },
  'CircuitBreaker admit+success': (m) => {
    const admit = admitOf(new m.CircuitBreaker());
    return { op: () => admit().success() };
  },
  'open: SreBreaker.execute rejects': (m) => {
    const b = tripSre(m);
    return { op: swallowing(() => b.execute(task)), async: true };
  },
  'open: CircuitBreaker.execute rejects': (m) => {
    const b = tripCircuit(m);
    return { op: swallowing(() => b.execute(task)), async: true };
  },
  'open: SreBreaker admit throws': (m) => {
    const b = tripSre(m);
    return { op: catching(typeof b.admit === 'function' ? () => b.admit() : () => b.allow()) };
  },
  'open: CircuitBreaker admit throws': (m) => {
    const b = tripCircuit(m);
    return { op: catching(typeof b.admit === 'function' ? () => b.admit() : () => b.allow()) };
  },
  'open: SreBreaker tryAdmit': (m) => {
    const t = tryAdmitOf(tripSre(m));
    return { op: t };
  },
  'open: CircuitBreaker tryAdmit': (m) => {
    const t = tryAdmitOf(tripCircuit(m));
    return { op: t };
  },
  'floor: bare Map.get + read (100 000 SreBreakers)': (m) => {
    const names = lookupNames();
    return lookup(new Map(names.map((n) => [n, new m.SreBreaker({ name: n })])), names);
  },
  'BreakerGroup.get + read (100 000 names)': (m) => {
    const names = lookupNames();
    const g = new m.BreakerGroup({ maxBreakers: 100_000 });
    for (const n of names) g.get(n);
    return lookup(g, names);
  },
  'RollingWindow.add+sum': (m, core) => {
    const w =
      'windowMs' in core.rollingWindowDefaults
        ? new core.RollingWindow({ windowMs: 10_000, buckets: 10, channels: 2 })
        : new core.RollingWindow({ buckets: 10, bucketMs: 1_000, channels: 2 });
    let i = 0;
    return {
      op: () => {
        w.add(i++ & 1, 1.5);
        return w.sum(0);
      },
    };
  },
};

async function child(dir, name, ms) {
  const m = await import(pathToFileURL(join(dir, 'src/breaker/index.js')).href);
  const core = await import(pathToFileURL(join(dir, 'src/core/index.js')).href);
  const s = await OPS[name](m, core);
  const batch = s.batch ?? (s.async ? 100 : 1_000);
  // CPU time of this process, not wall time: on a shared, overloaded machine a child spends much of
  // its wall time waiting for a core, which says nothing about the code.
  const cpuMs = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1e3;
  };
  const runFor = async (t) => {
    let ops = 0;
    const start = cpuMs();
    let now = start;
    while (now - start < t) {
      if (s.async) for (let i = 0; i < batch; i++) await s.op();
      else for (let i = 0; i < batch; i++) s.op();
      ops += batch;
      now = cpuMs();
    }
    return ((now - start) * 1e6) / ops;
  };
  await runFor(Math.min(300, ms / 3));
  process.stdout.write(`@@NS ${await runFor(ms)}\n`);
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const h = s.length >> 1;
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
}

if (process.argv[2] === '--child') {
  await child(process.argv[3], process.argv[4], Number(process.argv[5]));
} else {
  const [a, b] = [resolve(process.argv[2]), resolve(process.argv[3])];
  const rounds = Number(process.argv[4] ?? 7);
  const ms = Number(process.argv[5] ?? 600);
  const filter = process.argv[6];
  const names = Object.keys(OPS).filter((n) => !filter || (filter.startsWith('!') ? !n.includes(filter.slice(1)) : n.includes(filter)));
  const res = new Map(names.map((n) => [n, { a: [], b: [] }]));
  for (let r = 0; r < rounds; r++) {
    for (const name of names) {
      const pair =
        r % 2 === 0
          ? [
              ['a', a],
              ['b', b],
            ]
          : [
              ['b', b],
              ['a', a],
            ];
      for (const [k, dir] of pair) {
        const c = spawnSync(process.execPath, [self, '--child', dir, name, String(ms)], { encoding: 'utf8', timeout: 120_000 });
        const line = c.stdout.split('\n').find((l) => l.startsWith('@@NS '));
        if (line === undefined) {
          process.stderr.write(`${name} (${k}) failed: ${c.stderr.slice(-800)}\n`);
          continue;
        }
        res.get(name)[k].push(Number(line.slice(5)));
      }
    }
    process.stderr.write(`round ${r + 1}/${rounds} done\n`);
  }
  const rows = [['op', 'A ns/op', 'B ns/op', 'B / A', 'B/A per round (median)']];
  for (const name of names) {
    const { a: xa, b: xb } = res.get(name);
    const ma = median(xa);
    const mb = median(xb);
    const per = xa.map((v, i) => xb[i] / v).filter((v) => Number.isFinite(v));
    rows.push([name, ma.toFixed(1), mb.toFixed(1), `${(mb / ma).toFixed(3)}`, median(per).toFixed(3)]);
  }
  const w = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  process.stdout.write(`A = ${a}\nB = ${b}\n${rounds} rounds × ${ms} ms, each (op, build) in its own process, alternating\n`);
  for (const r of rows) process.stdout.write(`| ${r.map((c, i) => c.padEnd(w[i])).join(' | ')} |\n`);
}

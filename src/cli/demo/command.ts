/**
 * `bulwark demo`: its flags, its help and its run — a local cluster on embedded defaults with a live view
 * (demo.ts). main.ts only dispatches here.
 */
import { parseFlags, UsageError, type FlagSpec } from '../args.js';

/** DEMO_FLAGS are the flags of `bulwark demo`. */
const DEMO_FLAGS: Readonly<Record<string, FlagSpec>> = {
  duration: { kind: 'duration', alias: 'd' },
  concurrency: { kind: 'integer', alias: 'c' },
  rate: { kind: 'integer', alias: 'r' },
  port: { kind: 'integer', alias: 'p' },
  'no-dashboard': { kind: 'boolean' },
  plain: { kind: 'boolean' },
  help: { kind: 'boolean', alias: 'h' },
};

const DEMO_HELP = `bulwark demo — watch the guards keep a small fleet standing, and push it around

Usage: bulwark demo [--duration 20s] [--concurrency 16] [--rate 100] [--port 0] [--no-dashboard] [--plain]

Starts a small fleet on 127.0.0.1, registered in an in-process registry (MemoryRegistry: no etcd,
no Redis needed):
  payments  healthy (2–5 ms), flaky (fails 30 % of requests with HTTP 500), slow (200 ms)
  orders    orders-1, orders-2 (fails 5 %)
  stock     stock-1, stock-2 (80 ms)
  a three-node cache cluster (groupcache-style, over HTTP) in front of an origin with a breaker
Callers call the services in turn, at most --rate calls a second, through one ResilientClient:
each call goes through the registry cache, the P2C balancer (which learns to avoid slow
instances), a bulkhead, a breaker per service and per instance, a 1 s timeout, a retry on
another instance within a retry budget, and a fallback answer as the last resort; each call
also reads a key through the cache cluster.

The first line printed is the dashboard's URL: the live numbers of every guard, and demo
controls — kill / restore an instance or a cache node, make an instance slow or failing, take
the registry down, break the origin — that act on the demo's fleet directly (they are not
rules). The terminal shows, per instance: calls, errors, p50/p99 latency, breaker state and
whether health checks ejected it.

In a terminal it runs until Ctrl-C unless --duration is given. Without one (a pipe, CI) it runs
for --duration (20 s by default) and takes the registry down by itself half-way for a few
seconds: the registry cache keeps serving the instances it knew (stale entries). The run ends
with a summary: the calls answered by an instance, by the fallback, those that failed, and the
calls saved by retries, breakers and the registry cache. It exits 0 on its own.

Options:
  -d, --duration <time>     how long to call, e.g. 20s, 90s, 2m, 500ms (default: until Ctrl-C in a
                            terminal, else 20s)
  -c, --concurrency <n>     callers calling at once, 1–256 (default 16)
  -r, --rate <n>            calls a second, all callers together, 1–10000 (default 100)
  -p, --port <n>            the dashboard's port on 127.0.0.1 (default 0: a free port)
      --no-dashboard        serve no dashboard
      --plain               print one line per second instead of redrawing in place
                            (the default when stdout is not a terminal)
  -h, --help                show this help
`;

/** runDemoCommand runs `bulwark demo …` (argv after the command's name); answers the exit code. */
export async function runDemoCommand(argv: string[]): Promise<number> {
  let flags;
  try {
    flags = parseFlags(argv, DEMO_FLAGS);
    if (flags.help === true) {
      process.stdout.write(DEMO_HELP);
      return 0;
    }
    const c = flags.concurrency as number | undefined;
    if (c !== undefined && (c < 1 || c > 256)) throw new UsageError(`--concurrency must be in 1–256, got ${c}`);
    const r = flags.rate as number | undefined;
    if (r !== undefined && (r < 1 || r > 10_000)) throw new UsageError(`--rate must be in 1–10000, got ${r}`);
    const p = flags.port as number | undefined;
    if (p !== undefined && (p < 0 || p > 65_535)) throw new UsageError(`--port must be in 0–65535, got ${p}`);
    const d = flags.duration as number | undefined;
    if (d !== undefined && d > 24 * 3_600_000) throw new UsageError(`--duration must be at most 24h, got ${d} ms`);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`bulwark demo: ${err.message}\n\n${DEMO_HELP}`);
    return 2;
  }
  // Loaded only when asked for, so that `bulwark demo --help` stays instant.
  const { runDemo } = await import('./demo.js');
  const stop = new AbortController();
  const onSigint = () => stop.abort();
  process.once('SIGINT', onSigint);
  process.once('SIGTERM', onSigint);
  // In a terminal the demo runs until Ctrl-C; without one (a test, CI) it stops by itself.
  const durationMs = (flags.duration as number | undefined) ?? (process.stdout.isTTY === true ? Infinity : undefined);
  try {
    await runDemo({
      ...(durationMs === undefined ? {} : { durationMs }),
      ...(flags.concurrency === undefined ? {} : { concurrency: flags.concurrency as number }),
      ...(flags.rate === undefined ? {} : { rate: flags.rate as number }),
      ...(flags['no-dashboard'] === true ? { dashboardPort: false as const } : flags.port === undefined ? {} : { dashboardPort: flags.port as number }),
      ...(flags.plain === true ? { interactive: false } : {}),
      signal: stop.signal,
    });
  } finally {
    process.off('SIGINT', onSigint);
    process.off('SIGTERM', onSigint);
  }
  return 0;
}

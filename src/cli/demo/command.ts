/**
 * `bulwark demo`: its flags, its help and its run — a local cluster on embedded defaults with a live view
 * (demo.ts). main.ts only dispatches here.
 */
import { parseFlags, UsageError, type FlagSpec } from '../args.js';

/** DEMO_FLAGS are the flags of `bulwark demo`. */
const DEMO_FLAGS: Readonly<Record<string, FlagSpec>> = {
  duration: { kind: 'duration', alias: 'd' },
  concurrency: { kind: 'integer', alias: 'c' },
  plain: { kind: 'boolean' },
  help: { kind: 'boolean', alias: 'h' },
};

const DEMO_HELP = `bulwark demo — watch the guarded-call flow keep a service standing

Usage: bulwark demo [--duration 20s] [--concurrency 16] [--plain]

Starts three instances of a small HTTP service on 127.0.0.1, registered in an in-process
registry (MemoryRegistry: no etcd, no Redis needed):
  healthy   answers in 2–5 ms
  flaky     fails 30 % of requests with HTTP 500
  slow      answers in 200 ms
Callers then call the service through one ResilientClient for --duration: each call goes
through the registry cache, the P2C balancer (which learns to avoid the slow instance),
a bulkhead, a breaker per service and per instance, a 1 s timeout, a retry on another
instance within a retry budget, and a fallback answer as the last resort.

The live view shows a progress bar and, per instance: calls, errors, p50/p99 latency,
breaker state and whether health checks ejected it. Half-way through, the registry stops
answering for a few seconds: the registry cache keeps serving the instances it knew
(stale entries) and calls keep succeeding. The run ends with a summary: the calls answered
by an instance, those answered by the fallback, those that failed, and the calls saved by retries,
breakers and the registry cache. It exits 0 on its own.

Options:
  -d, --duration <time>     how long to call, e.g. 20s, 90s, 2m, 500ms (default 20s)
  -c, --concurrency <n>     callers calling at once, 1–256 (default 16)
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
  try {
    await runDemo({
      ...(flags.duration === undefined ? {} : { durationMs: flags.duration as number }),
      ...(flags.concurrency === undefined ? {} : { concurrency: flags.concurrency as number }),
      ...(flags.plain === true ? { interactive: false } : {}),
      signal: stop.signal,
    });
  } finally {
    process.off('SIGINT', onSigint);
  }
  return 0;
}

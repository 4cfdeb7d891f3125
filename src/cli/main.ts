#!/usr/bin/env node
/**
 * The `bulwark` command line: `serve` (a cache node), `registry ls|watch` (what a registry holds),
 * `demo` (a local cluster with a live view) and `help`.
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseFlags, UsageError } from './args.js';

const HELP = `bulwark — service governance for Node.js microservices

Usage: bulwark <command> [options]

Commands:
  serve       run a distributed cache node in front of a slow origin
  registry    list (ls) or follow (watch) the services and instances of a registry
  rules       list, set, remove, watch, check and roll back the rules of a fleet
  demo        run a local cluster on embedded defaults and show what bulwark does
  help        show this help

Run 'bulwark <command> --help' for a command's options.
`;

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

/** main runs the command line `argv` (without node and the script) and answers the exit code. */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(HELP);
      return 0;
    case 'demo':
      return demo(rest);
    case 'serve': {
      // Loaded only when asked for, so that `bulwark --help` stays instant.
      const { runServe } = await import('./serve/run.js');
      const code = await runServe(rest);
      // Connections and timers of closed parts must not hold a stopped node up: it has drained.
      process.exit(code);
    }
    case 'registry': {
      const { runRegistry } = await import('./registry-cmd.js');
      return runRegistry(rest);
    }
    case 'rules': {
      const { runRules } = await import('./rules-cmd.js');
      return runRules(rest);
    }
    default:
      process.stderr.write(`bulwark: unknown command '${command}'\n\n${HELP}`);
      return 2;
  }
}

async function demo(argv: string[]): Promise<number> {
  let flags;
  try {
    flags = parseFlags(argv, {
      duration: { kind: 'duration', alias: 'd' },
      concurrency: { kind: 'integer', alias: 'c' },
      plain: { kind: 'boolean' },
      help: { kind: 'boolean', alias: 'h' },
    });
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
  // Loaded only when asked for, so that `bulwark --help` stays instant.
  const { runDemo } = await import('./demo/demo.js');
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

/** isEntryPoint tells whether this file is the program being run (not imported by a test). */
function isEntryPoint(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`bulwark: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}

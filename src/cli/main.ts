#!/usr/bin/env node
/**
 * The `bulwark` command line: `serve` (a cache node), `registry ls|watch` (what a registry holds),
 * `rules` (the fleet's live rules), `dashboard` (the fleet's page), `demo` (a local cluster with a live view) and `help`. This file only dispatches: each command reads its
 * own flags (with `node:util`'s `parseArgs`, through args.ts) in its own file, and a new command is one
 * line in COMMANDS.
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Command is one `bulwark` subcommand: its line in the help, and its run (argv after its name → exit code). */
interface Command {
  readonly summary: string;
  run(argv: string[]): Promise<number>;
}

/**
 * COMMANDS, one line each: a command owns its flags, help and messages in its own file, loaded only when it
 * is run, so that `bulwark --help` stays instant.
 */
const COMMANDS: Readonly<Record<string, Command>> = {
  serve: {
    summary: 'run a distributed cache node in front of a slow origin',
    run: async (argv) => exitWhenDone(await (await import('./serve/run.js')).runServe(argv)),
  },
  registry: {
    summary: 'list (ls) or follow (watch) the services and instances of a registry',
    run: async (argv) => (await import('./registry-cmd.js')).runRegistry(argv),
  },
  rules: {
    summary: 'list, set, remove, watch, check and roll back the rules of a fleet',
    run: async (argv) => (await import('./rules-cmd.js')).runRules(argv),
  },
  dashboard: {
    summary: 'one page for the fleet: every instance that publishes its dashboard',
    run: async (argv) => (await import('./dashboard-cmd.js')).runDashboard(argv),
  },
  demo: {
    summary: 'run a local cluster on embedded defaults and show what bulwark does',
    run: async (argv) => (await import('./demo/command.js')).runDemoCommand(argv),
  },
};

const HELP = `bulwark — service governance for Node.js microservices

Usage: bulwark <command> [options]

Commands:
${[...Object.entries(COMMANDS), ['help', { summary: 'show this help' }] as const].map(([name, c]) => `  ${name.padEnd(12)}${c.summary}\n`).join('')}
Run 'bulwark <command> --help' for a command's options.
`;

/** exitWhenDone ends the process with `code`: connections and timers of a stopped node's closed parts must not hold it up (it has drained). */
function exitWhenDone(code: number): never {
  process.exit(code);
}

/** main runs the command line `argv` (without node and the script) and answers the exit code. */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(HELP);
    return 0;
  }
  if (!Object.hasOwn(COMMANDS, command)) {
    process.stderr.write(`bulwark: unknown command '${command}'\n\n${HELP}`);
    return 2;
  }
  return COMMANDS[command]!.run(rest);
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

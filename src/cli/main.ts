#!/usr/bin/env node
/**
 * The `bulwark` command line. Subcommands arrive with their modules: `serve` (a cache node),
 * `demo` (a local cluster with a live dashboard), `registry ls|watch`.
 */
const HELP = `bulwark — service governance for Node.js microservices

Usage: bulwark <command> [options]

Commands:
  demo        run a local cluster on embedded defaults and show what bulwark does (coming)
  serve       run a cache node (coming)
  help        show this help

Run 'bulwark <command> --help' for a command's options.
`;

export async function main(argv: string[]): Promise<number> {
  const [command] = argv;
  switch (command) {
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(HELP);
      return 0;
    case 'demo':
    case 'serve':
      process.stdout.write(`bulwark ${command}: not built yet.\n\n${HELP}`);
      return 0;
    default:
      process.stderr.write(`bulwark: unknown command '${command}'\n\n${HELP}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`bulwark: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);

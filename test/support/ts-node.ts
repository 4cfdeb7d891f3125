/**
 * How the tests start a TypeScript file of this project as a child process: node with the loader the tests
 * themselves run under (scripts/test-ts.mjs: the file's types stripped by esbuild, compiled once per change by
 * scripts/test.mjs), not tsx, whose own start-up cost ~0.3 CPU-s per process.
 */
import { fileURLToPath } from 'node:url';

const LOADER = fileURLToPath(new URL('../../scripts/test-ts.mjs', import.meta.url));

/** tsNodeArgs answers node's arguments to run the TypeScript file `file` with `args`. */
export function tsNodeArgs(file: string, ...args: string[]): string[] {
  return ['--import', LOADER, file, ...args];
}

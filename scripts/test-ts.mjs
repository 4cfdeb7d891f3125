// Preloaded (--import) into every test process and every TypeScript child a test starts: registers
// scripts/test-ts-hooks.mjs, which runs the project's .ts files under plain node (see there), and turns on
// source maps so that stack traces name the .ts lines.
import { register } from 'node:module';

register('./test-ts-hooks.mjs', import.meta.url);
process.setSourceMapsEnabled(true);

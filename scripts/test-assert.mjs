// Preloaded into every test file's process by scripts/test.mjs (--import): a failing `assert.ok(value)`
// with no message fails at once instead of spending minutes building one.
//
// Why: with no message, node:assert reads the failing call's source to quote the expression. Under tsx (and
// scripts/test-ts.mjs, which strips types with esbuild too) the call site's position is in the transformed
// module while the file on disk is the TypeScript source, so node tokenises and re-parses the source from
// every token looking for a call at that column, and never finds it: a failing `assert.ok(during.length > 10)` in
// test/grpc-balancing.test.ts took 150 s of CPU to report `false == true`, so a failure looked like a hang.
// A message given by the test is used as before; only the missing one is replaced, by the value's text.
import assert, { AssertionError } from 'node:assert';

const original = assert.ok;
function ok(...args) {
  if (args.length >= 1 && !args[0] && args[1] === undefined) {
    throw new AssertionError({ message: `The expression evaluated to a falsy value: ${String(args[0])}`, actual: args[0], expected: true, operator: '==', stackStartFn: ok });
  }
  return Reflect.apply(original, this, args);
}
assert.ok = ok;
assert.strict.ok = ok;

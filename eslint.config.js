// ESLint (flat config): the recommended rules of ESLint and typescript-eslint over the sources, tests,
// benchmarks and scripts. Formatting is Prettier's job (.prettierrc.json), not the linter's.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config({ ignores: ['dist/', '.tmp/', 'coverage/', 'node_modules/'] }, js.configs.recommended, ...tseslint.configs.recommended, {
  languageOptions: {
    ecmaVersion: 2023,
    sourceType: 'module',
    globals: {
      process: 'readonly',
      console: 'readonly',
      Buffer: 'readonly',
      setTimeout: 'readonly',
      clearTimeout: 'readonly',
      setInterval: 'readonly',
      clearInterval: 'readonly',
      setImmediate: 'readonly',
      clearImmediate: 'readonly',
      queueMicrotask: 'readonly',
      URL: 'readonly',
      AbortController: 'readonly',
      AbortSignal: 'readonly',
      TextEncoder: 'readonly',
      TextDecoder: 'readonly',
      performance: 'readonly',
      structuredClone: 'readonly',
      fetch: 'readonly',
      globalThis: 'readonly',
    },
  },
  rules: {
    // A leading underscore marks a parameter or binding kept for its position or shape.
    '@typescript-eslint/no-unused-vars': [
      'error',
      { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', ignoreRestSiblings: true },
    ],
    // `a && b()` and `c ? d() : e()` as statements are the house's short forms on hot paths.
    '@typescript-eslint/no-unused-expressions': ['error', { allowShortCircuit: true, allowTernary: true }],
    // Terminal escapes (\x1b) and ASCII ranges (\x00-\x7f) are matched on purpose.
    'no-control-regex': 'off',
    // A binding assigned after a closure that reads it is declared first (a handler set once its server listens).
    'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
  },
});

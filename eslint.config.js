// typescript-eslint with type information: floating promises and
// non-exhaustive switches are bugs in an agent that must never stop enforcing.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'eslint.config.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  // TypeScript checks undefined names itself; plain JS (bin/) runs on Node.
  { rules: { 'no-undef': 'off' } },
  {
    languageOptions: {
      parserOptions: { projectService: { allowDefaultProject: ['bin/*.js'] }, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        // node:test queues test() and describe() itself; awaiting them is not required.
        { allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'it', 'describe', 'suite'] }] },
      ],
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
);

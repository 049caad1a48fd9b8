import tseslint from "typescript-eslint";

export default tseslint.config(
  {
    ignores: ["dist/**", "lib/redlock/dist/**", ".next/**", "node_modules/**", ".lockscope/**", "test-results/**", "playwright-report/**", "next-env.d.ts", "*.config.js", "*.config.mjs"],
  },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: { attributes: false } }],
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/ban-ts-comment": "error",
      "@typescript-eslint/consistent-type-imports": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-console": "off",
    },
  },
  // Plain JavaScript (the build scripts, which run before anything is compiled; the bench's worker entry): linted, not type-checked.
  { files: ["scripts/**/*.mjs", "bench/**/*.mjs"], ...tseslint.configs.disableTypeChecked },
  {
    // The console uses the engine package through its public entry points only.
    rules: {
      "no-restricted-imports": ["error", { patterns: [{ group: ["@/lib/redlock", "@/lib/redlock/*"], message: "Import the engine as @lockscope/redlock (or @lockscope/redlock/compat)." }] }],
    },
  },
  {
    // Components run in the browser: the shapes they share with the server live in lib/, never in server/.
    files: ["components/**/*.ts", "components/**/*.tsx"],
    rules: {
      "no-restricted-imports": ["error", { patterns: [{ group: ["@/server", "@/server/*", "**/server/*"], message: "Components import shared shapes from lib/ (server/ is server-only)." }, { group: ["@/lib/redlock", "@/lib/redlock/*"], message: "Import the engine as @lockscope/redlock (or @lockscope/redlock/compat)." }] }],
    },
  },
  {
    files: ["lib/**/*.ts"],
    rules: {
      "no-console": "error",
      "no-restricted-syntax": ["error", { selector: "MemberExpression[object.name='process'][property.name='env']", message: "lib/ never reads process.env: take configuration as arguments." }],
      "no-restricted-imports": ["error", { patterns: [{ group: ["@/server/*", "../server/*", "../../server/*", "next", "next/*"], message: "lib/ must not depend on server/ or Next.js." }, { group: ["@/lib/redlock", "@/lib/redlock/*"], message: "Import the engine as @lockscope/redlock (or @lockscope/redlock/compat)." }] }],
    },
  },
  {
    // The engine package imports only itself and Node's built-ins: it must build and run outside this repo.
    files: ["lib/redlock/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              regex: "^(?!node:|\\./)",
              message: "The engine package imports only its own files (./x.ts) and node: built-ins.",
            },
          ],
        },
      ],
    },
  },
  {
    // Its tests may add the test runner, ioredis and the node-redlock releases they compare with, still nothing of the console.
    files: ["lib/redlock/test/**/*.ts", "lib/redlock/vitest.config.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              regex: "^(?!node:|\\.{1,2}/|vitest(/|$)|ioredis$|redlock$|redlock4$)",
              message: "The engine package's tests import only the package, node: built-ins, vitest, ioredis and node-redlock.",
            },
          ],
        },
      ],
    },
  },
);

import tseslint from "typescript-eslint";

export default tseslint.config(
  {
    ignores: [".next/**", "node_modules/**", ".lockscope/**", "test-results/**", "playwright-report/**", "next-env.d.ts", "*.config.js", "*.config.mjs"],
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
  // The plain-JavaScript build scripts run before anything is compiled: linted, but not type-checked.
  { files: ["scripts/**/*.mjs"], ...tseslint.configs.disableTypeChecked },
  {
    files: ["lib/**/*.ts"],
    rules: {
      "no-console": "error",
      "no-restricted-syntax": ["error", { selector: "MemberExpression[object.name='process'][property.name='env']", message: "lib/ never reads process.env: take configuration as arguments." }],
      "no-restricted-imports": ["error", { patterns: [{ group: ["@/server/*", "../server/*", "../../server/*", "next", "next/*"], message: "lib/ must not depend on server/ or Next.js." }] }],
    },
  },
);

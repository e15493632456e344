// Lint only what the type-checker cannot see: promises that nobody awaits. A builder that forgets to
// await an async write would commit without it (the transaction is frozen when the builder returns).
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/**", ".wrangler/**", "dist/**"] },
  {
    files: [
      "src/**/*.ts",
      "test/**/*.ts",
      "test/**/*.tsx",
      "bench/**/*.ts",
      "console/**/*.ts",
      "scripts/build-client.ts",
      "scripts/test.ts",
    ],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: {
        projectService: { allowDefaultProject: ["src/storage/node-files.ts", "src/storage/node-sqlite.ts"] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    plugins: { "@typescript-eslint": tseslint.plugin },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: false }],
    },
  },
);

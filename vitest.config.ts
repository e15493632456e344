import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { TEST_SECRETS } from "./vitest.bindings.js";

const AJV_STUB = fileURLToPath(new URL("./src/worker/platform/ajv-stub.ts", import.meta.url));

// Two projects: workerd for everything that touches a Durable Object or runs in the Workers runtime,
// and Node for what needs a real file system (the JSONL fs backend). Their globals clash, so each has
// its own tsconfig (test/tsconfig.json, test/node/tsconfig.json).
export default defineConfig({
  test: {
    projects: [
      {
        plugins: [
          cloudflareTest({
            wrangler: { configPath: "./wrangler.toml", environment: "dev" },
            // Test-only secrets (the HTTP tests sign tokens and webhooks with them; see .dev.vars.example).
            // LOG_LEVEL quiet: the JSON log lines would flood the test output (tests that read them capture them).
            // TOOLS_DAYS_SEED replays a run of the tools-over-days test (it prints its seed).
            miniflare: {
              bindings: { ...TEST_SECRETS, LOG_LEVEL: "quiet", TOOLS_DAYS_SEED: process.env.TOOLS_DAYS_SEED ?? "" },
            },
          }),
        ],
        // As in the deploy bundle (wrangler.toml [alias]): AJV is a stub that throws, so a test fails if
        // anything builds the MCP SDK's default validator instead of passing the cfworker one.
        resolve: { alias: { ajv: AJV_STUB, "ajv-formats": AJV_STUB } },
        test: {
          name: "workerd",
          include: [
            "test/workerd/**/*.test.ts",
            "test/core/**/*.test.ts",
            "test/kinds/**/*.test.ts",
            "test/rig/**/*.test.ts",
          ],
          // A per-test time limit, not an assertion: on a small shared machine a cold Durable Object or a
          // many-route sweep can take longer than vitest's default 5 s.
          testTimeout: 30_000,
          typecheck: { enabled: false },
        },
      },
      {
        test: {
          name: "node",
          include: ["test/node/**/*.test.ts"],
          environment: "node",
          // A per-test time limit, not an assertion: on a small shared machine the OpenAPI validator's
          // schema compilation alone can pass vitest's default 5 s.
          testTimeout: 30_000,
        },
      },
    ],
  },
});

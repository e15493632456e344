import { fileURLToPath } from "node:url";
import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";
import { TEST_SECRETS } from "./vitest.bindings.js";

// The full eviction sweep (`npm run test:evictions`): every commit boundary of the scripted session.
const root = fileURLToPath(new URL(".", import.meta.url));

export default defineConfig({
  root,
  test: {
    projects: [
      {
        plugins: [
          cloudflareTest({
            wrangler: { configPath: `${root}/wrangler.toml`, environment: "dev" },
            miniflare: { bindings: { ...TEST_SECRETS, SWEEP_SHARD: process.env.SWEEP_SHARD ?? "0/1" } },
          }),
        ],
        test: {
          name: "evictions",
          include: ["test/workerd/**/*.sweep.ts"],
          typecheck: { enabled: false },
          testTimeout: 0,
        },
      },
    ],
  },
});

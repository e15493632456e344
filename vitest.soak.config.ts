import { fileURLToPath } from "node:url";
import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";
import { TEST_SECRETS } from "./vitest.bindings.js";

// The soak test (`npm run test:soak`, docs/operations.md "Soak test"): one session in a Durable Object over simulated days.
// SOAK_PROFILE=short|full (default full), SOAK_SEED replays a run, SOAK_START fixes its simulated start.
const root = fileURLToPath(new URL(".", import.meta.url));

export default defineConfig({
  root,
  test: {
    projects: [
      {
        plugins: [
          cloudflareTest({
            wrangler: { configPath: `${root}/wrangler.toml`, environment: "dev" },
            miniflare: {
              bindings: {
                ...TEST_SECRETS,
                LOG_LEVEL: "quiet",
                SOAK_PROFILE: process.env.SOAK_PROFILE ?? "full",
                SOAK_SEED: process.env.SOAK_SEED ?? "",
                SOAK_START: process.env.SOAK_START ?? "",
              },
            },
          }),
        ],
        test: { name: "soak", include: ["test/workerd/**/*.soak.ts"], typecheck: { enabled: false }, testTimeout: 0 },
      },
    ],
  },
});

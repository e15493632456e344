import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { TEST_SECRETS } from "./vitest.bindings.js";

const AJV_STUB = fileURLToPath(new URL("./src/worker/platform/ajv-stub.ts", import.meta.url));

/**
 * Lines workerd prints for faults the tests inject on purpose, which no test can catch (the runtime logs them
 * itself; the vitest plugin writes them to this process's stdout or stderr): a passing run prints no stack trace. Each
 * pattern names the injected message, so any other uncaught exception is still printed.
 *   - A test kills a Durable Object mid-work (`state.abort(reason)`, an eviction sweep): its broken output gate.
 *   - A Durable Object RPC that rejects is logged as uncaught under the vitest plugin even when its caller
 *     handles the rejection (cloudflare/workers-sdk#14736): the directory faults the tests inject, and the not
 *     found of a never-created session's RPC methods (session-object.test.ts checks each answers not_found).
 *   - A test resets every Durable Object after it (`abortAllDurableObjects()`), which workerd reports.
 *   - A test drops a streamed response on purpose (a watch stream cut to test reconnecting): workerd reports the
 *     pipe its reader aborted, as the plugin already hides for its other "disconnected:" lines.
 */
const INJECTED_FAULTS = [
  /^uncaught exception; exception = workerd\/api\/actor-state\.c\+\+:\d+: failed: broken\.outputGateBroken; jsg\.Error: (killed by the test|eviction sweep|killed between deregister and abort)(\n|$)/,
  /^uncaught exception; source = Uncaught \(in promise\); stack = Error: (the directory refuses updates \(test fault injection\)|the directory is overloaded|the connection was lost)(\n|$)/,
  /^uncaught exception; source = Uncaught \(in promise\); stack = SessionNotFound: not_found: no session of this name\n {4}at #acquireNow /,
  /^\s*exception = workerd\/api\/unsafe\.c\+\+:\d+: failed: jsg\.Error: Application called abortAllDurableObjects\(\)\.(\n|$)/,
  /^exception = kj\/async-io\.c\+\+:\d+: disconnected: read end of pipe was aborted(\n|$)/,
];
for (const stream of [process.stdout, process.stderr]) {
  const write = stream.write.bind(stream);
  stream.write = ((chunk: string | Uint8Array, ...rest: never[]): boolean =>
    typeof chunk === "string" && INJECTED_FAULTS.some((pattern) => pattern.test(chunk))
      ? true
      : write(chunk, ...rest)) as typeof stream.write;
}

// Two projects: workerd for everything that touches a Durable Object or runs in the Workers runtime,
// and Node for what needs a real file system (the JSONL fs backend). Their globals clash, so each has
// its own tsconfig (test/tsconfig.json, test/node/tsconfig.json).
export default defineConfig({
  test: {
    // Two test files at a time (each in its own workerd or Node worker, with its own storage). vitest's default is
    // availableParallelism() - 1, one file at a time on a 2-core machine: a core idled, and every test that waits
    // on I/O added its wait to the whole run.
    maxWorkers: 2,
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
          // Test files share a worker (its workerd runtime and module registry) instead of starting one each:
          // starting one took most of a small file's time (a 10-file sample: 75 s of CPU isolated, 41 s shared).
          // Safe because every file uses its own session and tenant names, resets the seams it sets
          // (setHostSeams({}) in afterEach) and resets its Durable Objects (abortAllDurableObjects()).
          isolate: false,
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

/**
 * The deploy configuration (wrangler.toml, read by wrangler itself): a plain `wrangler deploy` publishes the
 * production Worker, development is the explicit `[env.dev]`, and the public development secrets the Worker refuses
 * outside development are exactly those `.dev.vars.example` ships.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { unstable_readConfig } from "wrangler";
import { describe, expect, it } from "vitest";
import { PUBLIC_DEVELOPMENT_SECRETS } from "../../src/worker/platform/public-secrets.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const configPath = `${root}wrangler.toml`;

/** The fields of wrangler's resolved config this test reads. */
interface DeployConfig {
  readonly name: string | undefined;
  readonly vars: Record<string, unknown>;
  readonly durable_objects: { readonly bindings: readonly { readonly name: string; readonly class_name: string }[] };
  readonly version_metadata?: { readonly binding: string };
  readonly migrations: readonly { readonly tag: string }[];
  readonly routes?: unknown;
}

/** What a deploy of one environment (undefined: no `--env`) is made of. */
function resolved(env?: string) {
  const config: DeployConfig = unstable_readConfig({ config: configPath, ...(env === undefined ? {} : { env }) });
  return {
    name: config.name,
    vars: { ...config.vars },
    durableObjects: config.durable_objects.bindings.map((b) => ({ name: b.name, class_name: b.class_name })),
    versionMetadata: config.version_metadata?.binding,
    migrations: config.migrations.map((m) => m.tag),
    routes: config.routes,
  };
}

describe("deploy configuration", () => {
  it("The default deploy config is production-safe", () => {
    const plain = resolved();
    // The Worker production has always deployed to, so its Durable Objects (and their storage) carry over.
    expect(plain.name).toBe("pico-edge-production");
    expect(plain.vars["ENVIRONMENT"]).toBe("production");
    // No CORS origin is configured by default, and nothing development-only is switched on.
    expect(plain.vars["CORS_ORIGINS"]).toBeUndefined();
    expect(Object.values(plain.vars).join(" ")).not.toMatch(/localhost|127\.0\.0\.1|http:/);
    expect(plain.durableObjects.map((b) => b.class_name)).toEqual(["SessionObject", "DirectoryObject", "LimitsObject"]);
    expect(plain.versionMetadata).toBe("CF_VERSION_METADATA");
    // `--env production` means the same Worker with the same bindings.
    expect(resolved("production")).toEqual(plain);

    // Development is explicit, under the name local state was made with (its Durable Object ids stay).
    const dev = resolved("dev");
    expect(dev.name).toBe("pico-edge");
    expect(dev.vars["ENVIRONMENT"]).toBe("development");
    expect(dev.durableObjects).toEqual(plain.durableObjects);
    expect(dev.migrations).toEqual(plain.migrations);

    const staging = resolved("staging");
    expect(staging.name).toBe("pico-edge-staging");
    expect(staging.vars["ENVIRONMENT"]).toBe("staging");
    expect(staging.durableObjects).toEqual(plain.durableObjects);
  });

  it("npm start and every script that starts the Worker select the development config", () => {
    const pkg = JSON.parse(readFileSync(`${root}package.json`, "utf8")) as { scripts: Record<string, string> };
    expect(pkg.scripts["start"]).toMatch(/^wrangler dev .*--env dev\b/);
    for (const file of ["scripts/bench-load-dev.ts", "scripts/bench-coldstart.ts", "test/browser/console.test.ts"]) {
      const text = readFileSync(`${root}${file}`, "utf8");
      expect(text, file).toMatch(/"--env",\s*"dev"/);
    }
    // The drills and the e2e scripts start wrangler dev through drill-kit.ts, which passes the environment they name.
    expect(readFileSync(`${root}scripts/drill-kit.ts`, "utf8")).toMatch(/"--env", options\.env/);
    for (const file of ["scripts/restart-drill.ts", "scripts/e2e-custom-provider.ts", "scripts/e2e-mcp.ts"])
      expect(readFileSync(`${root}${file}`, "utf8"), file).toMatch(/env: "dev"/);
    // The upgrade drill runs the current tree under its `[env.dev]` (devEnvOf) and the previous release as it was.
    expect(readFileSync(`${root}scripts/upgrade-drill.ts`, "utf8")).toMatch(/devEnvOf\(/);
    for (const file of [
      "vitest.config.ts",
      "vitest.evictions.config.ts",
      "vitest.soak.config.ts",
      "bench/vitest.bench.config.ts",
    ]) {
      expect(readFileSync(`${root}${file}`, "utf8"), file).toMatch(/environment: "dev"/);
    }
  });

  it("The public development secrets the Worker refuses are the ones .dev.vars.example ships", () => {
    const example = new Map(
      readFileSync(`${root}.dev.vars.example`, "utf8")
        .split("\n")
        .flatMap((line) => {
          const match = /^([A-Z_][A-Z0-9_]*)=(.+)$/.exec(line.trim());
          return match === null ? [] : [[match[1] ?? "", match[2] ?? ""] as const];
        }),
    );
    expect(Object.fromEntries(example)).toEqual(PUBLIC_DEVELOPMENT_SECRETS);
  });
});

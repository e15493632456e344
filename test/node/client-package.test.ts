/**
 * The typed client as the package a page installs (`@pico-edge/client`, scripts/build-client.ts): the build
 * writes one self-contained module whose sources are src/client/ and the shared watch reducer (never
 * src/api/ at runtime, zod, or a server file), and the `npm pack` tarball installs into an empty project
 * without a network and constructs a client there.
 */
import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { CLIENT_PACKAGE_NAME, RUNTIME_ALLOWED, TYPE_PEERS } from "../../scripts/build-client.js";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const tmp = mkdtempSync(join(tmpdir(), "pico-client-package-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** npm without the repository's settings or a network round trip. */
function npm(args: readonly string[], cwd: string): string {
  return execFileSync("npm", [...args], {
    cwd,
    encoding: "utf8",
    env: { ...process.env, npm_config_audit: "false", npm_config_fund: "false", npm_config_update_notifier: "false" },
  });
}

describe("client package", () => {
  it("The client package builds and imports no server file", { timeout: 180_000 }, () => {
    const out = join(tmp, "client");
    const printed = npm(["run", "--silent", "build:client", "--", out], root);
    expect(printed).toMatch(/client package: .*index\.js, \d+ bytes, \d+ bytes gzip/);

    // One module, no imports of its own: nothing outside the package is loaded at runtime.
    const code = readFileSync(join(out, "index.js"), "utf8");
    expect(code).not.toMatch(/^\s*import[\s{*"']/m);
    expect(code).not.toMatch(/^\s*export\s[^;]*\bfrom\s*["']/m);
    expect(code).not.toMatch(/\brequire\s*\(|\bimport\s*\(/);

    // Its sources: src/client/ and the allowed reducer, never src/api at runtime, zod or a server file.
    const inputs = JSON.parse(readFileSync(join(out, "build-inputs.json"), "utf8")) as string[];
    expect(inputs).toContain("src/client/index.ts");
    expect(inputs).toContain("src/core/watch-reduce.ts");
    const server =
      /^src\/(worker|kinds|rig|tools|models|api)\/|node_modules\/(zod|hono|@cloudflare|@earendil-works\/pi-ai)\//;
    expect(inputs.filter((input) => server.test(input))).toEqual([]);
    expect(inputs.filter((input) => input.startsWith("src/core/"))).toEqual(["src/core/watch-reduce.ts"]);
    expect(RUNTIME_ALLOWED).not.toContain("src/api/");

    const manifest = JSON.parse(readFileSync(join(out, "package.json"), "utf8")) as Record<string, unknown>;
    expect(manifest).toMatchObject({ name: CLIENT_PACKAGE_NAME, type: "module" });
    expect(manifest["version"]).toMatch(/^\d+\.\d+\.\d+/);
    expect(manifest["dependencies"]).toBeUndefined();
    expect(existsSync(join(out, "types/client/index.d.ts"))).toBe(true);

    // npm pack, then install the tarball into an empty project (no dependencies: no network).
    const packed = JSON.parse(npm(["pack", "--json", "--pack-destination", tmp], out)) as { filename: string }[];
    const tarball = join(tmp, packed[0]?.filename ?? "");
    const app = join(tmp, "app");
    mkdirSync(app);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
    npm(["install", "--offline", "--no-audit", "--no-fund", tarball], app);
    const installed = join(app, "node_modules", CLIENT_PACKAGE_NAME);
    expect(existsSync(join(installed, "types/client/index.d.ts"))).toBe(true);
    expect(existsSync(join(installed, "build-inputs.json"))).toBe(false);

    // A page's code: construct a client over a stub fetch and call one route.
    writeFileSync(
      join(app, "main.js"),
      [
        `import { PicoClient, PicoApiError, applyMessage } from "${CLIENT_PACKAGE_NAME}";`,
        `const seen = [];`,
        `const fetch = async (request) => {`,
        `  seen.push(request.method + " " + request.url + " " + request.headers.get("authorization"));`,
        `  return Response.json({ items: [], cursor: undefined });`,
        `};`,
        `const client = new PicoClient({ baseUrl: "https://pico.example", token: "t0k", fetch });`,
        `const page = await client.sessions({ limit: 5 });`,
        `console.log(JSON.stringify({ page, seen, types: [typeof PicoApiError, typeof applyMessage] }));`,
      ].join("\n"),
    );
    const ran = JSON.parse(execFileSync(process.execPath, ["main.js"], { cwd: app, encoding: "utf8" })) as unknown;
    expect(ran).toEqual({
      page: { items: [] },
      seen: ["GET https://pico.example/v1/sessions?limit=5 Bearer t0k"],
      types: ["function", "function"],
    });

    // Its declarations type a page's code once the optional type peers are there (linked from this repository).
    for (const peer of TYPE_PEERS) {
      mkdirSync(dirname(join(app, "node_modules", peer)), { recursive: true });
      symlinkSync(realpathSync(join(root, "node_modules", peer)), join(app, "node_modules", peer), "dir");
    }
    writeFileSync(
      join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2023",
          module: "ES2022",
          moduleResolution: "Bundler",
          lib: ["ES2023", "DOM"],
          types: [],
          strict: true,
          skipLibCheck: true,
          noEmit: true,
        },
        files: ["page.ts"],
      }),
    );
    writeFileSync(
      join(app, "page.ts"),
      [
        `import { PicoClient, type ConversationView } from "${CLIENT_PACKAGE_NAME}";`,
        `const client = new PicoClient({ baseUrl: "https://pico.example", token: "t0k" });`,
        `export async function start(render: (view: ConversationView) => void): Promise<string> {`,
        `  // @ts-expect-error a model is a string (an unresolved type would let this through)`,
        `  await client.session("s").create({ model: 42 });`,
        `  client.session("s").conversation("root").watch({ onChange: render });`,
        `  const { session } = await client.session("s").create({});`,
        `  return session;`,
        `}`,
      ].join("\n"),
    );
    const tsc = join(root, "node_modules/typescript/bin/tsc");
    expect(() => execFileSync(process.execPath, [tsc, "-p", app], { cwd: app, encoding: "utf8" })).not.toThrow();
  });
});

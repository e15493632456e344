/**
 * `npm run build:client [-- OUT_DIR]` builds the typed client (src/client/) as the ESM package
 * `@pico-edge/client` in OUT_DIR (default dist/client/): `index.js` (one self-contained module, no imports),
 * `types/` (the declarations, from tsc) and its own `package.json` (no dependencies). It prints the
 * module's size and its gzip size.
 *
 * The build refuses (exit 1) when the module would hold a source file outside RUNTIME_ALLOWED: the client
 * reaches src/api/, zod and the server only through `import type`, which leaves nothing at runtime. Besides
 * src/client/ the module holds the kind-free watch reducer (src/core/watch-reduce.ts), the one the
 * server's own watches fold with, so a page and the server compute the same view; what it needs of
 * src/storage/shared.ts (`addressKey`); and Chord's delta apply (`@earendil-works/chord/delta`, MIT).
 *
 * The declarations mirror src/ under `types/` (the client's, and the src/api, src/core and src/storage types
 * they name); they import types from TYPE_PEERS, which the manifest lists as optional peer dependencies.
 *
 * `build-inputs.json` in OUT_DIR lists the source files the module holds (for the test; not packed).
 */
import { build } from "esbuild";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import ts from "typescript";

export const CLIENT_PACKAGE_NAME = "@pico-edge/client";

/** What the module may hold besides src/client/: prefixes of paths relative to the repository root. */
export const RUNTIME_ALLOWED: readonly string[] = [
  "src/client/",
  "src/core/watch-reduce.ts",
  "src/storage/shared.ts",
  "src/storage/storage.ts",
  "node_modules/@earendil-works/chord/dist/delta/",
];

/** The packages the declarations import types from (the wire schema's zod, the core's pi-ai and Chord). */
export const TYPE_PEERS: readonly string[] = ["zod", "@earendil-works/pi-ai", "@earendil-works/chord"];

/** The inputs outside RUNTIME_ALLOWED (paths relative to the root; a symlinked node_modules counts as its own). */
export function disallowedInputs(inputs: readonly string[]): string[] {
  return inputs.filter((input) => {
    const modules = input.lastIndexOf("node_modules/");
    const path = modules >= 0 ? input.slice(modules) : input;
    return !RUNTIME_ALLOWED.some((prefix) => path.startsWith(prefix));
  });
}

export interface ClientBuild {
  readonly outDir: string;
  readonly bytes: number;
  readonly gzipBytes: number;
  readonly inputs: readonly string[];
}

export async function buildClient(root: string, outDir: string): Promise<ClientBuild> {
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  const own = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
    version: string;
    dependencies: Record<string, string>;
  };

  const result = await build({
    absWorkingDir: root,
    entryPoints: ["src/client/index.ts"],
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    outfile: join(outDir, "index.js"),
    metafile: true,
    legalComments: "eof",
    logLevel: "warning",
  });
  const inputs = Object.keys(result.metafile.inputs).sort();
  const refused = disallowedInputs(inputs);
  if (refused.length > 0) {
    throw new Error(`the client module would hold files outside RUNTIME_ALLOWED: ${refused.join(", ")}`);
  }
  writeFileSync(join(outDir, "build-inputs.json"), `${JSON.stringify(inputs, null, 2)}\n`);

  emitDeclarations(root, join(outDir, "types"));

  const manifest = {
    name: CLIENT_PACKAGE_NAME,
    version: own.version,
    description: "Typed HTTP client for pico-edge: routes, problem+json errors, live watches with resume",
    type: "module",
    main: "./index.js",
    types: "./types/client/index.d.ts",
    exports: { ".": { types: "./types/client/index.d.ts", import: "./index.js", default: "./index.js" } },
    files: ["index.js", "types"],
    sideEffects: false,
    // Nothing at runtime; the declarations name these packages' types. Optional: a page installs them (as
    // dev dependencies) for the full types, and without them those types are unresolved.
    peerDependencies: Object.fromEntries(TYPE_PEERS.map((name) => [name, own.dependencies[name] ?? "*"])),
    peerDependenciesMeta: Object.fromEntries(TYPE_PEERS.map((name) => [name, { optional: true }])),
  };
  writeFileSync(join(outDir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);

  const code = readFileSync(join(outDir, "index.js"));
  return { outDir, bytes: code.byteLength, gzipBytes: gzipSync(code).byteLength, inputs };
}

/** tsc's declarations for src/client/index.ts and every file its types reach, under outDir mirroring src/. */
function emitDeclarations(root: string, outDir: string): void {
  const config = ts.parseJsonConfigFileContent(
    {
      extends: "./tsconfig.base.json",
      compilerOptions: {
        noEmit: false,
        declaration: true,
        emitDeclarationOnly: true,
        rootDir: "./src",
        outDir,
        types: [],
        lib: ["ES2023", "DOM"],
      },
      files: ["./src/client/index.ts"],
    },
    ts.sys,
    root,
  );
  const program = ts.createProgram({ rootNames: config.fileNames, options: config.options });
  const emitted = program.emit();
  if (emitted.emitSkipped || emitted.diagnostics.length > 0) {
    const host: ts.FormatDiagnosticsHost = {
      getCanonicalFileName: (name) => name,
      getCurrentDirectory: () => root,
      getNewLine: () => "\n",
    };
    throw new Error(`declarations: ${ts.formatDiagnostics(emitted.diagnostics, host)}`);
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = join(dirname(fileURLToPath(import.meta.url)), "..");
  const outDir = resolve(process.argv[2] ?? join(root, "dist/client"));
  try {
    const built = await buildClient(root, outDir);
    console.log(
      `client package: ${relative(process.cwd(), join(outDir, "index.js")) || "index.js"}, ${built.bytes} bytes, ${built.gzipBytes} bytes gzip`,
    );
  } catch (error) {
    console.error(error instanceof Error ? error.message : error);
    process.exitCode = 1;
  }
}

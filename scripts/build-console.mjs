// Builds the console's script (console/main.ts -> public/console/app.js) with esbuild, which wrangler
// already brings. Run by wrangler itself before it bundles (wrangler.toml `[build]`: every deploy, dry run
// and `wrangler dev`), and by `npm run build:console`, `npm start` and `npm run test:browser`.
//
// The file is written only when its bytes change: every `wrangler dev` runs this build, and CI starts several
// side by side (.ci/run), each serving public/ and reloading when a file in it is rewritten.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { build } from "esbuild";

const OUT = "public/console/app.js";
const result = await build({
  entryPoints: ["console/main.ts"],
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: true,
  outfile: OUT,
  metafile: true,
  write: false,
  logLevel: "warning",
});
for (const file of result.outputFiles) {
  if (existsSync(file.path) && Buffer.compare(readFileSync(file.path), file.contents) === 0) continue;
  mkdirSync(dirname(file.path), { recursive: true });
  writeFileSync(file.path, file.contents);
}
const bytes = Object.values(result.metafile.outputs).reduce((sum, output) => sum + output.bytes, 0);
console.log(`console bundle: ${OUT}, ${bytes} bytes`);

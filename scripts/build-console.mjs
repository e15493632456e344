// Builds the console's script (console/main.ts -> public/console/app.js) with esbuild, which wrangler
// already brings. Run by wrangler itself before it bundles (wrangler.toml `[build]`: every deploy, dry run
// and `wrangler dev`), and by `npm run build:console`, `npm start` and `npm run test:browser`.
import { build } from "esbuild";

const result = await build({
  entryPoints: ["console/main.ts"],
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: true,
  outfile: "public/console/app.js",
  metafile: true,
  logLevel: "warning",
});
const bytes = Object.values(result.metafile.outputs).reduce((sum, output) => sum + output.bytes, 0);
console.log(`console bundle: public/console/app.js, ${bytes} bytes`);

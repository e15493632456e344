/**
 * The house check, run by `npm run lint` after eslint: `node scripts/check-house.ts [root]` reads every
 * .ts file under src/ and fails (exit 1) when the source tree stops being one a newcomer can walk:
 *
 *   - an import circle (a strongly connected component of the import graph) holds more than
 *     MAX_CIRCLE files. Every import of a relative module counts: `import`, `import type`,
 *     `export ... from`, and dynamic or type-position `import("...")`;
 *   - a file is longer than MAX_LINES lines;
 *   - a file in src/core imports something above it. src/core is the runtime-agnostic core
 *     (README "Architecture": imports point worker -> rig/kinds/tools -> core -> storage interface). It may import:
 *       - other files in src/core;
 *       - the storage interface: src/storage/storage.ts, src/storage/records.ts, src/storage/shared.ts
 *         (never a backend);
 *       - the packages @earendil-works/pi-ai and @earendil-works/chord (and their subpaths).
 *     Anything else fails: any other relative path out of src/core, and any other package, in particular
 *     cloudflare:*, @cloudflare/*, hono, hono/* and zod.
 *
 * Each offence is printed with what it needs to be fixed, and a one-line summary ends the output.
 * The checks are exported for the tests (test/node/house-check.test.ts).
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, posix, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

export const MAX_CIRCLE = 3;
export const MAX_LINES = 700;

const CORE = "src/core/";
const CORE_MAY_IMPORT_FILES = ["src/storage/storage.ts", "src/storage/records.ts", "src/storage/shared.ts"];
const CORE_MAY_IMPORT_PACKAGES = ["@earendil-works/pi-ai", "@earendil-works/chord"];

/** One import of one file: the specifier as written, its 1-based line, and the src file it resolves to (if any). */
export interface Import {
  readonly specifier: string;
  readonly line: number;
  readonly target: string | undefined;
}

export type Offence =
  | { readonly kind: "circle"; readonly files: readonly string[]; readonly imports: ReadonlyMap<string, readonly string[]> }
  | { readonly kind: "long-file"; readonly file: string; readonly lines: number }
  | { readonly kind: "core-import"; readonly file: string; readonly line: number; readonly specifier: string };

/** Every .ts file under root/src, as repository-relative paths with forward slashes, sorted. */
export function sourceFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const full = join(dir, name);
      if (statSync(full).isDirectory()) walk(full);
      else if (name.endsWith(".ts")) out.push(relative(root, full).split(sep).join("/"));
    }
  };
  walk(join(root, "src"));
  return out.sort();
}

/** The number of lines of a text, as `wc -l` would count them when the last line ends in a newline. */
export function lineCount(text: string): number {
  if (text === "") return 0;
  const breaks = text.split("\n").length - 1;
  return text.endsWith("\n") ? breaks : breaks + 1;
}

/** A relative specifier resolved against the importing file to a file in the set: `x.js` and `x.ts` name x.ts; `x` names x.ts or x/index.ts. */
export function resolveRelative(from: string, specifier: string, files: ReadonlySet<string>): string | undefined {
  const base = posix.normalize(posix.join(posix.dirname(from), specifier));
  const stem = base.replace(/\.(js|ts)$/, "");
  const candidates = [`${stem}.ts`, `${base}.ts`, `${base}/index.ts`, `${stem}.d.ts`];
  return candidates.find((c) => files.has(c));
}

function isRelative(specifier: string): boolean {
  return specifier.startsWith("./") || specifier.startsWith("../") || specifier === "." || specifier === "..";
}

/** Every module a file's text imports, in order of appearance. */
export function importsOf(file: string, text: string, files: ReadonlySet<string>): Import[] {
  const info = ts.preProcessFile(text, true, true);
  const starts = lineStarts(text);
  return info.importedFiles.map((ref) => ({
    specifier: ref.fileName,
    line: lineAt(starts, ref.pos),
    target: isRelative(ref.fileName) ? resolveRelative(file, ref.fileName, files) : undefined,
  }));
}

function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = 0; i < text.length; i++) if (text[i] === "\n") starts.push(i + 1);
  return starts;
}

function lineAt(starts: readonly number[], pos: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((starts[mid] ?? 0) <= pos) lo = mid;
    else hi = mid - 1;
  }
  return lo + 1;
}

/** The strongly connected components of a graph with more than one node (Tarjan), each sorted, in order of their first file. */
export function circles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  let next = 0;
  const visit = (node: string): void => {
    index.set(node, next);
    low.set(node, next);
    next++;
    stack.push(node);
    onStack.add(node);
    for (const to of graph.get(node) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node) ?? 0, low.get(to) ?? 0));
      } else if (onStack.has(to)) {
        low.set(node, Math.min(low.get(node) ?? 0, index.get(to) ?? 0));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string | undefined;
      do {
        member = stack.pop();
        if (member === undefined) break;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1) out.push(component.sort());
    }
  };
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) visit(node);
  return out.sort((a, b) => (a[0] ?? "").localeCompare(b[0] ?? ""));
}

function coreMayImport(imp: Import): boolean {
  if (isRelative(imp.specifier)) {
    return imp.target !== undefined && (imp.target.startsWith(CORE) || CORE_MAY_IMPORT_FILES.includes(imp.target));
  }
  return CORE_MAY_IMPORT_PACKAGES.some((pkg) => imp.specifier === pkg || imp.specifier.startsWith(`${pkg}/`));
}

/** Every offence in the tree at root: circles first, then long files, then core imports. */
export function checkHouse(root: string): Offence[] {
  const files = sourceFiles(root);
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  const imports = new Map<string, Import[]>();
  const offences: Offence[] = [];
  const long: Offence[] = [];
  for (const file of files) {
    const text = readFileSync(join(root, file), "utf8");
    const found = importsOf(file, text, known);
    imports.set(file, found);
    graph.set(file, [...new Set(found.flatMap((i) => (i.target === undefined ? [] : [i.target])))]);
    const lines = lineCount(text);
    if (lines > MAX_LINES) long.push({ kind: "long-file", file, lines });
  }
  for (const component of circles(graph)) {
    if (component.length <= MAX_CIRCLE) continue;
    const members = new Set(component);
    const within = new Map(component.map((f) => [f, (graph.get(f) ?? []).filter((t) => members.has(t)).sort()]));
    offences.push({ kind: "circle", files: component, imports: within });
  }
  offences.push(...long);
  for (const file of files) {
    if (!file.startsWith(CORE)) continue;
    for (const imp of imports.get(file) ?? []) {
      if (!coreMayImport(imp)) offences.push({ kind: "core-import", file, line: imp.line, specifier: imp.specifier });
    }
  }
  return offences;
}

/** An offence as the lines printed for it. */
export function describe(offence: Offence): string {
  switch (offence.kind) {
    case "circle": {
      const lines = offence.files.map((f) => `    ${f} imports ${(offence.imports.get(f) ?? []).map((t) => posix.basename(t)).join(", ")}`);
      return [`import circle of ${offence.files.length} files (at most ${MAX_CIRCLE}; type imports count):`, ...lines].join("\n");
    }
    case "long-file":
      return `${offence.file} is ${offence.lines} lines long (at most ${MAX_LINES})`;
    case "core-import":
      return `${offence.file}:${offence.line} imports "${offence.specifier}": src/core may import only src/core, ${CORE_MAY_IMPORT_FILES.join(", ")} and the packages ${CORE_MAY_IMPORT_PACKAGES.join(", ")}`;
    default: {
      const never: never = offence;
      return never;
    }
  }
}

/** The one-line summary that ends the output. */
export function summary(offences: readonly Offence[], fileCount: number): string {
  if (offences.length === 0) return `house check passed: ${fileCount} files in src/, no import circle over ${MAX_CIRCLE} files, none over ${MAX_LINES} lines, src/core imports nothing above it`;
  const count = (kind: Offence["kind"]): number => offences.filter((o) => o.kind === kind).length;
  return `house check FAILED: ${count("circle")} import circle(s) over ${MAX_CIRCLE} files, ${count("long-file")} file(s) over ${MAX_LINES} lines, ${count("core-import")} src/core import(s) from above`;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), ".."));
  const offences = checkHouse(root);
  for (const offence of offences) process.stdout.write(`${describe(offence)}\n`);
  process.stdout.write(`${summary(offences, sourceFiles(root).length)}\n`);
  process.exitCode = offences.length === 0 ? 0 : 1;
}

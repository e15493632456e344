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
 *     cloudflare:*, @cloudflare/*, hono, hono/* and zod;
 *   - src/worker stops being rooms (WORKER_ROOMS below, the one declaration of its folders and their order):
 *       - a file at src/worker's top level other than the entry (index.ts) and the shared modules
 *         (WORKER_SHARED), or a file in a folder that is not a declared room;
 *       - an import between rooms that the importing room does not declare (`mayImport`): one that runs
 *         back up the order, or sideways to a room it did not say it needs; a shared module importing a
 *         room, or anything but the entry importing the entry;
 *       - a circle between rooms (a declaration that lists a later room is refused for the same reason);
 *       - a room without a README.md, or whose README's `May import:` line is not its declaration.
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

/**
 * src/worker's rooms, lowest first: what each may import besides the shared modules. A room may list only
 * rooms above it in this list, so the order is the building's floors and no two rooms import each other.
 * Each room's README.md says what it owns and repeats its `May import:` line (checked).
 */
export interface Room {
  readonly folder: string;
  readonly mayImport: readonly string[];
}

export const WORKER = "src/worker/";
/** The Worker's entry: it wires the rooms together, and nothing imports it. */
export const WORKER_ENTRY = "index.ts";
/** Modules every room may import; they import no room (the ground floor). */
export const WORKER_SHARED: readonly string[] = ["env.ts", "errors.ts", "log.ts", "problems.ts", "schemas.ts"];
export const WORKER_ROOMS: readonly Room[] = [
  { folder: "platform", mayImport: [] },
  { folder: "crypto", mayImport: [] },
  { folder: "inbound", mayImport: ["crypto"] },
  { folder: "directory", mayImport: ["platform", "crypto"] },
  { folder: "outbox", mayImport: ["platform", "crypto", "directory"] },
  { folder: "limits", mayImport: ["platform"] },
  { folder: "identity", mayImport: ["platform", "directory", "limits"] },
  { folder: "remote", mayImport: ["platform", "crypto", "directory"] },
  { folder: "watch", mayImport: ["identity"] },
  { folder: "frontends", mayImport: ["watch"] },
  {
    folder: "session",
    mayImport: [
      "platform",
      "crypto",
      "inbound",
      "directory",
      "outbox",
      "limits",
      "identity",
      "remote",
      "watch",
      "frontends",
    ],
  },
  {
    folder: "http",
    mayImport: [
      "platform",
      "crypto",
      "inbound",
      "directory",
      "outbox",
      "limits",
      "identity",
      "remote",
      "watch",
      "frontends",
      "session",
    ],
  },
];

export type Offence =
  | {
      readonly kind: "circle";
      readonly files: readonly string[];
      readonly imports: ReadonlyMap<string, readonly string[]>;
    }
  | { readonly kind: "worker-file"; readonly file: string }
  | {
      readonly kind: "worker-import";
      readonly file: string;
      readonly line: number;
      readonly specifier: string;
      readonly from: string;
      readonly to: string;
    }
  | { readonly kind: "worker-circle"; readonly rooms: readonly string[] }
  | { readonly kind: "worker-room"; readonly room: string; readonly problem: string }
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

/**
 * A relative specifier resolved against the importing file to a file in the set: `x.js` and `x.ts` name x.ts; `x` names
 * x.ts or x/index.ts.
 */
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

/**
 * The strongly connected components of a graph with more than one node (Tarjan), each sorted, in order of their first
 * file.
 */
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

/**
 * The room a src/worker file stands in: a declared or undeclared folder, `shared`, `entry`, or `top` (any other
 * top-level file).
 */
export function roomOf(file: string): string | undefined {
  if (!file.startsWith(WORKER)) return undefined;
  const rest = file.slice(WORKER.length);
  const slash = rest.indexOf("/");
  if (slash >= 0) return rest.slice(0, slash);
  if (rest === WORKER_ENTRY) return "entry";
  return WORKER_SHARED.includes(rest) ? "shared" : "top";
}

/** The `May import:` line a room's README carries: its declaration, in order, or "the shared modules only". */
export function mayImportLine(room: Room): string {
  return `May import: ${room.mayImport.length === 0 ? "the shared modules only" : `the shared modules, ${room.mayImport.join(", ")}`}.`;
}

/** Does a room's declaration allow an import from room `from` to room `to` (both as roomOf names them)? */
function allowed(rooms: ReadonlyMap<string, Room>, from: string, to: string): boolean {
  if (from === to || from === "entry" || to === "shared") return true;
  if (to === "entry" || from === "shared") return false;
  return rooms.get(from)?.mayImport.includes(to) ?? true;
}

function workerOffences(
  root: string,
  files: readonly string[],
  imports: ReadonlyMap<string, readonly Import[]>,
  rooms: readonly Room[],
): Offence[] {
  const out: Offence[] = [];
  const byName = new Map(rooms.map((r) => [r.folder, r]));
  rooms.forEach((room, index) => {
    const earlier = new Set(rooms.slice(0, index).map((r) => r.folder));
    const later = room.mayImport.filter((m) => !earlier.has(m));
    if (later.length > 0)
      out.push({
        kind: "worker-room",
        room: room.folder,
        problem: `declares ${later.join(", ")}, which is not below it in WORKER_ROOMS`,
      });
  });
  const present = new Set<string>();
  for (const file of files) {
    const room = roomOf(file);
    if (room === undefined) continue;
    if (room === "top" || (room !== "shared" && room !== "entry" && !byName.has(room)))
      out.push({ kind: "worker-file", file });
    else if (room !== "shared" && room !== "entry") present.add(room);
  }
  const graph = new Map<string, Set<string>>();
  for (const file of files) {
    const from = roomOf(file);
    if (from === undefined) continue;
    for (const imp of imports.get(file) ?? []) {
      const to = imp.target === undefined ? undefined : roomOf(imp.target);
      if (to === undefined || to === from) continue;
      if (!graph.has(from)) graph.set(from, new Set());
      graph.get(from)?.add(to);
      if (!allowed(byName, from, to))
        out.push({ kind: "worker-import", file, line: imp.line, specifier: imp.specifier, from, to });
    }
  }
  for (const component of circles(new Map([...graph].map(([k, v]) => [k, [...v]]))))
    out.push({ kind: "worker-circle", rooms: component });
  for (const room of rooms) {
    if (!present.has(room.folder)) continue;
    let readme: string;
    try {
      readme = readFileSync(join(root, WORKER, room.folder, "README.md"), "utf8");
    } catch {
      out.push({
        kind: "worker-room",
        room: room.folder,
        problem: "has no README.md saying what it owns and what it may import",
      });
      continue;
    }
    if (!readme.split("\n").some((line) => line.trim() === mayImportLine(room))) {
      out.push({
        kind: "worker-room",
        room: room.folder,
        problem: `README.md lacks the line "${mayImportLine(room)}"`,
      });
    }
  }
  return out;
}

/** Every offence in the tree at root: circles first, then long files, then core imports, then src/worker's rooms. */
export function checkHouse(root: string, rooms: readonly Room[] = WORKER_ROOMS): Offence[] {
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
  offences.push(...workerOffences(root, files, imports, rooms));
  return offences;
}

/** An offence as the lines printed for it. */
export function describe(offence: Offence): string {
  switch (offence.kind) {
    case "circle": {
      const lines = offence.files.map(
        (f) => `    ${f} imports ${(offence.imports.get(f) ?? []).map((t) => posix.basename(t)).join(", ")}`,
      );
      return [
        `import circle of ${offence.files.length} files (at most ${MAX_CIRCLE}; type imports count):`,
        ...lines,
      ].join("\n");
    }
    case "long-file":
      return `${offence.file} is ${offence.lines} lines long (at most ${MAX_LINES})`;
    case "core-import":
      return `${offence.file}:${offence.line} imports "${offence.specifier}": src/core may import only src/core, ${CORE_MAY_IMPORT_FILES.join(", ")} and the packages ${CORE_MAY_IMPORT_PACKAGES.join(", ")}`;
    case "worker-file":
      return `${offence.file} stands outside src/worker's rooms: move it into one (WORKER_ROOMS in scripts/check-house.ts) or, if every room needs it, declare it in WORKER_SHARED`;
    case "worker-import":
      return `${offence.file}:${offence.line} imports "${offence.specifier}": room ${offence.from} may not import ${offence.to} (WORKER_ROOMS in scripts/check-house.ts: an import runs only down the declared floors)`;
    case "worker-circle":
      return `rooms import each other in a circle: ${offence.rooms.join(", ")}`;
    case "worker-room":
      return `src/worker/${offence.room}/ ${offence.problem}`;
    default: {
      const never: never = offence;
      return never;
    }
  }
}

/** The one-line summary that ends the output. */
export function summary(offences: readonly Offence[], fileCount: number): string {
  if (offences.length === 0)
    return `house check passed: ${fileCount} files in src/, no import circle over ${MAX_CIRCLE} files, none over ${MAX_LINES} lines, src/core imports nothing above it, src/worker in ${WORKER_ROOMS.length} rooms importing only down`;
  const count = (...kinds: Offence["kind"][]): number => offences.filter((o) => kinds.includes(o.kind)).length;
  return `house check FAILED: ${count("circle")} import circle(s) over ${MAX_CIRCLE} files, ${count("long-file")} file(s) over ${MAX_LINES} lines, ${count("core-import")} src/core import(s) from above, ${count("worker-file", "worker-import", "worker-circle", "worker-room")} src/worker room offence(s)`;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), ".."));
  const offences = checkHouse(root);
  for (const offence of offences) process.stdout.write(`${describe(offence)}\n`);
  process.stdout.write(`${summary(offences, sourceFiles(root).length)}\n`);
  process.exitCode = offences.length === 0 ? 0 : 1;
}

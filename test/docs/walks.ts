/**
 * The doc walks: every fenced ```sh block of README.md and docs/*.md, parsed into steps, and the bash
 * script that runs one doc file's walks in order (walks.test.ts runs it against a fresh `npm start`).
 *
 * The convention, as a doc writer uses it:
 *
 * - A ```sh block is a walk. A doc file's walks run in order in one bash shell, so a later walk uses the
 *   variables an earlier one set (B, T, H, ...). Each doc file gets its own fresh server with empty state.
 * - A step is one command as a reader types it: a line, or several joined by a trailing `\` or held open
 *   by an unfinished construct (a function body, a quote). Blank and comment lines are not steps.
 * - `# => 201` at the end of a command's last line, or alone on the line right after it, asserts the
 *   HTTP status of the command's curl request; `# => {"status":"done"}` asserts that its body contains
 *   that JSON (expect.ts: ids and timestamps match any value, `"..."` matches anything); `# => 409 {...}`
 *   asserts both. Any other comment is prose and asserts nothing.
 * - Every curl request must answer 2xx unless its `# =>` names another status. A curl that fails
 *   (connection refused, ...) fails the walk, except one cut by its own `--max-time` after a 2xx answer
 *   (a watch stream read for a while). A command that exits non-zero fails the walk.
 * - A walk whose first line is `# offline: skip — <reason>` (or `# skip — <reason>`) is not run and is
 *   reported as skipped with that reason: a real deploy, a real provider key, a long benchmark.
 * - `npm start` in a walk is the server the runner already started for that file: it is not run again.
 * - A block whose info string names a file after its language (```js receiver.mjs) is written to that
 *   file in the repository root while the doc's walks run, so a walk can run it (`node receiver.mjs`).
 *
 * In the script, `curl` is a bash function that calls the real curl with `-D` (the headers, for the
 * status) and tees the body, so the text a reader sees is what curl prints.
 */
import { spawnSync } from "node:child_process";
import { parseExpectation, type Expectation } from "./expect.ts";

export interface Step {
  /** The 1-based line of the doc where the command starts. */
  readonly line: number;
  readonly text: string;
  readonly expect: Expectation | undefined;
  /** Run in the background (`... &`): the runner does not wait for it. */
  readonly background: boolean;
  /** `npm start`: the runner's own server. */
  readonly npmStart: boolean;
}

export interface Walk {
  /** The 1-based line of the opening fence. */
  readonly line: number;
  readonly skip: string | undefined;
  readonly steps: readonly Step[];
}

export interface DocFile {
  readonly line: number;
  readonly name: string;
  readonly text: string;
}

export interface Doc {
  readonly path: string;
  readonly walks: readonly Walk[];
  readonly files: readonly DocFile[];
}

interface Fence {
  readonly line: number;
  readonly info: string;
  readonly body: readonly string[];
}

const SKIP = /^#\s*(?:offline:\s*)?skip\s*[—:-]\s*(.+)$/;
const TRAILING_EXPECT = /\s#\s*=>\s*(.*)$/;
const LINE_EXPECT = /^\s*#\s*=>\s*(.*)$/;
const FILE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*\.(?:mjs|cjs|js|ts|json|txt)$/;

/** The fenced blocks of a markdown text (``` fences at the start of a line). */
export function fences(markdown: string): Fence[] {
  const out: Fence[] = [];
  const lines = markdown.split("\n");
  let open: { line: number; info: string; body: string[] } | undefined;
  lines.forEach((text, i) => {
    if (open === undefined) {
      const match = /^```(.*)$/.exec(text);
      if (match !== null) open = { line: i + 1, info: (match[1] ?? "").trim(), body: [] };
    } else if (/^```\s*$/.test(text)) {
      out.push(open);
      open = undefined;
    } else open.body.push(text);
  });
  if (open !== undefined) throw new Error(`the fence opened at line ${open.line} is never closed`);
  return out;
}

/** Whether bash reads `text` as complete commands: "complete", "incomplete" (it wants more lines) or an error. */
function bashReads(text: string): "complete" | "incomplete" | string {
  if (/\\\s*$/.test(text)) return "incomplete";
  const result = spawnSync("bash", ["-n"], { input: `${text}\n`, encoding: "utf8" });
  if (result.status === 0) return "complete";
  return /unexpected end of file|unexpected EOF/.test(result.stderr) ? "incomplete" : result.stderr.trim();
}

/** The code of a line before a trailing comment (a rough cut: ` #` outside the docs' quoting). */
function codeOf(line: string): string {
  const at = line.search(/(^|\s)#/);
  return at < 0 ? line : line.slice(0, at);
}

/** One ```sh block as a walk. Throws, naming the doc line, on a step bash cannot read or a bad `# =>`. */
export function parseWalk(fence: Fence, where: string): Walk {
  const first = fence.body.find((l) => l.trim() !== "");
  const skip = first === undefined ? undefined : SKIP.exec(first.trim())?.[1]?.trim();
  const steps: {
    line: number;
    text: string;
    expect: Expectation | undefined;
    background: boolean;
    npmStart: boolean;
  }[] = [];
  if (skip !== undefined) return { line: fence.line, skip, steps };
  let i = 0;
  let lastWasStep = false;
  while (i < fence.body.length) {
    const line = fence.body[i] ?? "";
    const lineNo = fence.line + 1 + i;
    if (line.trim() === "") {
      lastWasStep = false;
      i++;
      continue;
    }
    const alone = LINE_EXPECT.exec(line);
    if (alone !== null) {
      const previous = steps.at(-1);
      if (!lastWasStep || previous === undefined)
        throw new Error(`${where}:${lineNo}: a \`# =>\` line must come right after the command it checks`);
      if (previous.expect !== undefined)
        throw new Error(`${where}:${lineNo}: the command at line ${previous.line} already has a \`# =>\``);
      previous.expect = parseAt(alone[1] ?? "", where, lineNo);
      i++;
      continue;
    }
    if (line.trim().startsWith("#")) {
      lastWasStep = false;
      i++;
      continue;
    }
    const start = i;
    let text = line;
    let reads = bashReads(text);
    while (reads === "incomplete" && i + 1 < fence.body.length) {
      i++;
      text += `\n${fence.body[i] ?? ""}`;
      reads = bashReads(text);
    }
    if (reads !== "complete")
      throw new Error(
        `${where}:${fence.line + 1 + start}: bash cannot read this command: ${reads === "incomplete" ? "it is not finished when the block ends" : reads}`,
      );
    const last = text.split("\n").at(-1) ?? "";
    const trailing = TRAILING_EXPECT.exec(last);
    const code = codeOf(last).trimEnd();
    steps.push({
      line: fence.line + 1 + start,
      text,
      expect: trailing === null ? undefined : parseAt(trailing[1] ?? "", where, fence.line + 1 + i),
      background: code.endsWith("&") && !code.endsWith("&&"),
      npmStart: /^npm start(\s|$)/.test(codeOf(text).trim()),
    });
    lastWasStep = true;
    i++;
  }
  return { line: fence.line, skip: undefined, steps };
}

function parseAt(text: string, where: string, line: number): Expectation {
  try {
    return parseExpectation(text);
  } catch (error) {
    throw new Error(`${where}:${line}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** A doc file's walks and the files its blocks name. */
export function parseDoc(path: string, markdown: string): Doc {
  const walks: Walk[] = [];
  const files: DocFile[] = [];
  for (const fence of fences(markdown)) {
    const [lang, name, ...more] = fence.info.split(/\s+/);
    if (lang === "sh" && name === undefined) walks.push(parseWalk(fence, path));
    else if (name !== undefined && more.length === 0 && FILE_NAME.test(name))
      files.push({ line: fence.line, name, text: `${fence.body.join("\n")}\n` });
  }
  return { path, walks, files };
}

/** A step of the script: which walk and step of the doc it is. */
export interface ScriptStep {
  readonly walk: number;
  readonly step: Step;
}

export interface Script {
  readonly text: string;
  /** Numbered from 1, as the script's `__walk_step N` calls are. */
  readonly steps: readonly ScriptStep[];
  /** Files to write into the script's directory first: the steps' text and expectations. */
  readonly files: ReadonlyMap<string, string>;
}

function quote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

/**
 * The bash script of a doc's runnable walks, to run from the repository root with WALK_DIR set to a
 * fresh directory holding `files`. It records in WALK_DIR: `reached` (the number of the step begun last),
 * `failures` (lines `N<TAB>reason`) and `finished` when every step ran; it stops at the first failure.
 */
export function script(doc: Doc, checker: string, node: string): Script {
  const files = new Map<string, string>();
  const steps: ScriptStep[] = [];
  const lines: string[] = [
    "# Generated by test/docs/walks.ts from the walks of " + doc.path,
    `__walk_node=${quote(node)}`,
    `__walk_checker=${quote(checker)}`,
    'mkdir -p "$WALK_DIR/calls"',
    '__walk_fail() { printf \'%s\\t%s\\n\' "${WALK_STEP:-0}" "$1" | tr -d \'\\r\' >> "$WALK_DIR/failures"; }',
    // The walk's curl: the real one, with the headers to a file (for the status) and the body teed.
    "curl() {",
    '  local step="${WALK_STEP:-0}" base rc status expected why',
    '  base="$WALK_DIR/calls/$step.$BASHPID.$RANDOM"',
    '  command curl -D "$base.head" "$@" | tee "$base.body"',
    "  rc=${PIPESTATUS[0]}",
    "  status=$(sed -n 's/^HTTP\\/[0-9.]* \\([0-9][0-9][0-9]\\).*/\\1/p' \"$base.head\" 2>/dev/null | tail -n 1)",
    "  status=${status:-000}",
    '  expected=; [ -f "$WALK_DIR/expect/$step.status" ] && expected=$(cat "$WALK_DIR/expect/$step.status")',
    '  if [ "$rc" -ne 0 ] && ! { [ "$rc" -eq 28 ] && [[ $status == 2?? ]]; }; then __walk_fail "curl failed (exit $rc, HTTP status $status)"; return 1; fi',
    '  if [ -n "$expected" ]; then',
    '    if [ "$status" != "$expected" ]; then __walk_fail "answered $status, not the $expected its # => names: $(head -c 600 "$base.body")"; return 1; fi',
    '  elif [[ $status != 2?? ]]; then __walk_fail "answered $status, which the walk does not expect (no # => $status): $(head -c 600 "$base.body")"; return 1; fi',
    '  if [ -f "$WALK_DIR/expect/$step.json" ]; then',
    '    if ! why=$(NODE_NO_WARNINGS=1 "$__walk_node" "$__walk_checker" "$WALK_DIR/expect/$step.json" "$base.body" 2>&1); then __walk_fail "$why"; return 1; fi',
    "  fi",
    "}",
    "__walk_step() {",
    '  [ -s "$WALK_DIR/failures" ] && exit 1',
    "  export WALK_STEP=$1",
    '  echo "$1" > "$WALK_DIR/reached"',
    '  printf \'\\n$ %s\\n\' "$(cat "$WALK_DIR/steps/$1")"',
    "}",
    "__walk_done() {",
    '  if [ "$2" -ne 0 ] && ! grep -q "^$1\t" "$WALK_DIR/failures" 2>/dev/null; then __walk_fail "exited with status $2"; fi',
    '  if [ "$3" = checks ] && ! compgen -G "$WALK_DIR/calls/$1.*.head" > /dev/null; then __walk_fail "has a # => but made no curl request"; fi',
    "  return 0",
    "}",
  ];
  doc.walks.forEach((walk, w) => {
    if (walk.skip !== undefined) return;
    lines.push(`# walk ${w + 1} (${doc.path}:${walk.line})`);
    for (const step of walk.steps) {
      steps.push({ walk: w, step });
      const n = steps.length;
      files.set(`steps/${n}`, step.text);
      if (step.expect?.status !== undefined) files.set(`expect/${n}.status`, String(step.expect.status));
      if (step.expect?.json !== undefined) files.set(`expect/${n}.json`, JSON.stringify(step.expect.json));
      lines.push(`__walk_step ${n}`);
      lines.push(step.npmStart ? ": npm start is the server the runner started" : step.text);
      const checks = step.expect !== undefined && !step.background;
      lines.push(`__walk_done ${n} $? ${checks ? "checks" : "-"}`);
    }
  });
  lines.push('[ -s "$WALK_DIR/failures" ] && exit 1', 'echo ok > "$WALK_DIR/finished"', "");
  return { text: lines.join("\n"), steps, files };
}

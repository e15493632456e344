/**
 * `npm test`: the type-check, the lint and every vitest project, started side by side (they are independent,
 * and one after another left a core idle on a 2-core machine), then each stage's time and the ten slowest
 * test files. Exits non-zero when any stage fails.
 *
 * The type-check and lint stages are quiet when they pass, so their output is held and printed whole when the
 * stage ends (never interleaved line by line with vitest's). vitest streams as it runs and writes its JSON
 * report to .vitest-report.json (`.ci/run` reads its totals there; the slowest files below come from it).
 *
 *   node scripts/test.ts [vitest arguments...]     e.g. `npm test -- --project node`
 *
 * TEST_STAGES=typecheck,lint,vitest picks stages (all by default).
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const REPORT = ".vitest-report.json";
const bin = (name: string): string => resolve(root, "node_modules/.bin", name);

/** The type-check projects (one tsc per tsconfig; each covers what its runtime sees). */
const TSCONFIGS = [
  "tsconfig.json",
  "test/tsconfig.json",
  "test/node/tsconfig.json",
  "console/tsconfig.json",
  "test/browser/tsconfig.json",
  "bench/time/tsconfig.json",
  "test/docs/tsconfig.json",
  "scripts/tsconfig.json",
] as const;

interface Step {
  readonly command: string;
  readonly args: readonly string[];
}

interface Stage {
  readonly name: "typecheck" | "lint" | "vitest";
  /** Run one after another inside the stage; the stage fails at the first step that fails. */
  readonly steps: readonly Step[];
  /** Stream the output as it comes (vitest) or hold it until the stage ends (quiet stages). */
  readonly stream: boolean;
}

interface Result {
  readonly name: Stage["name"];
  readonly ok: boolean;
  readonly seconds: number;
}

const STAGES: readonly Stage[] = [
  {
    name: "vitest",
    stream: true,
    steps: [
      {
        command: bin("vitest"),
        args: ["run", "--reporter=default", "--reporter=json", `--outputFile.json=${REPORT}`, ...process.argv.slice(2)],
      },
    ],
  },
  {
    name: "typecheck",
    stream: false,
    steps: TSCONFIGS.map((project) => ({ command: bin("tsc"), args: ["--noEmit", "-p", project] })),
  },
  {
    name: "lint",
    stream: false,
    steps: [
      { command: bin("prettier"), args: ["--check", "--log-level", "warn", "."] },
      {
        command: bin("eslint"),
        args: ["src", "test", "bench", "console", "scripts/build-client.ts", "scripts/test.ts"],
      },
      { command: process.execPath, args: ["scripts/check-house.ts"] },
    ],
  },
];

/** One step as a child process; resolves with its exit code (signals count as failure). */
function runStep(step: Step, stream: boolean, held: Buffer[]): Promise<number> {
  return new Promise((done) => {
    const child = spawn(step.command, [...step.args], {
      cwd: root,
      stdio: stream ? "inherit" : ["ignore", "pipe", "pipe"],
      env: process.env,
    });
    if (!stream) {
      child.stdout?.on("data", (chunk: Buffer) => held.push(chunk));
      child.stderr?.on("data", (chunk: Buffer) => held.push(chunk));
    }
    child.on("error", (error) => {
      held.push(Buffer.from(`${step.command}: ${error.message}\n`));
      done(1);
    });
    child.on("close", (code) => done(code ?? 1));
  });
}

async function runStage(stage: Stage): Promise<Result> {
  const started = performance.now();
  const held: Buffer[] = [];
  let ok = true;
  for (const step of stage.steps) {
    const code = await runStep(step, stage.stream, held);
    if (code !== 0) {
      held.push(Buffer.from(`${relative(root, step.command) || step.command} ${step.args.join(" ")}: exit ${code}\n`));
      ok = false;
      break;
    }
  }
  const seconds = (performance.now() - started) / 1000;
  const output = Buffer.concat(held).toString("utf8");
  if (output.trim() !== "" || !ok) {
    process.stdout.write(`\n--- ${stage.name} ${ok ? "passed" : "FAILED"} (${seconds.toFixed(0)} s) ---\n${output}`);
  }
  return { name: stage.name, ok, seconds };
}

/** The slowest test files of the JSON report: [seconds, path relative to the repository]. */
function slowestFiles(count: number): [number, string][] {
  if (!existsSync(resolve(root, REPORT))) return [];
  const report = JSON.parse(readFileSync(resolve(root, REPORT), "utf8")) as {
    testResults?: { name: string; startTime: number; endTime: number }[];
  };
  return (report.testResults ?? [])
    .map((file): [number, string] => [(file.endTime - file.startTime) / 1000, relative(root, file.name)])
    .sort((a, b) => b[0] - a[0])
    .slice(0, count);
}

const picked = process.env["TEST_STAGES"]?.split(",").map((name) => name.trim());
const stages = STAGES.filter((stage) => picked === undefined || picked.includes(stage.name));
if (stages.some((stage) => stage.name === "vitest")) rmSync(resolve(root, REPORT), { force: true });
const started = performance.now();
const results = await Promise.all(stages.map(runStage));
const total = (performance.now() - started) / 1000;

const slowest = slowestFiles(10);
if (slowest.length > 0) {
  console.log("\nslowest test files:");
  for (const [seconds, file] of slowest) console.log(`  ${seconds.toFixed(1).padStart(6)} s  ${file}`);
}
console.log("\nstages (side by side):");
for (const result of results) {
  console.log(`  ${result.name.padEnd(10)} ${result.seconds.toFixed(0).padStart(5)} s  ${result.ok ? "ok" : "FAILED"}`);
}
console.log(`  ${"total".padEnd(10)} ${total.toFixed(0).padStart(5)} s (wall)`);
process.exitCode = results.every((result) => result.ok) ? 0 : 1;

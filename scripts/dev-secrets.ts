/**
 * Development secrets for the scripts (`npm start`, `npm run token`, `npm run webhook-secret`): read
 * `.dev.vars` (created from `.dev.vars.example` when missing, so `npm start` works on a fresh clone, with
 * a random `SECRETS_SEALING_KEY` and `SUBJECT_HASH_KEY` added when the file has none);
 * an environment variable of the same name wins, which is how the scripts are pointed at production
 * secrets (`JWT_SECRET=... npm run token -- ...`). Run by Node directly (type stripping), so it imports
 * nothing from src/.
 */
import { randomBytes } from "node:crypto";
import { appendFileSync, copyFileSync, existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/**
 * Create `.dev.vars` from the example when it does not exist, and add a random SECRETS_SEALING_KEY, and a random
 * SUBJECT_HASH_KEY, when it has none (what the first sealed opens, and the erasures the second hashed match, only while
 * the file keeps that key); returns its path.
 */
export function ensureDevVars(): string {
  const path = join(root, ".dev.vars");
  if (!existsSync(path)) {
    copyFileSync(join(root, ".dev.vars.example"), path);
    process.stderr.write("created .dev.vars from .dev.vars.example (development-only secrets)\n");
  }
  for (const name of ["SECRETS_SEALING_KEY", "SUBJECT_HASH_KEY"]) {
    const value = parse(readFileSync(path, "utf8")).get(name);
    if (value !== undefined && value !== "") continue;
    const text = readFileSync(path, "utf8");
    appendFileSync(
      path,
      `${text.endsWith("\n") || text === "" ? "" : "\n"}${name}=${randomBytes(32).toString("base64")}\n`,
    );
    process.stderr.write(`added a random ${name} to .dev.vars (development only)\n`);
  }
  return path;
}

function parse(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const match = /^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/.exec(line);
    if (match === null) continue;
    let value = match[2] ?? "";
    if ((value.startsWith('"') && value.endsWith('"')) || (value.startsWith("'") && value.endsWith("'")))
      value = value.slice(1, -1);
    out.set(match[1] ?? "", value);
  }
  return out;
}

/** The value of a secret: the environment, else .dev.vars (created when missing). */
export function devSecret(name: string): string {
  const fromEnv = process.env[name];
  if (fromEnv !== undefined && fromEnv !== "") return fromEnv;
  const value = parse(readFileSync(ensureDevVars(), "utf8")).get(name);
  if (value === undefined || value === "") throw new Error(`${name} is not set in the environment or .dev.vars`);
  return value;
}

/** `--name value` arguments. */
export function flags(argv: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? "";
    if (!arg.startsWith("--")) throw new Error(`unexpected argument ${arg}`);
    const next = argv[i + 1];
    if (next === undefined || next.startsWith("--")) throw new Error(`${arg} needs a value`);
    out.set(arg.slice(2), next);
    i += 1;
  }
  return out;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) ensureDevVars();

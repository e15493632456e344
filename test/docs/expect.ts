/**
 * What a walk's `# =>` comment asserts about the HTTP answer of the command it follows (see walks.ts for
 * the whole convention): a status (`# => 201`), a JSON subset of the body (`# => {"status":"done"}`), or
 * both (`# => 409 {"code":"conflict"}`).
 *
 * A JSON subset matches when every key it names is in the answer with a matching value: objects are
 * compared key by key (keys the expectation leaves out are not checked), an array matches when each of
 * its items matches a different item of the answer's array (in any order), and other values are equal.
 * Ids and timestamps match any value, as long as the key is there: a key `id`, `at` or `timestamp`, or
 * one ending in `Id`, `_id`, `At` or `_at`. The string `"..."` matches any value.
 *
 * Run directly (`node test/docs/expect.ts EXPECTED.json BODY`) it is the check the walk's `curl` wrapper
 * calls: exit 0 when the body matches, else exit 1 with the reason on stdout.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

export type Json = null | boolean | number | string | readonly Json[] | { readonly [key: string]: Json };

export interface Expectation {
  readonly status: number | undefined;
  readonly json: Json | undefined;
}

/** Keys whose values are ids or timestamps: any value matches. */
const ANY_VALUE_KEY = /^(?:id|at|timestamp)$|Id$|_id$|At$|_at$/;
/** The value that matches anything. */
const ANY = "...";

/** The text after `# =>`: a status, JSON, or a status then JSON. Throws when it is neither. */
export function parseExpectation(text: string): Expectation {
  const match = /^(\d{3})?\s*([\s\S]*)$/.exec(text.trim());
  const status = match?.[1] === undefined ? undefined : Number(match[1]);
  const rest = (match?.[2] ?? "").trim();
  if (rest === "") {
    if (status === undefined) throw new Error("`# =>` needs a status, a JSON body, or both");
    return { status, json: undefined };
  }
  if (!rest.startsWith("{") && !rest.startsWith("["))
    throw new Error(`\`# => ${text.trim()}\`: after the status comes nothing or a JSON object or array`);
  try {
    return { status, json: JSON.parse(rest) as Json };
  } catch (error) {
    throw new Error(
      `\`# => ${text.trim()}\` is not valid JSON: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function show(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}

/** Where `actual` does not contain `expected` (a path and what differs), or undefined when it does. */
export function subsetMismatch(expected: Json, actual: unknown, path = "$"): string | undefined {
  if (expected === ANY) return undefined;
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) return `${path}: expected an array, got ${show(actual)}`;
    const used = new Set<number>();
    for (const [i, item] of (expected as readonly Json[]).entries()) {
      const found = actual.findIndex(
        (candidate: unknown, j) => !used.has(j) && subsetMismatch(item, candidate, `${path}[${j}]`) === undefined,
      );
      if (found < 0) return `${path}: no item matches ${path}[${i}] ${show(item)} (got ${show(actual)})`;
      used.add(found);
    }
    return undefined;
  }
  if (isObject(expected)) {
    if (!isObject(actual)) return `${path}: expected an object, got ${show(actual)}`;
    for (const [key, value] of Object.entries(expected)) {
      if (!(key in actual)) return `${path}.${key} is missing (got ${show(actual)})`;
      if (ANY_VALUE_KEY.test(key)) continue;
      const inner = subsetMismatch(value as Json, actual[key], `${path}.${key}`);
      if (inner !== undefined) return inner;
    }
    return undefined;
  }
  return Object.is(expected, actual) ? undefined : `${path}: expected ${show(expected)}, got ${show(actual)}`;
}

/** The body of an answer as curl printed it: without the header block `curl -i` puts first. */
export function bodyOf(printed: string): string {
  if (!printed.startsWith("HTTP/")) return printed;
  const end = printed.search(/\r?\n\r?\n/);
  return end < 0 ? "" : printed.slice(end).trimStart();
}

/** Why `printed` does not match the JSON expectation, or undefined when it does. */
export function bodyMismatch(expected: Json, printed: string): string | undefined {
  const body = bodyOf(printed);
  let actual: unknown;
  try {
    actual = JSON.parse(body);
  } catch {
    return `the answer is not JSON, so it cannot match ${show(expected)}: ${show(body)}`;
  }
  const why = subsetMismatch(expected, actual);
  return why === undefined ? undefined : `the answer does not match \`# => ${JSON.stringify(expected)}\`: ${why}`;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [expectedFile, bodyFile] = process.argv.slice(2);
  if (expectedFile === undefined || bodyFile === undefined) {
    process.stdout.write("usage: node test/docs/expect.ts EXPECTED.json BODY\n");
    process.exit(2);
  }
  const why = bodyMismatch(JSON.parse(readFileSync(expectedFile, "utf8")) as Json, readFileSync(bodyFile, "utf8"));
  if (why !== undefined) {
    process.stdout.write(`${why}\n`);
    process.exit(1);
  }
}

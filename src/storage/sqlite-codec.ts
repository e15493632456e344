/**
 * Lossless compact text of two SQLite columns (§7.5; docs/performance.md "Cost per turn"), used by the
 * SQLite backend only (the memory and JSONL backends keep records as given):
 *
 * - `entries.model` (§2.1, the pi-ai messages of an entry): an assistant message's `usage` with exactly
 *   pi-ai's key set and order (input, output, cacheRead, cacheWrite, totalTokens, cost{input, output,
 *   cacheRead, cacheWrite, total}), finite numbers and totals equal to their sums is stored as the array
 *   of the eight counts and cost components, trailing zeros dropped. A row holding such an array starts
 *   with "~" (never the first character of JSON text), so rows written before, or whose usage cannot be
 *   restored exactly, are plain JSON read as they are. Reading restores the same keys in the same order:
 *   JSON.stringify of the restored messages equals that of the written ones.
 * - `tasks.state` (§6.1): a state whose first or last key is its status is stored without it (a "~"
 *   before the JSON says it was last); the `tasks.status` column holds the same string and reading puts
 *   it back in its place. Only a status the column gives back exactly is left out: a string that is not
 *   well-formed UTF-16 (a lone surrogate) is stored as UTF-8 and reads back with U+FFFD in its place,
 *   so such a status stays in the JSON, which escapes it (§10.1: every backend reads back what was
 *   written). A state text that has `status` (an old row, one whose status was neither first nor last,
 *   or one whose status the column would change) is read as it is.
 */
import type { JsonObject, JsonValue } from "./records.js";

// ---------------------------------------------------------------------------------------------
// entries.model: assistant usage

/** The first character of a compacted `model` column (not a character JSON text can start with). */
const COMPACT_MODEL = "~";
const COUNT_KEYS = ["input", "output", "cacheRead", "cacheWrite"] as const;
const USAGE_KEYS = [...COUNT_KEYS, "totalTokens", "cost"] as const;
const COST_KEYS = [...COUNT_KEYS, "total"] as const;

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function hasKeys(value: JsonObject, keys: readonly string[]): boolean {
  const own = Object.keys(value);
  return own.length === keys.length && own.every((k, i) => k === keys[i]);
}

/** The four numbers in `COUNT_KEYS` order, or undefined when one is not a finite number. */
function counts(value: JsonObject): number[] | undefined {
  const out: number[] = [];
  for (const k of COUNT_KEYS) {
    const n = value[k];
    if (typeof n !== "number" || !Number.isFinite(n)) return undefined;
    out.push(n);
  }
  return out;
}

/** The sum in one fixed order, so the reader computes the same float. */
function sum(parts: readonly number[]): number {
  return (parts[0] ?? 0) + (parts[1] ?? 0) + (parts[2] ?? 0) + (parts[3] ?? 0);
}

/** The compact array of a usage object, or undefined when restoring it would not be exact. */
function compactUsage(usage: JsonValue | undefined): number[] | undefined {
  if (!isObject(usage) || !hasKeys(usage, USAGE_KEYS)) return undefined;
  const cost = usage["cost"];
  if (!isObject(cost) || !hasKeys(cost, COST_KEYS)) return undefined;
  const tokens = counts(usage);
  const parts = counts(cost);
  if (tokens === undefined || parts === undefined) return undefined;
  if (usage["totalTokens"] !== sum(tokens) || cost["total"] !== sum(parts)) return undefined;
  const out = [...tokens, ...parts];
  while (out.length > 0 && out[out.length - 1] === 0) out.pop();
  return out;
}

function restoreUsage(stored: readonly JsonValue[]): JsonObject {
  const at = (i: number): number => {
    const n = stored[i];
    return typeof n === "number" ? n : 0;
  };
  const tokens = [at(0), at(1), at(2), at(3)];
  const parts = [at(4), at(5), at(6), at(7)];
  return {
    input: at(0),
    output: at(1),
    cacheRead: at(2),
    cacheWrite: at(3),
    totalTokens: sum(tokens),
    cost: { input: at(4), output: at(5), cacheRead: at(6), cacheWrite: at(7), total: sum(parts) },
  };
}

function isAssistant(message: JsonValue): message is JsonObject {
  return isObject(message) && message["role"] === "assistant";
}

/**
 * The stored text of an entry's `model` given its JSON text: compacted when at least one assistant
 * usage compacts and no assistant message has an array `usage` of its own (which would read back as
 * compact); otherwise `text` unchanged.
 */
export function encodeModel(model: readonly unknown[], text: string): string {
  let changed = false;
  const out: JsonValue[] = [];
  for (const m of model as readonly JsonValue[]) {
    if (!isAssistant(m)) {
      out.push(m);
      continue;
    }
    if (Array.isArray(m["usage"])) return text;
    const usage = compactUsage(m["usage"]);
    if (usage === undefined) {
      out.push(m);
      continue;
    }
    changed = true;
    out.push({ ...m, usage }); // the usage key keeps its position
  }
  return changed ? COMPACT_MODEL + JSON.stringify(out) : text;
}

/** The messages of a stored `model` column (compact, or plain JSON as written before). */
export function decodeModel(text: string): JsonValue {
  if (!text.startsWith(COMPACT_MODEL)) return JSON.parse(text) as JsonValue;
  const stored = JSON.parse(text.slice(COMPACT_MODEL.length)) as JsonValue[];
  return stored.map((m) => {
    if (!isAssistant(m)) return m;
    const usage = m["usage"];
    return Array.isArray(usage) ? { ...m, usage: restoreUsage(usage) } : m;
  });
}

// ---------------------------------------------------------------------------------------------
// tasks.state: status

/** The first character of a `tasks.state` text stored without its last key, `status` (not JSON's). */
const STATUS_LAST = "~";

/** A high surrogate not followed by a low one, or a low surrogate not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Whether a TEXT column gives `value` back unchanged: SQLite stores text as UTF-8, which cannot encode a
 * lone surrogate (it becomes U+FFFD). Every well-formed string round-trips, NUL included.
 */
export function survivesTextColumn(value: string): boolean {
  return !LONE_SURROGATE.test(value);
}

/**
 * The stored text of a task state given its JSON text and its status (the `tasks.status` column):
 * without `status` when it is the first key (plain JSON) or the last one ("~" and the JSON without it)
 * and the column gives it back exactly; otherwise `text` as it is.
 */
export function encodeState(text: string, status: string): string {
  if (!survivesTextColumn(status)) return text;
  const member = `"status":${JSON.stringify(status)}`;
  if (text.startsWith(`{${member}`)) {
    const next = text.charAt(member.length + 1);
    if (next === "}") return "{}";
    if (next === ",") return `{${text.slice(member.length + 2)}`;
    return text;
  }
  // A top-level last member: the final quote before "}" closes the value, and the one after ":" opens it.
  const tail = `,${member}}`;
  if (text.endsWith(tail)) return `${STATUS_LAST}${text.slice(0, text.length - tail.length)}}`;
  return text;
}

/** The state of a stored `tasks.state` text; `status` (the column) is read only when the text lacks it. */
export function decodeState(text: string, status: () => string): JsonObject & { readonly status: string } {
  if (text.startsWith(STATUS_LAST))
    return { ...(JSON.parse(text.slice(STATUS_LAST.length)) as JsonObject), status: status() };
  const parsed = JSON.parse(text) as JsonObject;
  if (Object.hasOwn(parsed, "status")) return parsed as JsonObject & { readonly status: string };
  return { status: status(), ...parsed };
}

/**
 * JSON helpers for system sections (§2.1, §8.2): owned copies of payloads (a draft never shares an
 * object with a handler) and canonical text for structural comparison that ignores incidental
 * object-key order. Used by the section draft, the durable fold and the planner.
 */
import type { JsonValue } from "../storage/records.js";

/**
 * A deep, owned copy of a JSON payload. Rejects what JSON cannot represent (undefined, functions,
 * non-finite numbers, class instances, cycles) so a payload always survives storage unchanged.
 */
export function jsonCopy(value: unknown, path = "payload", seen: Set<object> = new Set()): JsonValue {
  if (value === null || typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new TypeError(`${path}: ${String(value)} is not JSON-representable`);
    return value;
  }
  if (typeof value !== "object") throw new TypeError(`${path}: a ${typeof value} is not JSON-representable`);
  if (seen.has(value)) throw new TypeError(`${path}: a cyclic value is not JSON-representable`);
  seen.add(value);
  try {
    if (Array.isArray(value)) return value.map((item, i) => jsonCopy(item, `${path}[${i}]`, seen));
    const proto = Object.getPrototypeOf(value) as unknown;
    if (proto !== Object.prototype && proto !== null)
      throw new TypeError(`${path}: only plain objects are JSON-representable`);
    const out: { [key: string]: JsonValue } = {};
    for (const [key, item] of Object.entries(value)) out[key] = jsonCopy(item, `${path}.${key}`, seen);
    return out;
  } finally {
    seen.delete(value);
  }
}

/**
 * Canonical JSON text: object keys sorted, properties whose value is undefined dropped (as JSON
 * does). Two values are structurally equal iff their canonical texts are equal.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") {
    const text = JSON.stringify(value);
    return text === undefined ? "null" : text;
  }
  if (Array.isArray(value))
    return `[${value.map((item) => canonicalJson(item === undefined ? null : item)).join(",")}]`;
  const keys = Object.keys(value).sort();
  const parts: string[] = [];
  for (const key of keys) {
    const item = (value as Record<string, unknown>)[key];
    if (item === undefined || typeof item === "function" || typeof item === "symbol") continue;
    parts.push(`${JSON.stringify(key)}:${canonicalJson(item)}`);
  }
  return `{${parts.join(",")}}`;
}

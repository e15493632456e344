/**
 * Version skew inside one deploy (docs/operations.md "Version skew"): during a rollout a Worker (or an object) of
 * the previous release calls objects of this one. test/fixtures/rpc-previous.json holds every object RPC the
 * previous release made while scripts/record-rpc.ts drove it (the Worker's calls and the objects' calls to each
 * other: session, directory, limits), each with the answer it got. Replayed in order against this release's objects
 * of the same names, each request is accepted (no throw, the same `ok` for an Outcome) and each answer carries what
 * the previous release read from it: every field it had, with the same JSON type.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import recorded from "../fixtures/rpc-previous.json";

interface RpcFixture {
  readonly caller: string;
  readonly binding: "SESSIONS" | "DIRECTORY" | "LIMITS";
  readonly name: string;
  readonly method: string;
  readonly args: readonly unknown[];
  readonly answer?: unknown;
}

const fixtures = recorded as unknown as { readonly release: string; readonly calls: readonly RpcFixture[] };

type Kind = "null" | "array" | "object" | "string" | "number" | "boolean" | "undefined";
function kindOf(value: unknown): Kind {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value as Kind;
}

/** Where `current` lacks a field `previous` had, or has it with another JSON type (paths, empty when none). */
function shapeGaps(previous: unknown, current: unknown, path: string): string[] {
  const want = kindOf(previous);
  const got = kindOf(current);
  // A field that was null may now carry a value (an optional one filled), and the other way round.
  if (want === "null" || got === "null") return [];
  if (want !== got) return [`${path}: ${want} before, ${got} now`];
  if (want === "array") {
    const [p] = previous as unknown[];
    const [c] = current as unknown[];
    return p === undefined || c === undefined ? [] : shapeGaps(p, c, `${path}[0]`);
  }
  if (want !== "object") return [];
  const gaps: string[] = [];
  const cur = current as Record<string, unknown>;
  for (const [key, value] of Object.entries(previous as Record<string, unknown>)) {
    if (!(key in cur)) gaps.push(`${path}.${key}: missing now`);
    else gaps.push(...shapeGaps(value, cur[key], `${path}.${key}`));
  }
  return gaps;
}

/** Fields whose presence depends on timing or on state the replay cannot reproduce exactly (a reservation carried). */
const OPTIONAL = new Set(["carried", "duplicate", "nextCursor", "next"]);

/** The recording's marker of an undefined array element (an optional argument left out) back to undefined. */
function revive(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(revive);
  if (value !== null && typeof value === "object") {
    if ((value as { $undefined?: unknown }).$undefined === true) return undefined;
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, revive(v)]));
  }
  return value;
}

/**
 * Ids this replay's objects gave where the recording had others (a pending item's id carries the session's
 * incarnation, a schedule's id its sequence): learnt from answers (fields named `id`), applied to later requests.
 */
function learnIds(previous: unknown, current: unknown, ids: Map<unknown, unknown>): void {
  if (previous === null || current === null || typeof previous !== "object" || typeof current !== "object") return;
  if (Array.isArray(previous) && Array.isArray(current)) {
    previous.forEach((p, i) => learnIds(p, current[i], ids));
    return;
  }
  const cur = current as Record<string, unknown>;
  for (const [key, value] of Object.entries(previous as Record<string, unknown>)) {
    const now = cur[key];
    if (key === "id" && (typeof value === "string" || typeof value === "number") && now !== value && now !== undefined)
      ids.set(value, now);
    else learnIds(value, now, ids);
  }
}

function withIds(value: unknown, ids: Map<unknown, unknown>): unknown {
  if (Array.isArray(value)) return value.map((v) => withIds(v, ids));
  if (value !== null && typeof value === "object")
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withIds(v, ids)]));
  return ids.has(value) ? ids.get(value) : value;
}

function stubOf(call: RpcFixture): Record<string, (...args: readonly unknown[]) => Promise<unknown>> {
  const namespace = env[call.binding] as unknown as DurableObjectNamespace;
  const id = /^[0-9a-f]{64}$/.test(call.name) ? namespace.idFromString(call.name) : namespace.idFromName(call.name);
  return namespace.get(id) as unknown as Record<string, (...args: readonly unknown[]) => Promise<unknown>>;
}

describe("version skew: the previous release's RPCs", () => {
  it("Every object RPC accepts the previous release's requests", async () => {
    expect(fixtures.calls.length).toBeGreaterThan(0);
    const failures: string[] = [];
    const seen = new Set<string>();
    const ids = new Map<unknown, unknown>();
    for (const [index, call] of fixtures.calls.entries()) {
      const what = `#${index} ${call.caller} -> ${call.binding}.${call.method}`;
      seen.add(`${call.caller}->${call.binding}.${call.method}`);
      let answer: unknown;
      try {
        answer = await stubOf(call)[call.method]?.(...(withIds(revive(call.args), ids) as unknown[]));
      } catch (error) {
        failures.push(`${what} threw: ${error instanceof Error ? error.message : String(error)}`);
        continue;
      }
      const before = call.answer as { ok?: unknown } | undefined;
      const now = answer as { ok?: unknown } | undefined;
      if (before !== undefined && typeof before === "object" && "ok" in before) {
        if (now?.ok !== before.ok) {
          failures.push(`${what}: ok ${String(before.ok)} before, ${JSON.stringify(answer).slice(0, 300)} now`);
          continue;
        }
      }
      learnIds(call.answer, answer, ids);
      const gaps = shapeGaps(call.answer, answer, "answer").filter(
        (gap) => !OPTIONAL.has(/\.([^.[\]]+): missing now$/.exec(gap)?.[1] ?? ""),
      );
      if (gaps.length > 0) failures.push(`${what}: ${gaps.join("; ")}`);
    }
    expect(failures).toEqual([]);
    // The recording covers the Worker's calls of all three objects and the objects' calls of each other.
    expect([...seen].some((k) => k.startsWith("worker->SESSIONS."))).toBe(true);
    expect([...seen].some((k) => k.startsWith("worker->DIRECTORY."))).toBe(true);
    expect([...seen].some((k) => k.startsWith("worker->LIMITS."))).toBe(true);
    expect([...seen].some((k) => k.startsWith("SESSIONS->DIRECTORY."))).toBe(true);
    expect([...seen].some((k) => k.startsWith("SESSIONS->LIMITS."))).toBe(true);
  }, 60_000);
});

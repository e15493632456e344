/**
 * The server's side of the wire schemas: everything in src/api/schemas.ts (re-exported, so routes import
 * one module), plus `parse`, which turns a failed parse into a `Problem` naming the offending field
 * before anything reaches a session, and the strict query-string reader.
 */
import type { z } from "zod";
import { Problem, type ProblemCode } from "./problems.js";
import { THINKING_LEVELS as KIND_THINKING_LEVELS } from "../kinds/model-request.js";
import { THINKING_LEVELS } from "../api/schemas.js";

export * from "../api/schemas.js";

// ---------------------------------------------------------------------------------------------
// Parsing

/** Parse `value` or throw a Problem naming the first offending field. */
export function parse<S extends z.ZodType>(schema: S, value: unknown, code: ProblemCode, prefix?: string): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  if (issue === undefined) throw new Problem(code, "invalid input");
  const keys = issue.code === "unrecognized_keys" ? issue.keys : [];
  const path = [...issue.path.map(String), ...(keys.length > 0 ? [keys[0] ?? ""] : [])].join(".");
  const field = prefix === undefined ? path : path === "" ? prefix : `${prefix}.${path}`;
  const what =
    issue.code === "unrecognized_keys"
      ? `unknown field ${keys.map((k) => JSON.stringify(k)).join(", ")}`
      : issue.message;
  throw new Problem(code, field === "" ? what : `${field}: ${what}`, field === "" ? undefined : field);
}

/** The query parameters as a plain object; a repeated parameter is refused. */
export function queryObject(url: URL): Record<string, string> {
  return queryParams(url.searchParams);
}

/** The query of a request URL (`href`), read without parsing the whole URL; none is `{}`. */
export function queryOf(href: string): Record<string, string> {
  const at = href.indexOf("?");
  return at < 0 ? {} : queryParams(new URLSearchParams(href.slice(at + 1)));
}

function queryParams(params: URLSearchParams): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of params) {
    if (Object.hasOwn(out, key)) throw new Problem("invalid_query", `${key}: given more than once`, key);
    out[key] = value;
  }
  return out;
}

/** The wire's thinking levels are the kinds' (a compile-time check: the two lists cannot drift apart). */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export const thinkingLevelsAgree: Same<(typeof THINKING_LEVELS)[number], (typeof KIND_THINKING_LEVELS)[number]> = true;

/**
 * The generation retry policy an operator sets by configuration (§8.2 "retry_wait"; docs/models.md "Retries"):
 * wrangler vars (or `.dev.vars`) read into the turn kit's options when a session opens. Unset vars keep
 * the turn kit's defaults (src/kinds/services.ts `defaultTurnOptions`); a bad value is a `misconfigured`
 * problem naming the var, so session creation and every open refuse it and nothing is written.
 *
 *   MODEL_RETRY_ATTEMPTS       attempts per generation in all (1 = never retry), 1..100
 *   MODEL_RETRY_BASE_MS        backoff base, ms (attempt n waits base * 2^(n-1)), 1..86,400,000
 *   MODEL_RETRY_MAX_MS         longest wait, ms (a provider hint above it fails the input), >= base
 *   MODEL_RETRY_JITTER         fraction of the backoff added at random, 0..1
 *   MODEL_RETRY_HONOUR_HINTS   `true` (default) or `false`: whether `retry-after` and other provider
 *                              hints set the wait
 *
 * Wrangler passes a `[vars]` value as a string, or as a number/boolean when the TOML value is one; both
 * are accepted. An attempt budget is captured when a generation is created, so a changed
 * MODEL_RETRY_ATTEMPTS applies to generations created after the next open.
 */
import { defaultTurnOptions, type TurnOptions } from "../../kinds/services.js";
import { Problem } from "../problems.js";

/** The retry fields of the turn options this module sets. */
export type RetryOptions = Pick<
  TurnOptions,
  "maxAttempts" | "retryBaseMs" | "retryMaxDelayMs" | "retryJitter" | "retryHonourHints"
>;

export const RETRY_VARS = [
  "MODEL_RETRY_ATTEMPTS",
  "MODEL_RETRY_BASE_MS",
  "MODEL_RETRY_MAX_MS",
  "MODEL_RETRY_JITTER",
  "MODEL_RETRY_HONOUR_HINTS",
] as const;
export type RetryVar = (typeof RETRY_VARS)[number];

const DAY_MS = 86_400_000;

/** The retry options of these bindings (every field filled in, defaults for unset vars); throws Problem. */
export function retryOptions(bindings: Readonly<Partial<Record<RetryVar, unknown>>>): Required<RetryOptions> {
  const maxAttempts = integer(bindings, "MODEL_RETRY_ATTEMPTS", 1, 100) ?? defaultTurnOptions.maxAttempts;
  const retryBaseMs = integer(bindings, "MODEL_RETRY_BASE_MS", 1, DAY_MS) ?? defaultTurnOptions.retryBaseMs;
  const retryMaxDelayMs = integer(bindings, "MODEL_RETRY_MAX_MS", 1, DAY_MS) ?? defaultTurnOptions.retryMaxDelayMs;
  const retryJitter = fraction(bindings, "MODEL_RETRY_JITTER") ?? defaultTurnOptions.retryJitter;
  const retryHonourHints = flag(bindings, "MODEL_RETRY_HONOUR_HINTS") ?? defaultTurnOptions.retryHonourHints ?? true;
  if (retryBaseMs > retryMaxDelayMs) {
    throw misconfigured(
      bindings["MODEL_RETRY_MAX_MS"] === undefined ? "MODEL_RETRY_BASE_MS" : "MODEL_RETRY_MAX_MS",
      `the backoff base (${retryBaseMs} ms, MODEL_RETRY_BASE_MS) is above the longest wait (${retryMaxDelayMs} ms, MODEL_RETRY_MAX_MS)`,
    );
  }
  return { maxAttempts, retryBaseMs, retryMaxDelayMs, retryJitter, retryHonourHints };
}

function misconfigured(name: RetryVar, detail: string): Problem {
  return new Problem("misconfigured", `${name} is invalid: ${detail}`);
}

/** The var's value, or undefined when unset or blank. */
function raw(
  bindings: Readonly<Partial<Record<RetryVar, unknown>>>,
  name: RetryVar,
): string | number | boolean | undefined {
  const value = bindings[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value === "string") return value.trim() === "" ? undefined : value.trim();
  if (typeof value === "number" || typeof value === "boolean") return value;
  throw misconfigured(name, `expected a string or number, got ${typeof value}`);
}

function integer(
  bindings: Readonly<Partial<Record<RetryVar, unknown>>>,
  name: RetryVar,
  min: number,
  max: number,
): number | undefined {
  const value = raw(bindings, name);
  if (value === undefined) return undefined;
  const n =
    typeof value === "number" ? value : typeof value === "string" && /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max)
    throw misconfigured(name, `expected a whole number from ${min} to ${max}, got ${JSON.stringify(value)}`);
  return n;
}

function fraction(bindings: Readonly<Partial<Record<RetryVar, unknown>>>, name: RetryVar): number | undefined {
  const value = raw(bindings, name);
  if (value === undefined) return undefined;
  const n =
    typeof value === "number"
      ? value
      : typeof value === "string" && /^\d+(\.\d+)?$/.test(value)
        ? Number(value)
        : Number.NaN;
  if (!Number.isFinite(n) || n < 0 || n > 1)
    throw misconfigured(name, `expected a number from 0 to 1, got ${JSON.stringify(value)}`);
  return n;
}

function flag(bindings: Readonly<Partial<Record<RetryVar, unknown>>>, name: RetryVar): boolean | undefined {
  const value = raw(bindings, name);
  if (value === undefined) return undefined;
  if (value === true || value === "true") return true;
  if (value === false || value === "false") return false;
  throw misconfigured(name, `expected true or false, got ${JSON.stringify(value)}`);
}

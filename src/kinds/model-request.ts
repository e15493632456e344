/**
 * How a generation attempt talks to its model (§8.2 "execute", "retry_wait"): the request options
 * (the conversation's thinking level mapped per provider by pi-ai's `streamSimple`, no SDK retries
 * behind the harness's back, a probe that sees every HTTP exchange of the attempt) and the retry
 * policy that turns a retryable failure into a durable wake time: the provider's hint (`retry-after`,
 * `retry-after-ms`, rate-limit reset headers, a "retry in 12s" in the error) or exponential backoff
 * with jitter, whichever is longer, within a configurable cap.
 */
import type {
  Api,
  AssistantMessage,
  FetchFunction,
  Model,
  SimpleStreamOptions,
  ThinkingLevel,
} from "@earendil-works/pi-ai";
import { clampThinkingLevel } from "@earendil-works/pi-ai";
import { withImageUrls } from "./image-urls.js";

/** The thinking levels a conversation's `pi.thinking` may hold; "off" (or unset) sends none. */
export const THINKING_LEVELS = ["off", "minimal", "low", "medium", "high", "xhigh", "max"] as const;
export type ThinkingSetting = (typeof THINKING_LEVELS)[number];

export function isThinkingSetting(value: string): value is ThinkingSetting {
  return (THINKING_LEVELS as readonly string[]).includes(value);
}

/**
 * The pi-ai reasoning level for a captured `thinking` value: clamped to what the model supports
 * (a non-reasoning model gets none), undefined for off, unset or an unknown value.
 */
export function reasoningFor(model: Model<Api>, thinking: string | null): ThinkingLevel | undefined {
  if (thinking === null || !isThinkingSetting(thinking) || thinking === "off") return undefined;
  const clamped = clampThinkingLevel(model, thinking);
  return clamped === "off" ? undefined : clamped;
}

/** What the probe saw of the attempt's HTTP exchanges: how many requests, and the last response. */
export interface ExchangeProbe {
  readonly fetch: FetchFunction;
  readonly requests: number;
  readonly last: { readonly status: number; readonly headers: Headers } | undefined;
}

/**
 * Wrap `fetch` (the provider SDK's transport) so the attempt knows the status and headers of the
 * response it got, including an error response the SDK turns into an exception (pi-ai's `onResponse`
 * only fires for a successful one).
 */
export function exchangeProbe(inner: FetchFunction = (input, init) => globalThis.fetch(input, init)): ExchangeProbe {
  const probe = {
    requests: 0,
    last: undefined as { status: number; headers: Headers } | undefined,
    fetch: (async (input, init) => {
      probe.requests += 1;
      const response = await inner(input, init);
      probe.last = { status: response.status, headers: response.headers };
      return response;
    }) as FetchFunction,
  };
  return probe;
}

/** The options of one attempt's `streamSimple` call. */
export function attemptOptions(
  model: Model<Api>,
  thinking: string | null,
  signal: AbortSignal,
  probe: ExchangeProbe,
): SimpleStreamOptions {
  const reasoning = reasoningFor(model, thinking);
  return {
    signal,
    // The harness retries (durably, with the provider's hint); an SDK retry would double the
    // attempts behind its back and sleep where an eviction loses the wait.
    maxRetries: 0,
    fetch: probe.fetch,
    // A user's image named by an https URL goes to the provider as that URL (image-urls.ts).
    onPayload: (payload) => withImageUrls(payload),
    ...(reasoning === undefined ? {} : { reasoning }),
  };
}

// ---------------------------------------------------------------------------------------------
// Retry policy

export interface RetryPolicy {
  /** Base delay of the exponential backoff, ms (attempt n waits base * 2^(n-1) before jitter). */
  readonly retryBaseMs: number;
  /** Longest wait, ms: the backoff is capped here, and a provider hint above it fails the input. */
  readonly retryMaxDelayMs: number;
  /** Jitter as a fraction of the backoff added on top (0 = none, 0.25 = up to a quarter more). */
  readonly retryJitter: number;
}

/** Backoff for the given attempt (1-based) with jitter (`random` in [0, 1)), capped. */
export function backoffMs(policy: RetryPolicy, attempt: number, random: () => number = Math.random): number {
  const exponential = policy.retryBaseMs * 2 ** Math.max(0, attempt - 1);
  const jittered = exponential * (1 + Math.max(0, policy.retryJitter) * random());
  return Math.min(policy.retryMaxDelayMs, Math.round(jittered));
}

/** The wait a provider asked for, ms, from the response headers or the error text; undefined if none. */
export function retryHintMs(
  message: AssistantMessage,
  probe: ExchangeProbe | undefined,
  now: number,
): number | undefined {
  const headers = probe?.last?.headers;
  if (headers !== undefined && probe?.last !== undefined && probe.last.status >= 400) {
    const ms = headers.get("retry-after-ms");
    if (ms !== null && Number.isFinite(Number.parseFloat(ms))) return Math.max(0, Number.parseFloat(ms));
    const after = headers.get("retry-after");
    if (after !== null) {
      const seconds = Number(after.trim());
      if (after.trim() !== "" && Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
      const date = Date.parse(after);
      if (Number.isFinite(date)) return Math.max(0, date - now);
    }
    if (probe.last.status === 429) {
      // OpenAI-style reset headers ("1s", "6m0s", "250ms"): wait for the later of the two.
      const resets = [headers.get("x-ratelimit-reset-requests"), headers.get("x-ratelimit-reset-tokens")].map((v) =>
        v === null ? undefined : durationMs(v),
      );
      const known = resets.filter((v): v is number => v !== undefined);
      if (known.length > 0) return Math.max(...known);
    }
  }
  const text = message.errorMessage ?? "";
  const field = /"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"/.exec(text);
  if (field?.[1] !== undefined) return Number.parseFloat(field[1]) * 1000;
  const prose =
    /(?:retry|try again)\s+(?:in|after)\s+(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|sec|seconds?|m|min|minutes?)\b/i.exec(
      text,
    );
  if (prose?.[1] !== undefined && prose[2] !== undefined) return Number.parseFloat(prose[1]) * unitMs(prose[2]);
  return undefined;
}

/** A retry decision: wait this long, or give up because the provider asked for more than the cap. */
export type RetryDecision =
  | { readonly type: "wait"; readonly delayMs: number; readonly hinted: boolean }
  | { readonly type: "give_up"; readonly reason: string };

export function retryDecision(
  policy: RetryPolicy,
  attempt: number,
  hintMs: number | undefined,
  random: () => number = Math.random,
): RetryDecision {
  if (hintMs !== undefined && hintMs > policy.retryMaxDelayMs) {
    return {
      type: "give_up",
      reason: `the provider asked to retry in ${Math.ceil(hintMs / 1000)} s, longer than the retry cap of ${Math.ceil(policy.retryMaxDelayMs / 1000)} s`,
    };
  }
  const backoff = backoffMs(policy, attempt, random);
  return hintMs !== undefined && hintMs >= backoff
    ? { type: "wait", delayMs: Math.ceil(hintMs), hinted: true }
    : { type: "wait", delayMs: backoff, hinted: false };
}

function durationMs(text: string): number | undefined {
  const parts = /^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+(?:\.\d+)?)ms)?$/.exec(
    text.trim(),
  );
  if (parts === null || text.trim() === "") return undefined;
  const [, h, m, s, ms] = parts;
  return (Number(h ?? 0) * 3600 + Number(m ?? 0) * 60 + Number(s ?? 0)) * 1000 + Number(ms ?? 0);
}

function unitMs(unit: string): number {
  const u = unit.toLowerCase();
  if (u.startsWith("ms") || u.startsWith("milli")) return 1;
  if (u.startsWith("m")) return 60_000;
  return 1000;
}

/**
 * The outbox sender (docs/integrations.md "Events out"): runs on the session object's alarm (and right
 * after a commit that added events), posts each due delivery to its endpoint signed the Standard
 * Webhooks way, and records the outcome in the host book (outbox/book.ts).
 *
 * - Per endpoint, due deliveries go out one at a time in commit order; endpoints in parallel (at most
 *   SEND_PARALLEL), at most ROUND_LIMIT per round.
 * - Each attempt is counted before its fetch (the output gate holds the fetch until that is durable).
 * - 2xx is done. Anything else, a redirect or no answer within SEND_TIMEOUT_MS (on the injected clock)
 *   is retried after `backoffMs` until the retry window ends, then the delivery is dead.
 * - An endpoint failing for the disable window is disabled in the tenant's directory, its pending
 *   deliveries here die, and a `delivery.disabled` event is committed for the endpoints subscribed to it.
 */
import type { Clock } from "../../core/host.js";
import type { Id } from "../../storage/records.js";
import { Problem } from "../problems.js";
import { signWebhook } from "../crypto/webhooks.js";
import type { DeliveryRow, OutboxBook } from "./book.js";
import type { SessionEndpoint } from "../directory/endpoints.js";
import type { OutboxEvent } from "./types.js";

export const SEND_TIMEOUT_MS = 10_000;
export const SEND_PARALLEL = 4;
export const ROUND_LIMIT = 100;
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/** The waits after the 1st, 2nd, ... failed attempt; then hourly. */
export const BACKOFF_MS: readonly number[] = [5_000, 30_000, 120_000, 600_000, 1_800_000, HOUR_MS];
/** Each wait gets up to this fraction added (hashed from the delivery and attempt: no randomness on replay). */
export const BACKOFF_JITTER = 0.2;

export interface OutboxTiming {
  /** A delivery still failing this long after its first attempt is dead. */
  readonly retryWindowMs: number;
  /** An endpoint failing this long is disabled. */
  readonly disableAfterMs: number;
  /** Done and dead deliveries (and their events) are pruned this long after they finished. */
  readonly retentionMs: number;
}

export const OUTBOX_VARS = ["WEBHOOK_RETRY_WINDOW_MS", "WEBHOOK_DISABLE_AFTER_MS", "OUTBOX_RETENTION_MS"] as const;

/** The timing these bindings configure (unset: 24 h, 24 h, 7 days); a bad value is `misconfigured` naming the var. */
export function outboxTiming(bindings: Readonly<Partial<Record<(typeof OUTBOX_VARS)[number], unknown>>>): OutboxTiming {
  const read = (name: (typeof OUTBOX_VARS)[number], fallback: number): number => {
    const raw = bindings[name];
    if (raw === undefined || raw === "") return fallback;
    const value =
      typeof raw === "number"
        ? raw
        : typeof raw === "string" && /^[0-9]{1,12}$/.test(raw.trim())
          ? Number(raw.trim())
          : NaN;
    if (!Number.isSafeInteger(value) || value < 1_000)
      throw new Problem("misconfigured", `${name} must be a whole number of milliseconds, at least 1000`);
    return value;
  };
  return {
    retryWindowMs: read("WEBHOOK_RETRY_WINDOW_MS", DAY_MS),
    disableAfterMs: read("WEBHOOK_DISABLE_AFTER_MS", DAY_MS),
    retentionMs: read("OUTBOX_RETENTION_MS", 7 * DAY_MS),
  };
}

/** FNV-1a of `text`, as a fraction in [0, 1). */
function hashFraction(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash / 0x1_0000_0000;
}

/** The wait after the `attempts`-th failed attempt of delivery `id`: the table's step plus up to 20 %. */
export function backoffMs(attempts: number, id: string): number {
  const base = BACKOFF_MS[Math.min(Math.max(attempts, 1), BACKOFF_MS.length) - 1] as number;
  return Math.floor(base * (1 + BACKOFF_JITTER * hashFraction(`${id}:${attempts}`)));
}

/** The request body of an event (the Standard Webhooks envelope). */
export function eventBody(event: OutboxEvent): string {
  return JSON.stringify({
    id: event.id,
    type: event.type,
    timestamp: new Date(event.timestamp).toISOString(),
    data: event.data,
  });
}

export interface SenderDeps {
  readonly book: OutboxBook;
  readonly clock: Clock;
  readonly timing: OutboxTiming;
  readonly fetch: (request: Request) => Promise<Response>;
  /** The event an element holds (undefined: pruned or never written). */
  readonly event: (element: Id) => Promise<OutboxEvent | undefined>;
  /** The endpoint's secrets opened: current first, then the previous one while it still signs. */
  readonly secrets: (endpoint: SessionEndpoint) => Promise<readonly string[]>;
}

export type SendOutcome =
  | { readonly type: "done"; readonly status: number }
  | { readonly type: "failed"; readonly status?: number; readonly error: string };

export class OutboxSender {
  readonly #deps: SenderDeps;

  constructor(deps: SenderDeps) {
    this.#deps = deps;
  }

  /** One round over the due deliveries; endpoints not in `endpoints` (deleted) or disabled ones end their rows. */
  async round(endpoints: ReadonlyMap<string, SessionEndpoint>): Promise<void> {
    const { book, clock } = this.#deps;
    const byEndpoint = new Map<string, DeliveryRow[]>();
    for (const row of book.due(clock.now(), ROUND_LIMIT)) {
      const rows = byEndpoint.get(row.endpoint) ?? [];
      rows.push(row);
      byEndpoint.set(row.endpoint, rows);
    }
    const queue = [...byEndpoint];
    const worker = async (): Promise<void> => {
      for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
        const [id, rows] = next;
        const endpoint = endpoints.get(id);
        if (endpoint === undefined || !endpoint.enabled) {
          book.abandon(id, endpoint === undefined ? "endpoint deleted" : "endpoint disabled", clock.now());
          continue;
        }
        for (const row of rows) await this.#deliver(row, endpoint);
      }
    };
    await Promise.all(Array.from({ length: Math.min(SEND_PARALLEL, queue.length) }, worker));
  }

  async #deliver(row: DeliveryRow, endpoint: SessionEndpoint): Promise<void> {
    const { book, clock, timing } = this.#deps;
    const event = await this.#deps.event(row.event);
    if (event === undefined) {
      book.failed(row.event, row.endpoint, undefined, "the event is gone", undefined, clock.now());
      return;
    }
    const started = clock.now();
    book.attempting(row.event, row.endpoint, started);
    const outcome = await this.#send(event, endpoint, started);
    const now = clock.now();
    if (outcome.type === "done") {
      book.delivered(row.event, row.endpoint, outcome.status, now);
      return;
    }
    const attempts = row.attempts + 1;
    const next = now + backoffMs(attempts, `${row.event}.${row.endpoint}`);
    const first = row.firstAttemptAt ?? started;
    book.failed(
      row.event,
      row.endpoint,
      outcome.status,
      outcome.error,
      next > first + timing.retryWindowMs ? undefined : next,
      now,
    );
  }

  async #send(event: OutboxEvent, endpoint: SessionEndpoint, now: number): Promise<SendOutcome> {
    let secrets: readonly string[];
    try {
      secrets = await this.#deps.secrets(endpoint);
    } catch {
      return { type: "failed", error: "misconfigured: the endpoint's secret does not open" };
    }
    const body = eventBody(event);
    const timestamp = Math.floor(now / 1000);
    const signatures = await Promise.all(secrets.map((secret) => signWebhook(secret, event.id, timestamp, body)));
    // One controller ends both the timer and, after a timeout, the fetch.
    const timeout = new AbortController();
    const request = new Request(endpoint.url, {
      method: "POST",
      signal: timeout.signal,
      body,
      redirect: "manual",
      headers: {
        "content-type": "application/json",
        "user-agent": "pico-edge-webhooks/1",
        "webhook-id": event.id,
        "webhook-timestamp": String(timestamp),
        "webhook-signature": signatures.join(" "),
      },
    });
    const timer = this.#deps.clock.sleep(now + SEND_TIMEOUT_MS, timeout.signal).then(
      (): SendOutcome => ({ type: "failed", error: `no answer within ${SEND_TIMEOUT_MS / 1000} s` }),
      (): SendOutcome => ({ type: "failed", error: "cancelled" }),
    );
    const sent = (async (): Promise<SendOutcome> => {
      try {
        const response = await this.#deps.fetch(request);
        if (response.status >= 200 && response.status < 300) {
          await response.body?.cancel();
          return { type: "done", status: response.status };
        }
        const text = (await response.text().catch(() => "")).slice(0, 1024);
        return { type: "failed", status: response.status, error: text === "" ? `HTTP ${response.status}` : text };
      } catch (error) {
        return { type: "failed", error: error instanceof Error ? error.message.slice(0, 1024) : "the request failed" };
      }
    })();
    try {
      return await Promise.race([sent, timer]);
    } finally {
      timeout.abort();
    }
  }
}

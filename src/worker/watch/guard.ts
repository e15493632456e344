/**
 * Watch expiry and revocation inside the session Durable Object (docs/users.md "Revocation"): a watch
 * opened with a user's token (a user token, or a watch token minted with one) remembers its `sub`, `iat`
 * and `exp` (a WebSocket in its attachment, so it survives hibernation; an SSE stream in memory, which
 * keeps the object awake). At the token's expiry the watch closes; a revocation sent by the tenant's
 * directory closes the user's watches issued before it at once, and is kept so a watch admitted by a
 * stale cache cannot open afterwards. Expiry is driven by the object's alarm (session/alarm-plan.ts `watches`),
 * so a hibernated socket is closed without polling: the earliest expiry among open watches is the wake.
 *
 * WebSockets close with code 4401 and a reason; SSE streams end (EventSource reconnects with its old
 * token and gets 401).
 */
import type { Clock } from "../../core/host.js";
import { maxTokenLifetime } from "../identity/auth.js";
import type { Env } from "../env.js";
import { Problem } from "../problems.js";
import { readAttachment, watcherOf, type Watcher } from "./transport.js";

export type { Watcher };

/** The internal header that carries the watcher from the Worker to the session object. */
export const WATCHER_HEADER = "x-pico-watcher";

/** A WebSocket's close code when its token expired or its user's tokens were revoked. */
export const WATCH_CLOSE_CODE = 4401;

const REVOKED_KEY = "edge.watch.revoked";

/** The watcher a request from the Worker names (none: the watch has no user and does not expire). */
export function watcherFromHeaders(headers: Headers): Watcher | undefined {
  const raw = headers.get(WATCHER_HEADER);
  if (raw === null) return undefined;
  try {
    return watcherOf(JSON.parse(raw));
  } catch {
    return undefined;
  }
}

interface Stream {
  readonly watcher: Watcher;
  readonly end: () => void;
}

export interface WatchGuardHost {
  readonly storage: DurableObjectStorage;
  getWebSockets(): WebSocket[];
  /** Now, epoch ms (the object's clock). */
  now(): number;
  /** The earliest expiry among open watches (epoch ms; undefined: none): the alarm's `watches` reason. */
  due(at: number | undefined): void;
  /** A socket this guard closed (the object unsubscribes it from its feed). */
  closed(ws: WebSocket): void;
  /** How long a token may live (seconds): revocations older than that are forgotten. */
  readonly horizonSeconds: number;
}

export class WatchGuard {
  readonly #host: WatchGuardHost;
  readonly #streams = new Set<Stream>();

  constructor(host: WatchGuardHost) {
    this.#host = host;
  }

  /** Why a watch may not open (its token expired, or was revoked here), or undefined. */
  refusal(watcher: Watcher | undefined): Problem | undefined {
    if (watcher === undefined) return undefined;
    if (watcher.exp * 1000 <= this.#host.now()) return new Problem("unauthorized", "the token expired", "token.exp");
    if (this.#revoked(watcher))
      return new Problem(
        "unauthorized",
        `the tokens of user ${watcher.sub} were revoked; get a new token`,
        "token.iat",
      );
    return undefined;
  }

  /** An SSE stream of `watcher` that `end` stops; returns the untrack function for its end. */
  stream(watcher: Watcher, end: () => void): () => void {
    const entry: Stream = { watcher, end };
    this.#streams.add(entry);
    this.schedule();
    return () => {
      this.#streams.delete(entry);
      this.schedule();
    };
  }

  /** Close the watches of `sub` issued before `before` (Unix seconds), and refuse such watches from now on. */
  revoke(sub: string, before: number): { readonly closed: number } {
    const kv = this.#host.storage.kv;
    const nowSeconds = Math.floor(this.#host.now() / 1000);
    const kept: Record<string, number> = {};
    for (const [who, at] of Object.entries(this.#revocations()))
      if (at + this.#host.horizonSeconds > nowSeconds) kept[who] = at;
    kept[sub] = Math.max(kept[sub] ?? 0, before);
    kv.put(REVOKED_KEY, kept);
    return { closed: this.sweep() };
  }

  /** Close every watch whose token expired or was revoked; re-plan the wake. Answers how many closed. */
  sweep(): number {
    let closed = 0;
    for (const ws of this.#host.getWebSockets()) {
      if (ws.readyState !== WebSocket.OPEN) continue;
      const watcher = readAttachment(ws)?.watcher;
      const reason = watcher === undefined ? undefined : this.#reason(watcher);
      if (reason === undefined) continue;
      try {
        ws.close(WATCH_CLOSE_CODE, reason);
      } catch {
        // already closed
      }
      this.#host.closed(ws);
      closed += 1;
    }
    for (const stream of [...this.#streams]) {
      if (this.#reason(stream.watcher) === undefined) continue;
      this.#streams.delete(stream);
      stream.end();
      closed += 1;
    }
    this.schedule();
    return closed;
  }

  /** Tell the alarm plan the earliest expiry among open watches. */
  schedule(): void {
    let earliest: number | undefined;
    const consider = (watcher: Watcher | undefined): void => {
      if (watcher !== undefined && (earliest === undefined || watcher.exp < earliest)) earliest = watcher.exp;
    };
    for (const ws of this.#host.getWebSockets())
      if (ws.readyState === WebSocket.OPEN) consider(readAttachment(ws)?.watcher);
    for (const stream of this.#streams) consider(stream.watcher);
    this.#host.due(earliest === undefined ? undefined : earliest * 1000);
  }

  #reason(watcher: Watcher): string | undefined {
    if (watcher.exp * 1000 <= this.#host.now()) return "the watch token expired";
    if (this.#revoked(watcher)) return "the user's tokens were revoked";
    return undefined;
  }

  #revoked(watcher: Watcher): boolean {
    const at = this.#revocations()[watcher.sub];
    return at !== undefined && (watcher.iat === undefined || watcher.iat < at);
  }

  #revocations(): Readonly<Record<string, number>> {
    return this.#host.storage.kv.get<Record<string, number>>(REVOKED_KEY) ?? {};
  }
}

/** The guard of a session object: its storage and sockets, its clock, its alarm's `watches` reason. */
export function objectWatchGuard(
  ctx: DurableObjectState,
  env: Env,
  clock: Clock,
  due: (at: number | undefined) => void,
  closed: (ws: WebSocket) => void,
): WatchGuard {
  const guard = new WatchGuard({
    storage: ctx.storage,
    getWebSockets: () => ctx.getWebSockets(),
    now: () => clock.now(),
    due,
    closed,
    horizonSeconds: maxTokenLifetime(env),
  });
  // After hibernation the plan does not know the sockets' expiries yet: learned before it first writes.
  guard.schedule();
  return guard;
}

/**
 * The typed client's live watches (docs/api.md "Watch"): one SSE connection (`openFrames`), and `Watch`,
 * which folds the server's messages with the core's reducer and resumes with Last-Event-ID after a
 * disconnect (or, with `watchToken`, connects as EventSource does: a fresh watch token and
 * `?lastEventId=` per connection, no bearer token on the stream). Sessions and conversations share it.
 */
import type { WatchMessage } from "../core/watch-types.js";
import type { ProblemBody } from "../api/problems.js";
import type { WatchTokenResponse } from "../api/responses.js";
import { readSse, type SseFrame } from "./sse.js";
import { PicoApiError, type ClientTransport } from "./transport.js";

/**
 * Open one SSE connection. With the bearer header (the default) the resume position is Last-Event-ID;
 * with `watchToken`, the way a browser's EventSource connects, the URL carries `?access_token=` (a watch
 * token) and `?lastEventId=`, and no Authorization header is sent.
 */
export async function* openFrames(
  client: ClientTransport,
  path: string,
  options: { lastEventId?: string; signal?: AbortSignal; watchToken?: string },
): AsyncGenerator<SseFrame> {
  const headers: Record<string, string> = { accept: "text/event-stream" };
  let url = path;
  if (options.watchToken === undefined) {
    if (options.lastEventId !== undefined) headers["last-event-id"] = options.lastEventId;
  } else {
    const params = new URLSearchParams({ access_token: options.watchToken });
    if (options.lastEventId !== undefined) params.set("lastEventId", options.lastEventId);
    url = `${path}?${params.toString()}`;
  }
  const response = await client.send("GET", url, {
    headers,
    bearer: options.watchToken === undefined,
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  });
  if (!response.ok || response.body === null) {
    const text = await response.text();
    throw new PicoApiError(
      response.status,
      (text === "" ? { code: "internal", detail: "no body" } : JSON.parse(text)) as ProblemBody,
    );
  }
  yield* readSse(response.body);
}

export interface WatchOptions<View, Event> {
  /** Resume from this event id (a fresh view is sent when the server cannot resume). */
  readonly lastEventId?: string;
  /** After each view or message, with the folded view. */
  readonly onChange?: (
    view: View,
    change: { readonly type: "view" } | { readonly type: "commit"; readonly message: WatchMessage<Event> },
  ) => void;
  /** Reconnect (with Last-Event-ID) when the stream drops; default true. */
  readonly reconnect?: boolean;
  /**
   * Connect as a browser's EventSource does: mint a watch token (`POST .../watch-token`, this lifetime in
   * seconds, or the server's default when `true`) for each connection and put it and the resume position
   * in the URL (`?access_token=&lastEventId=`) instead of sending the bearer token. A token that expired
   * is never reused: every reconnect mints a fresh one.
   */
  readonly watchToken?: boolean | { readonly ttlSeconds: number };
  readonly signal?: AbortSignal;
}

/** A live watch: `view` is current after every message; reconnects resume from `lastEventId`. */
export class Watch<View, Event> {
  view: View | undefined;
  lastEventId: string | undefined;
  /** How many `view` frames arrived (1 = never had to resnapshot). */
  views = 0;
  /** How many connections were opened (1 + reconnects). */
  connections = 0;
  /** Resolves when the watch stops (closed by the server, aborted, or a non-retryable error). */
  readonly done: Promise<void>;
  readonly #controller = new AbortController();

  constructor(
    client: ClientTransport,
    path: string,
    fold: (view: View, message: WatchMessage<Event>) => View,
    options: WatchOptions<View, Event>,
  ) {
    this.lastEventId = options.lastEventId;
    options.signal?.addEventListener("abort", () => this.#controller.abort(), { once: true });
    this.done = this.#run(client, path, fold, options);
  }

  close(): void {
    this.#controller.abort();
  }

  async #run(
    client: ClientTransport,
    path: string,
    fold: (view: View, message: WatchMessage<Event>) => View,
    options: WatchOptions<View, Event>,
  ): Promise<void> {
    const signal = this.#controller.signal;
    for (let attempt = 0; !signal.aborted; attempt++) {
      let closed = false;
      try {
        const watchToken =
          options.watchToken === undefined || options.watchToken === false
            ? undefined
            : await mintWatchToken(client, path, options.watchToken);
        this.connections += 1;
        const frames = openFrames(client, path, {
          signal,
          ...(this.lastEventId === undefined ? {} : { lastEventId: this.lastEventId }),
          ...(watchToken === undefined ? {} : { watchToken }),
        });
        for await (const frame of frames) {
          attempt = 0;
          if (frame.event === "view") {
            this.view = JSON.parse(frame.data) as View;
            this.views += 1;
            options.onChange?.(this.view, { type: "view" });
          } else if (frame.event === "commit" && this.view !== undefined) {
            const message = JSON.parse(frame.data) as WatchMessage<Event>;
            this.view = fold(this.view, message);
            options.onChange?.(this.view, { type: "commit", message });
            if (message.events.some((event) => (event as { type?: unknown }).type === "closed")) closed = true;
          }
          if (frame.id !== undefined) this.lastEventId = frame.id;
        }
      } catch (error) {
        if (signal.aborted) return;
        if (error instanceof PicoApiError && error.status < 500) throw error;
      }
      if (closed || options.reconnect === false) return;
      await new Promise((resolve) => setTimeout(resolve, Math.min(30_000, 250 * 2 ** Math.min(attempt, 7))));
    }
  }
}

/** A fresh watch token for the watch at `path` (`.../watch` -> `POST .../watch-token`). */
async function mintWatchToken(
  client: ClientTransport,
  path: string,
  option: true | { readonly ttlSeconds: number },
): Promise<string> {
  const body = option === true ? {} : { ttlSeconds: option.ttlSeconds };
  return (await client.request<WatchTokenResponse>("POST", `${path}-token`, { body })).body.token;
}

/**
 * Watch over HTTP (§9.4; docs/api.md "Watch"), end to end through the Worker's fetch: the SSE stream starts with
 * a view and then carries one event per commit with `id:` = the commit's last seq; Last-Event-ID inside
 * the server's buffer resumes with exactly the later commits and no view; outside it, or after the
 * object restarted, a fresh view. WebSocket watchers keep receiving after the object hibernates. A tool
 * result entry's data is served whole (§9.3) on every path while its stored row stays compact.
 */
import { abortAllDurableObjects, evictDurableObject, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { PicoClient } from "../../src/client/client.js";
import { readSse, type SseFrame } from "../../src/client/sse.js";
import type {
  ConversationEvent,
  ConversationView,
  SessionEvent,
  SessionView,
  WatchMessage,
} from "../../src/core/watch.js";
import { applyMessage, applySessionMessage } from "../../src/core/watch.js";
import { decodeState } from "../../src/storage/sqlite-codec.js";
import { openSseStreams, setWatchSeams } from "../../src/worker/watch/transport.js";
import { BASE, client, exists, token, uniqueSession, watchToken, workerFetch } from "./http-fixtures.js";
import { untruncatedToolData } from "../kinds/tool-data-fixtures.js";

afterEach(async () => {
  setWatchSeams({});
  await abortAllDurableObjects();
});

/** Pull frames from an SSE connection, with a bound on how long to wait for each. */
class Frames {
  readonly #iterator: AsyncGenerator<SseFrame>;
  readonly #controller: AbortController;
  readonly seen: SseFrame[] = [];

  constructor(iterator: AsyncGenerator<SseFrame>, controller: AbortController) {
    this.#iterator = iterator;
    this.#controller = controller;
  }

  async next(ms = 5000): Promise<SseFrame> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(new Error(`no frame within ${ms} ms (seen ${this.seen.map((f) => `${f.event}:${f.id}`).join(",")})`)),
        ms,
      );
    });
    try {
      const result = await Promise.race([this.#iterator.next(), timeout]);
      if (result.done === true) throw new Error("stream ended");
      this.seen.push(result.value);
      return result.value;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Read until a commit frame satisfies `done`; returns the commit frames read. */
  async until(done: (message: WatchMessage<ConversationEvent>) => boolean): Promise<SseFrame[]> {
    const out: SseFrame[] = [];
    for (;;) {
      const frame = await this.next();
      out.push(frame);
      if (frame.event === "commit" && done(JSON.parse(frame.data) as WatchMessage<ConversationEvent>)) return out;
    }
  }

  close(): void {
    this.#controller.abort();
    void this.#iterator.return(undefined).catch(() => undefined);
  }
}

async function open(tenant: string, session: string, lastEventId?: string): Promise<Frames> {
  const api = await client(tenant);
  const controller = new AbortController();
  const iterator = api
    .session(session)
    .conversation("root")
    .frames({ signal: controller.signal, ...(lastEventId === undefined ? {} : { lastEventId }) });
  return new Frames(iterator, controller);
}

/** A fresh session of the "watchers" tenant, created with the echo tool selected; `root` is its root conversation. */
async function createdSession(prefix: string) {
  const tenant = "watchers";
  const name = uniqueSession(prefix);
  const api = await client(tenant);
  await api.session(name).create({ selectedTools: ["echo"] });
  return { tenant, name, api, root: api.session(name).conversation("root") };
}

/** A fresh stub of the session's Durable Object. */
function sessionStub(tenant: string, name: string) {
  const namespace = env.SESSIONS;
  return namespace.get(namespace.idFromName(`${tenant}:${name}`));
}

/** Read `reference` up to the commit that carries the conversation's newest entry; returns the commit frames read. */
async function untilNewest(
  reference: Frames,
  root: Awaited<ReturnType<typeof createdSession>>["root"],
): Promise<SseFrame[]> {
  const newest = (await root.entries({ before: Number.MAX_SAFE_INTEGER, limit: 1 })).items[0]?.id;
  return reference.until((m) => m.events.some((e) => e.type === "entry" && e.entry.id === newest));
}

const answered =
  (inputText: string) =>
  (message: WatchMessage<ConversationEvent>): boolean =>
    message.events.some(
      (e) => e.type === "entry" && e.entry.kind === "assistant" && JSON.stringify(e.entry).includes(inputText),
    );

function message(frame: SseFrame): WatchMessage<ConversationEvent> {
  return JSON.parse(frame.data) as WatchMessage<ConversationEvent>;
}

describe("SSE watch", () => {
  it("sends a view first, then one event per commit whose id is the commit's last seq", async () => {
    const { tenant, name, api } = await createdSession("sse");
    const frames = await open(tenant, name);
    try {
      const first = await frames.next();
      expect(first.event).toBe("view");
      let view = JSON.parse(first.data) as ConversationView;
      expect(first.id).toBe(String(view.readAt));
      await api.session(name).conversation("root").accept("watch me");
      const commits = await frames.until(answered("watch me"));
      let previous = Number(first.id);
      for (const frame of commits) {
        expect(frame.event).toBe("commit");
        const m = message(frame);
        if (frame.id?.includes(".") === true) {
          // Preview output published between commits: the newest commit's seq, then `.n`.
          expect(frame.id.startsWith(`${m.seq}.`)).toBe(true);
          expect(m.events.every((e) => e.type === "task_output")).toBe(true);
          expect(m.seq).toBe(previous);
        } else {
          expect(frame.id).toBe(String(m.seq));
          expect(m.seq).toBeGreaterThan(previous);
        }
        previous = m.seq;
        view = applyMessage(view, m);
      }
      // The folded view agrees with the transcript.
      const entries = await api.session(name).conversation("root").entries({ limit: 100 });
      expect(view.entries.map((e) => e.id)).toEqual(entries.items.map((e) => e.id));
      expect(view.readAt).toBe(previous);
    } finally {
      frames.close();
    }
  });

  it("Last-Event-ID inside the buffer resumes with every later commit, in order, none missing or repeated, and no view", async () => {
    const { tenant, name, root } = await createdSession("resume");
    // B stays connected the whole time: the reference stream.
    const reference = await open(tenant, name);
    const dropped = await open(tenant, name);
    try {
      expect((await reference.next()).event).toBe("view");
      expect((await dropped.next()).event).toBe("view");
      await root.accept("one");
      await reference.until(answered("one"));
      const before = await dropped.until(answered("one"));
      const lastSeen = before[before.length - 1]?.id as string;
      dropped.close();

      // Commits while disconnected: two more turns, one with a tool call.
      await root.accept("two", { wait: 10 });
      await root.accept('/call echo {"x":1}', { wait: 10 });
      // The reference reads up to the commit of the newest entry (the answer after the tool result).
      const missed = await untilNewest(reference, root);

      const resumed = await open(tenant, name, lastSeen);
      try {
        const got: SseFrame[] = [];
        while (got.length < missed.length) got.push(await resumed.next());
        expect(got.every((f) => f.event === "commit")).toBe(true);
        expect(got.map((f) => f.id)).toEqual(missed.map((f) => f.id));
        expect(got.map((f) => f.data)).toEqual(missed.map((f) => f.data));
        // Every entry committed after the resume point arrives exactly once.
        const entries = await root.entries({ after: Number(lastSeen), limit: 100 });
        const delivered = got.flatMap((f) =>
          message(f).events.flatMap((e) => (e.type === "entry" ? [e.entry.id] : [])),
        );
        expect(delivered).toEqual(entries.items.map((e) => e.id));
      } finally {
        resumed.close();
      }
    } finally {
      reference.close();
      dropped.close();
    }
  });

  it("Last-Event-ID outside the buffer gets a fresh view", async () => {
    setWatchSeams({ bufferSize: 2 });
    const { tenant, name, root } = await createdSession("outside");
    const keep = await open(tenant, name);
    const dropped = await open(tenant, name);
    try {
      await keep.next();
      await dropped.next();
      await root.accept("one");
      const before = await dropped.until(answered("one"));
      await keep.until(answered("one"));
      const lastSeen = before[before.length - 1]?.id as string;
      dropped.close();
      await root.accept("two", { wait: 10 });
      await root.accept("three", { wait: 10 });
      await keep.until(answered("three"));
      const resumed = await open(tenant, name, lastSeen);
      try {
        const first = await resumed.next();
        expect(first.event).toBe("view");
        const view = JSON.parse(first.data) as ConversationView;
        expect(JSON.stringify(view.entries)).toContain("three");
        expect(Number(first.id)).toBeGreaterThan(Number(lastSeen));
      } finally {
        resumed.close();
      }
    } finally {
      keep.close();
      dropped.close();
    }
  });

  it("after the object restarted, a Last-Event-ID it sent gets a fresh view", async () => {
    const { tenant, name, root } = await createdSession("restart");
    const frames = await open(tenant, name);
    const seen = await (async () => {
      try {
        await frames.next();
        await root.accept("before restart");
        return await frames.until(answered("before restart"));
      } finally {
        frames.close();
      }
    })();
    const lastSeen = seen[seen.length - 1]?.id as string;
    await abortAllDurableObjects();
    const resumed = await open(tenant, name, lastSeen);
    try {
      const first = await resumed.next();
      expect(first.event).toBe("view");
      expect(JSON.stringify(JSON.parse(first.data))).toContain("before restart");
    } finally {
      resumed.close();
    }
  });

  for (const kill of ["killed", "evicted"] as const) {
    it(`a watcher that reconnects after the object was ${kill} gets a fresh view or gap-free commits, never a gap`, async () => {
      const { tenant, name, root } = await createdSession(`gapless-${kill}`);
      const frames = await open(tenant, name);
      let view: ConversationView;
      let lastSeen: string;
      try {
        const first = await frames.next();
        view = JSON.parse(first.data) as ConversationView;
        await root.accept("before the restart");
        let previous = first.id as string;
        for (const frame of await frames.until(answered("before the restart"))) {
          view = applyMessage(view, message(frame));
          previous = frame.id as string;
        }
        lastSeen = previous;
      } finally {
        frames.close();
      }
      if (kill === "killed") await abortAllDurableObjects();
      else {
        await evictDurableObject(sessionStub(tenant, name));
      }
      // Commits the watcher never saw, made by the restarted object.
      await root.accept("after the restart", { wait: 10 });
      const resumed = await open(tenant, name, lastSeen);
      try {
        const entries = await root.entries({ limit: 100 });
        const newest = entries.items[entries.items.length - 1]?.id;
        let folded = view;
        let readAt = Number(lastSeen);
        while (!folded.entries.some((e) => e.id === newest)) {
          const frame = await resumed.next();
          if (frame.event === "view") folded = JSON.parse(frame.data) as ConversationView;
          else {
            // A commit after a resume must continue exactly where the watcher stopped.
            const m = message(frame);
            expect(m.seq).toBeGreaterThan(readAt);
            folded = applyMessage(folded, m);
          }
          readAt = Number(frame.id);
        }
        expect(folded.entries.map((e) => e.id)).toEqual(entries.items.map((e) => e.id));
        expect(JSON.stringify(folded.entries)).toContain("after the restart");
      } finally {
        resumed.close();
      }
    });
  }

  it("a client Watch folds the stream and reconnects with its last event id", async () => {
    const { root } = await createdSession("fold");
    const watch = root.watch();
    try {
      await root.accept("folded", { wait: 10 });
      for (let i = 0; i < 200 && !JSON.stringify(watch.view?.entries ?? []).includes('"folded"'); i++)
        await new Promise((r) => setTimeout(r, 10));
      const entries = await root.entries({ limit: 100 });
      for (let i = 0; i < 200 && (watch.view?.entries.length ?? 0) < entries.items.length; i++)
        await new Promise((r) => setTimeout(r, 10));
      expect(watch.view?.entries.map((e) => e.id)).toEqual(entries.items.map((e) => e.id));
      expect(watch.views).toBe(1);
    } finally {
      watch.close();
      await watch.done;
    }
  });
});

describe("SSE stream lifecycle and the session watch", () => {
  it("sends keep-alive comments while idle", async () => {
    setWatchSeams({ keepAliveMs: 20 });
    const { name, api } = await createdSession("keepalive");
    const controller = new AbortController();
    const response = await api.send("GET", `/v1/sessions/${name}/conversations/root/watch`, {
      headers: { accept: "text/event-stream" },
      signal: controller.signal,
    });
    expect(response.headers.get("content-type")).toContain("text/event-stream");
    const reader = (response.body as ReadableStream<Uint8Array>).pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    try {
      while (!text.includes(": keep-alive")) {
        const { value, done } = await reader.read();
        if (done) break;
        text += value;
      }
      expect(text.startsWith("event: view")).toBe(true);
      expect(text).toContain(": keep-alive\n\n");
    } finally {
      controller.abort();
      await reader.cancel().catch(() => undefined);
    }
  });

  it("a client that disconnects ends its server-side stream", async () => {
    const { tenant, name } = await createdSession("disconnect");
    const before = openSseStreams();
    const frames = await open(tenant, name);
    expect((await frames.next()).event).toBe("view");
    expect(openSseStreams()).toBe(before + 1);
    frames.close();
    for (let i = 0; i < 300 && openSseStreams() > before; i++) await new Promise((r) => setTimeout(r, 10));
    expect(openSseStreams()).toBe(before);
  });

  it("ends the stream cleanly with a closed event when the session shuts down", async () => {
    const { tenant, name } = await createdSession("closing");
    const operator = await client(tenant, "operator");
    const frames = await open(tenant, name);
    try {
      expect((await frames.next()).event).toBe("view");
      await operator.session(name).shutdown();
      const last = await frames.next();
      expect(last.event).toBe("commit");
      expect(message(last).events.map((e) => e.type)).toEqual(["closed"]);
      await expect(frames.next()).rejects.toThrow("stream ended");
    } finally {
      frames.close();
    }
  });

  it("the session watch sends the session view, then a conversation event for a fork", async () => {
    const { name, api } = await createdSession("session-watch");
    const answer = await api.session(name).conversation("root").accept("hi", { wait: 10 });
    const controller = new AbortController();
    const frames = new Frames(
      (async function* () {
        const response = await api.send("GET", `/v1/sessions/${name}/watch`, {
          headers: { accept: "text/event-stream" },
          signal: controller.signal,
        });
        const { readSse } = await import("../../src/client/sse.js");
        yield* readSse(response.body as ReadableStream<Uint8Array>);
      })(),
      controller,
    );
    try {
      const first = await frames.next();
      expect(first.event).toBe("view");
      expect((JSON.parse(first.data) as { conversations: { id: number }[] }).conversations.map((c) => c.id)).toEqual([
        answer.conversationId,
      ]);
      const fork = await api
        .session(name)
        .conversation("root")
        .fork({ at: answer.answer?.id ?? 0 });
      for (;;) {
        const frame = await frames.next();
        const events = (
          JSON.parse(frame.data) as { events: { type: string; change?: string; conversation?: { id: number } }[] }
        ).events;
        const created = events.find((e) => e.type === "conversation" && e.change === "created");
        if (created !== undefined) {
          expect(created.conversation?.id).toBe(fork.conversationId);
          break;
        }
      }
    } finally {
      frames.close();
    }
  });
});

describe("WebSocket watch", () => {
  it("a WebSocket watcher still receives events after the object hibernates", async () => {
    const { tenant, name, api } = await createdSession("ws");
    const { response, ws, received } = await openWs<{
      type: string;
      id: string;
      view?: ConversationView;
      events?: ConversationEvent[];
    }>(tenant, name);
    expect(response.status).toBe(101);
    try {
      await waitFor(() => received.length >= 1);
      expect(received[0]?.type).toBe("view");

      await evictDurableObject(sessionStub(tenant, name), { webSockets: "hibernate" });

      await api.session(name).conversation("root").accept("after hibernation", { wait: 10 });
      await waitFor(() =>
        received.some(
          (m) =>
            m.type === "commit" &&
            JSON.stringify(m.events).includes("after hibernation") &&
            m.events?.some((e) => e.type === "entry" && e.entry.kind === "assistant") === true,
        ),
      );
      // Re-registered on wake: a fresh view, then the commits.
      const views = received.filter((m) => m.type === "view");
      expect(views.length).toBe(2);
    } finally {
      ws.close();
    }
  });
});

/** A fresh session of `tenant` watched over a WebSocket on root, once its first frame (the view) arrived. */
async function watchedSession(
  tenant: string,
  prefix: string,
): Promise<{
  name: string;
  api: Awaited<ReturnType<typeof client>>;
  ws: WebSocket;
  closed: () => { code: number; reason: string } | undefined;
}> {
  const name = uniqueSession(prefix);
  const api = await client(tenant);
  await api.session(name).create({});
  const { ws, received } = await openWs<{ type: string }>(tenant, name);
  let closed: { code: number; reason: string } | undefined;
  ws.addEventListener("close", (event) => {
    closed = { code: event.code, reason: event.reason };
  });
  await waitFor(() => received.length >= 1);
  return { name, api, ws, closed: () => closed };
}

describe("WebSocket close", () => {
  it("after a session delete, the watcher's WebSocket close completes and the object holds no socket", async () => {
    const tenant = "watchers";
    const { name, ws, closed } = await watchedSession(tenant, "ws-delete");
    await (await client(tenant, "operator")).session(name).delete();
    await waitFor(() => closed() !== undefined);
    expect(closed()?.code).toBe(1000);
    expect(ws.readyState).toBe(WebSocket.CLOSED);
    expect(await socketsHeld(sessionStub(tenant, name))).toBe(0);
  });
});

describe("WebSocket close: the close frames", () => {
  it("after a session delete, the watcher gets its close frame and the object is not reset (a reset logs an uncaught exception)", async () => {
    const tenant = "watchers";
    const { name, api, closed } = await watchedSession(tenant, "ws-delete-drop");
    const stub = sessionStub(tenant, name);
    const { runInDurableObject } = await import("cloudflare:test");
    const before = new WeakSet<object>();
    await runInDurableObject(stub, (instance) => {
      before.add(instance);
    });
    await (await client(tenant, "operator")).session(name).delete();
    await waitFor(() => closed() !== undefined);
    expect(closed()).toEqual({ code: 1000, reason: "the session was deleted" });
    // The same instance serves the next call: nothing aborted it (ctx.abort is reported by the runtime as
    // an uncaught exception in the operator's logs, on a normal operation).
    expect(await runInDurableObject(sessionStub(tenant, name), (instance) => before.has(instance))).toBe(true);
    // The session stays deleted, and it can be created again.
    expect(await exists(tenant, name)).toBe(false);
    await api.session(name).create({});
    expect(await exists(tenant, name)).toBe(true);
  });

  it("a watcher that closes its WebSocket gets the server's close frame back at once", async () => {
    const tenant = "watchers";
    const { name, ws, closed } = await watchedSession(tenant, "ws-client-close");
    ws.close(4000, "the user left");
    // The close event comes with the server's close frame; without it the client would wait for the
    // server to go idle before its connection ends.
    await waitFor(() => closed() !== undefined, 3000);
    expect(closed()).toEqual({ code: 4000, reason: "the user left" });
    expect(await socketsHeld(sessionStub(tenant, name))).toBe(0);
  });
});

describe("WebSocket resume", () => {
  it("?lastEventId inside the buffer resumes a WebSocket watcher without a view", async () => {
    const { tenant, name, root } = await createdSession("ws-resume");
    const reference = await open(tenant, name);
    try {
      const view = await reference.next();
      await root.accept("one", { wait: 10 });
      const missed = await untilNewest(reference, root);
      const { ws, received } = await openWs<{ type: string; id: string }>(tenant, name, view.id);
      try {
        await waitFor(() => received.length >= missed.length);
        expect(received.map((m) => m.type)).toEqual(missed.map(() => "commit"));
        expect(received.map((m) => m.id)).toEqual(missed.map((f) => f.id));
      } finally {
        ws.close();
      }
    } finally {
      reference.close();
    }
  });
});

async function fetchWs(url: string): Promise<Response> {
  const { SELF } = await import("cloudflare:test");
  return SELF.fetch(url, { headers: { upgrade: "websocket" } });
}

/**
 * A WebSocket watch of root with a fresh watch token (resuming after `lastEventId` when given), accepted; `received`
 * collects its parsed messages.
 */
async function openWs<M>(
  tenant: string,
  name: string,
  lastEventId?: string,
): Promise<{ response: Response; ws: WebSocket; received: M[] }> {
  const jwt = await watchToken(tenant, name, "root");
  const response = await fetchWs(
    `${BASE}/v1/sessions/${name}/conversations/root/watch?access_token=${jwt}${lastEventId === undefined ? "" : `&lastEventId=${lastEventId}`}`,
  );
  const ws = response.webSocket;
  if (ws === null) throw new Error("no websocket");
  const received: M[] = [];
  ws.accept();
  ws.addEventListener("message", (event) => {
    received.push(JSON.parse(event.data as string) as M);
  });
  return { response, ws, received };
}

/** How many WebSockets the session object holds. */
async function socketsHeld(stub: ReturnType<typeof sessionStub>): Promise<number> {
  const { runInDurableObject } = await import("cloudflare:test");
  return runInDurableObject(stub, (_instance, state) => state.getWebSockets().length);
}

async function waitFor(check: () => boolean, ms = 5000): Promise<void> {
  for (let waited = 0; !check(); waited += 10) {
    if (waited > ms) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("watch-token reconnect", () => {
  it("?lastEventId in the URL resumes an SSE watcher (an EventSource reconnecting with a fresh watch token) without a view", async () => {
    const { tenant, name, root } = await createdSession("sse-query-resume");
    const reference = await open(tenant, name);
    try {
      const view = await reference.next();
      await root.accept("one", { wait: 10 });
      const missed = await untilNewest(reference, root);
      const jwt = await watchToken(tenant, name, "root");
      const { SELF } = await import("cloudflare:test");
      const response = await SELF.fetch(
        `${BASE}/v1/sessions/${name}/conversations/root/watch?access_token=${jwt}&lastEventId=${view.id}`,
      );
      expect(response.status).toBe(200);
      const body = response.body;
      if (body === null) throw new Error("no body");
      const resumed = new Frames(readSse(body), new AbortController());
      try {
        const frames: SseFrame[] = [];
        while (frames.length < missed.length) frames.push(await resumed.next());
        expect(frames.map((f) => f.event)).toEqual(missed.map(() => "commit"));
        expect(frames.map((f) => f.id)).toEqual(missed.map((f) => f.id));
      } finally {
        resumed.close();
      }
    } finally {
      reference.close();
    }
  });

  it("the typed client's watch-token watch reconnects after the stream drops with a fresh token and ?lastEventId=, without a gap or duplicate", async () => {
    const { tenant, name, root } = await createdSession("client-wt");
    await root.accept("one", { wait: 10 });
    // A fetch that records what the client sends and ends the first watch stream after its first commit,
    // as a proxy or the platform dropping the connection would.
    const seen: { method: string; url: URL; authorization: string | null }[] = [];
    let streams = 0;
    const dropping = async (request: Request): Promise<Response> => {
      seen.push({
        method: request.method,
        url: new URL(request.url),
        authorization: request.headers.get("authorization"),
      });
      const response = await workerFetch(request);
      if (request.method !== "GET" || !request.url.includes("/watch?") || response.body === null || ++streams > 1)
        return response;
      const reader = response.body.getReader();
      let text = "";
      const cut = new ReadableStream<Uint8Array>({
        async pull(controller) {
          const { value, done } = await reader.read();
          if (done) return controller.close();
          controller.enqueue(value);
          text += new TextDecoder().decode(value);
          if (text.includes("event: commit")) {
            controller.close();
            await reader.cancel();
          }
        },
      });
      return new Response(cut, { status: response.status, headers: response.headers });
    };
    const watcher = new PicoClient({ baseUrl: BASE, token: await token(tenant, "client"), fetch: dropping });
    // Three seconds: short enough to let the first token expire, long enough that the fresh one minted on
    // the reconnect is still valid when it is used on a loaded machine (one second failed under load).
    const watch = watcher
      .session(name)
      .conversation("root")
      .watch({ watchToken: { ttlSeconds: 3 } });
    try {
      await waitFor(() => watch.view !== undefined);
      // Let the first watch token expire: the reconnect must mint a fresh one (reusing it would be 401).
      await new Promise((resolve) => setTimeout(resolve, 3500));
      await root.accept("two", { wait: 10 });
      await root.accept("three", { wait: 10 });
      const transcript = (await root.entries({ limit: 100 })).items;
      const last = transcript[transcript.length - 1]?.id;
      await waitFor(() => watch.view?.entries.some((e) => e.id === last) === true, 10_000);
      expect(watch.view?.entries.map((e) => e.id)).toEqual(transcript.map((e) => e.id));
      expect(watch.connections).toBe(2);
      expect(watch.views).toBe(1);
      const gets = seen.filter((r) => r.method === "GET");
      expect(gets).toHaveLength(2);
      for (const get of gets) expect(get.authorization).toBeNull();
      const [first, second] = gets.map((g) => g.url.searchParams);
      expect(first?.get("lastEventId")).toBeNull();
      expect(second?.get("lastEventId")).toMatch(/^\d+(\.\d+)?$/);
      expect(second?.get("access_token")).not.toBe(first?.get("access_token"));
      expect(seen.filter((r) => r.method === "POST" && r.url.pathname.endsWith("/watch-token"))).toHaveLength(2);
    } finally {
      watch.close();
    }
  }, 30_000);
});

/** What the echo tool's result data is in full (§9.3): every field at its default, 15 characters untruncated. */
const WHOLE_ECHO_DATA = untruncatedToolData(15);

describe("tool result data on the wire", () => {
  it("a tool result entry's data is served whole (§9.3) while stored compact", async () => {
    const { tenant, name, root } = await createdSession("whole-data");
    const frames = await open(tenant, name);
    try {
      const first = await frames.next();
      expect(first.event).toBe("view");
      let folded = JSON.parse(first.data) as ConversationView;
      await root.accept('/call echo {"text":"ping"}', { wait: 10 });
      const commits = await untilNewest(frames, root);

      // A commit event carries the entry whole.
      const appended = commits
        .filter((f) => f.event === "commit")
        .flatMap((f) => message(f).events)
        .flatMap((e) => (e.type === "entry" && e.entry.kind === "tool_result" ? [e.entry] : []));
      expect(appended.length).toBe(1);
      const resultId = appended[0]?.id as number;
      expect(appended[0]?.data).toEqual(WHOLE_ECHO_DATA);

      // GET entries serves it whole; the commits folded onto the first view give the same entries.
      for (const frame of commits) if (frame.event === "commit") folded = applyMessage(folded, message(frame));
      const page = await root.entries({ limit: 100 });
      expect(page.items.find((e) => e.id === resultId)?.data).toEqual(WHOLE_ECHO_DATA);
      expect(folded.entries).toEqual(page.items);

      // A fresh view (SSE and WebSocket) serves it whole and agrees with the folded commits.
      const fresh = await open(tenant, name);
      try {
        const viewFrame = await fresh.next();
        expect(viewFrame.event).toBe("view");
        const view = JSON.parse(viewFrame.data) as ConversationView;
        expect(view.entries.find((e) => e.id === resultId)?.data).toEqual(WHOLE_ECHO_DATA);
        expect(view.entries).toEqual(folded.entries);
      } finally {
        fresh.close();
      }
      const { ws, received } = await openWs<{ type: string; view?: ConversationView }>(tenant, name);
      try {
        await waitFor(() => received.length >= 1);
        expect(received[0]?.type).toBe("view");
        expect(received[0]?.view?.entries).toEqual(folded.entries);
      } finally {
        ws.close();
      }

      // A resume after the first view replays the commit with the entry whole.
      const resumed = await open(tenant, name, first.id);
      try {
        const replayed = await untilNewest(resumed, root);
        const again = replayed
          .flatMap((f) => (f.event === "commit" ? message(f).events : []))
          .flatMap((e) => (e.type === "entry" && e.entry.id === resultId ? [e.entry] : []));
        expect(again.map((e) => e.data)).toEqual([WHOLE_ECHO_DATA]);
      } finally {
        resumed.close();
      }

      // The stored row stays compact (fewer stored bytes).
      const stored = await runInDurableObject(
        sessionStub(tenant, name),
        (_instance, state) => state.storage.sql.exec("SELECT data FROM entries WHERE id = ?", resultId).one()["data"],
      );
      expect(JSON.parse(stored as string)).toEqual({ chars: 15 });
    } finally {
      frames.close();
    }
  });
});

/** The raw SSE frames of the session watch (`GET /v1/sessions/{s}/watch`). */
function openSessionWatch(api: PicoClient, name: string): Frames {
  const controller = new AbortController();
  return new Frames(
    (async function* () {
      const response = await api.send("GET", `/v1/sessions/${name}/watch`, {
        headers: { accept: "text/event-stream" },
        signal: controller.signal,
      });
      yield* readSse(response.body as ReadableStream<Uint8Array>);
    })(),
    controller,
  );
}

describe("usage rows and task output on the wire", () => {
  it("the session watch's usage events carry whole usage rows, like GET /usage", async () => {
    const { name, api, root } = await createdSession("whole-usage");
    const frames = openSessionWatch(api, name);
    try {
      const first = await frames.next();
      expect(first.event).toBe("view");
      let folded = JSON.parse(first.data) as SessionView;
      await root.accept("count me", { wait: 10 });
      const report = await api.session(name).usage();
      expect(report.rows.items.length).toBeGreaterThan(0);
      const rows: unknown[] = [];
      const seen: SseFrame[] = [];
      while (rows.length < report.rows.items.length) {
        const frame = await frames.next();
        seen.push(frame);
        for (const event of (JSON.parse(frame.data) as WatchMessage<SessionEvent>).events)
          if (event.type === "usage") rows.push(event.row);
      }
      // Every field GET /usage shows (zero counts and costs, the generation kind) is in the event's row.
      expect(rows).toEqual(report.rows.items.map((element) => element.value));
      const generation = rows[0] as { kind?: string; usage?: { input?: number; cost?: { total?: number } } };
      expect(generation.kind).toBe("generation");
      expect(typeof generation.usage?.input).toBe("number");
      expect(typeof generation.usage?.cost?.total).toBe("number");
      // Folding the presented events onto the first view gives a fresh view.
      for (const frame of seen)
        folded = applySessionMessage(folded, JSON.parse(frame.data) as WatchMessage<SessionEvent>);
      const fresh = openSessionWatch(api, name);
      try {
        const view = await fresh.next();
        expect(view.event).toBe("view");
        expect({ ...(JSON.parse(view.data) as SessionView), readAt: folded.readAt }).toEqual(folded);
      } finally {
        fresh.close();
      }
    } finally {
      frames.close();
    }
  });

  it("a settled tool task's output is served whole on GET tasks and the watch", async () => {
    const { tenant, name, root } = await createdSession("whole-task");
    const operator = (await client(tenant, "operator")).session(name);
    const frames = await open(tenant, name);
    try {
      const first = await frames.next();
      expect(first.event).toBe("view");
      let folded = JSON.parse(first.data) as ConversationView;
      await root.accept('/call echo {"text":"ping"}', { wait: 10 });
      const commits = await untilNewest(frames, root);

      // GET tasks, all and settled only: the tool task's output has every §9.3 field.
      const all = await operator.tasks({ limit: 100 });
      const tool = all.items.find((t) => t.kind === "tool");
      expect(tool?.role).toBe("terminal");
      const toolId = tool?.id as number;
      expect((tool?.state as { output?: unknown }).output).toEqual(WHOLE_ECHO_DATA);
      const settled = await operator.tasks({ live: false, limit: 100 });
      expect((settled.items.find((t) => t.id === toolId)?.state as { output?: unknown }).output).toEqual(
        WHOLE_ECHO_DATA,
      );

      // The watch's task events carry it whole too (the settle is a task_end).
      const ended = commits
        .flatMap((f) => (f.event === "commit" ? message(f).events : []))
        .flatMap((e) => (e.type === "task_end" && e.task.id === toolId ? [e.task] : []));
      expect(ended.map((t) => (t.state as { output?: unknown }).output)).toEqual([WHOLE_ECHO_DATA]);
      expect(ended[0]).toEqual(tool);

      // Folding the presented commits onto the first view gives a fresh view's tasks and entries.
      for (const frame of commits) if (frame.event === "commit") folded = applyMessage(folded, message(frame));
      const fresh = await open(tenant, name);
      try {
        const view = JSON.parse((await fresh.next()).data) as ConversationView;
        expect(view.tasks).toEqual(folded.tasks);
        expect(view.entries).toEqual(folded.entries);
      } finally {
        fresh.close();
      }

      // The stored row stays compact (fewer stored bytes).
      const stored = await runInDurableObject(sessionStub(tenant, name), (_instance, state) => {
        const row = state.storage.sql.exec("SELECT state, status FROM tasks WHERE id = ?", toolId).one();
        return decodeState(String(row["state"]), () => String(row["status"]));
      });
      expect((stored as { output?: unknown }).output).toEqual({ chars: 15 });
    } finally {
      frames.close();
    }
  });
});

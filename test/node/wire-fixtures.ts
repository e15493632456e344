/**
 * Wire-test fixtures (docs/models.md "Wire tests"): a local fake HTTP endpoint (node:http on 127.0.0.1, an
 * ephemeral port) that answers with hand-written replies in each API's documented streaming format and
 * records every request; a fetch that sends the catalogue providers' fixed hosts (api.anthropic.com,
 * api.openai.com, api.cloudflare.com) to it; and a turn rig: the REAL pi-ai providers (the catalogue
 * factories and a createProvider custom endpoint, src/models/providers.ts) under the turn kit on a
 * memory harness with a fake clock.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, expect, vi } from "vitest";
import { BACKGROUND_CONTEXT } from "../../src/core/call.js";
import { Harness, initialValue } from "../../src/core/harness.js";
import { bindResult, type InputResult } from "../../src/core/inbox.js";
import { bind } from "../../src/core/state.js";
import { generationConfig } from "../../src/kinds/config.js";
import type { AnyTool, TurnOptions } from "../../src/kinds/services.js";
import type { UsageRow } from "../../src/kinds/states.js";
import { systemSections } from "../../src/kinds/sections.js";
import { ProfileCache, profileHandler, registerProfileSection } from "../../src/worker/session/profiles.js";
import { createTurnKit, type TurnKit } from "../../src/kinds/turns.js";
import { readUsageRow, usageList } from "../../src/kinds/usage.js";
import { buildProviderModels, secretsOf, type CustomProviderConfig } from "../../src/models/providers.js";
import { MemoryStorage } from "../../src/storage/memory.js";
import type { Entry, Id, Task } from "../../src/storage/records.js";
import { FakeClock } from "../core/driver-fixtures.js";

export const call = BACKGROUND_CONTEXT;

// ---------------------------------------------------------------------------------------------
// The fake endpoint

/** One scripted reply: a status, headers and body chunks; `cut` destroys the socket after the chunks. */
export interface Reply {
  readonly status?: number;
  readonly headers?: Readonly<Record<string, string>>;
  readonly chunks: readonly string[];
  readonly cut?: boolean;
}

export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: Record<string, unknown>;
}

export class FakeEndpoint {
  readonly requests: RecordedRequest[] = [];
  readonly #replies: Reply[] = [];
  #server: Server | undefined;
  url = "";

  reply(...replies: Reply[]): void {
    this.#replies.push(...replies);
  }

  get pendingReplies(): number {
    return this.#replies.length;
  }

  /** Listen on a fresh ephemeral port, with no requests recorded and no replies scripted. */
  async start(): Promise<void> {
    this.requests.length = 0;
    this.#replies.length = 0;
    const server = createServer((req, res) => void this.#handle(req, res));
    this.#server = server;
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    const server = this.#server;
    if (server === undefined) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const parts: Buffer[] = [];
    for await (const part of req) parts.push(part as Buffer);
    const text = Buffer.concat(parts).toString("utf8");
    this.requests.push({
      method: req.method ?? "",
      path: req.url ?? "",
      headers: req.headers,
      body: text === "" ? {} : (JSON.parse(text) as Record<string, unknown>),
    });
    const reply = this.#replies.shift();
    if (reply === undefined) {
      res
        .writeHead(599, { "content-type": "application/json" })
        .end(JSON.stringify({ error: { message: "the fake endpoint has no reply scripted" } }));
      return;
    }
    const status = reply.status ?? 200;
    res.writeHead(status, {
      "content-type": status === 200 ? "text/event-stream" : "application/json",
      ...reply.headers,
    });
    for (const chunk of reply.chunks) {
      res.write(chunk);
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (reply.cut === true) {
      res.socket?.destroy();
      return;
    }
    res.end();
  }
}

/** SSE: `event:` lines when named (Anthropic, Responses), `data:` only otherwise (Chat Completions). */
export function sse(events: readonly (readonly [string | null, unknown])[], done = false): string[] {
  const out = events.map(
    ([name, data]) => `${name === null ? "" : `event: ${name}\n`}data: ${JSON.stringify(data)}\n\n`,
  );
  if (done) out.push("data: [DONE]\n\n");
  return out;
}

export function jsonError(status: number, body: unknown, headers: Record<string, string> = {}): Reply {
  return { status, headers, chunks: [JSON.stringify(body)] };
}

/** Route the catalogue providers' fixed hosts to the fake endpoint (their SDKs call fetch at request time). */
export function redirectFetch(endpoint: FakeEndpoint): typeof globalThis.fetch {
  const real = globalThis.fetch;
  return async (input, init) => {
    const url = new URL(typeof input === "string" ? input : input instanceof URL ? input.href : input.url);
    if (url.hostname === "127.0.0.1") return real(input, init);
    const local = new URL(url.pathname + url.search, endpoint.url);
    if (input instanceof Request) return real(new Request(local, input), init);
    return real(local, init);
  };
}

/**
 * One fake endpoint for a test file: started before each test (fresh port, nothing recorded or
 * scripted) with fetch routed to it, closed after. The first request of a file loads its provider SDK
 * (lazily), so the file's tests get a generous timeout on a small shared machine.
 */
export function useFakeEndpoint(): FakeEndpoint {
  vi.setConfig({ testTimeout: 30_000 });
  const endpoint = new FakeEndpoint();
  beforeEach(async () => {
    await endpoint.start();
    vi.stubGlobal("fetch", redirectFetch(endpoint));
  });
  afterEach(async () => {
    vi.unstubAllGlobals();
    await endpoint.close();
  });
  return endpoint;
}

// ---------------------------------------------------------------------------------------------
// The rig

export interface WireRig {
  readonly harness: Harness;
  readonly kit: TurnKit;
  readonly storage: MemoryStorage;
  readonly clock: FakeClock;
  readonly root: Id;
}

export const IDENTITY = "You are the wire test's agent.";

export const echoTool: AnyTool = {
  name: "echo",
  description: "Returns its arguments.",
  parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  async execute(_id, params, out) {
    out.write(String(params["text"]));
  },
};

export async function openWire(options: {
  secrets: Record<string, string>;
  custom?: CustomProviderConfig[];
  model: string;
  thinking?: string;
  turn?: Partial<TurnOptions>;
}): Promise<WireRig> {
  const models = await buildProviderModels(secretsOf(options.secrets), options.custom ?? []);
  const clock = new FakeClock(1_700_000_000_000);
  const kit = createTurnKit({
    models,
    tools: [echoTool],
    options: { retryBaseMs: 1000, retryJitter: 0, flushMs: 0, ...options.turn },
  });
  const storage = new MemoryStorage();
  const harness = await Harness.open(
    storage,
    {
      taskKinds: kit.kinds,
      host: { clock },
      rootValues: [
        initialValue(generationConfig.model, options.model),
        initialValue(generationConfig.selectedTools, ["echo"]),
        ...(options.thinking === undefined ? [] : [initialValue(generationConfig.thinking, options.thinking)]),
      ],
    },
    call,
  );
  kit.install(harness);
  // A host's identity section: the system text every request must carry.
  kit.hooks.on(kit.generation, "system_instructions", ({ sections }) => {
    sections.set(systemSections.identity, IDENTITY);
  });
  return { harness, kit, storage, clock, root: harness.rootId };
}

/**
 * Give the rig's root the profile `support` of one section, rendered by the session host's handler
 * (src/worker/session/profiles.ts) with `variables`, as a session object installs it.
 */
export async function useProfile(rig: WireRig, text: string, variables: Record<string, string>): Promise<void> {
  const profile = { name: "support", version: 1, sections: [{ id: "role", text }], createdAt: 0 };
  const cache = new ProfileCache(
    { latest: async () => profile, version: async (_name, version) => (version === 1 ? profile : undefined) },
    rig.clock,
    (error) => {
      throw error;
    },
  );
  registerProfileSection(rig.kit.sections);
  profileHandler(rig.kit.hooks, rig.kit.generation, cache, async () => variables);
  const root = await rig.harness.root(call);
  await root.commit((tx) => tx.value(generationConfig.profile).set("support"), call);
}

/** One way to reach an API: a catalogue provider, or a custom endpoint declared in configuration. */
export interface WireRoute {
  readonly name: string;
  readonly model: string;
  readonly secrets: Record<string, string>;
  readonly custom?: (endpoint: FakeEndpoint) => CustomProviderConfig[];
  /** The request path the route must reach. */
  readonly path: RegExp;
}

/** A rig whose model is `route`'s, reached through `endpoint`. */
export function openRoute(
  route: WireRoute,
  endpoint: FakeEndpoint,
  extra: { thinking?: string } = {},
): Promise<WireRig> {
  return openWire({
    secrets: route.secrets,
    model: route.model,
    ...(route.custom === undefined ? {} : { custom: route.custom(endpoint) }),
    ...extra,
  });
}

/**
 * Accept "hello" on the root and start driving it: the clock's time before the acceptance, its input id and the drive.
 */
export async function acceptAndDrive(
  rig: WireRig,
): Promise<{ start: number; inputId: Id; driving: Promise<"idle" | "closed"> }> {
  const root = await rig.harness.root(call);
  const start = rig.clock.now();
  const { inputId } = await root.accept({ input: "hello" }, call);
  return { start, inputId, driving: root.drive(call) };
}

/** The state of the rig's (first) generation task. */
export async function generationState(rig: WireRig): Promise<Task["state"] | undefined> {
  return (await tasksOfKind(rig, "generation"))[0]?.state;
}

/** Wait until the turn sleeps on the fake clock (a retry's wait). */
export function retrySleep(rig: WireRig, what = "the retry sleep"): Promise<void> {
  return eventually(() => rig.clock.pending > 0, what);
}

/**
 * The drive that waits out a retry: no second request 1 ms before `ms` on the clock; at `ms` the second request answers
 * and the drive ends idle.
 */
export async function expectWaitsExactly(
  endpoint: FakeEndpoint,
  rig: WireRig,
  driving: Promise<"idle" | "closed">,
  ms: number,
): Promise<void> {
  expect(endpoint.requests).toHaveLength(1);
  rig.clock.advance(ms - 1);
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(endpoint.requests).toHaveLength(1);
  rig.clock.advance(1);
  expect(await driving).toBe("idle");
  expect(endpoint.requests).toHaveLength(2);
}

/**
 * Accept "hello" and drive to idle against a scripted context-overflow error: one request on `path`, the generation
 * failed(overflow), the input unanswered.
 */
export async function expectOverflowSettles(endpoint: FakeEndpoint, rig: WireRig, path: RegExp): Promise<void> {
  const root = await rig.harness.root(call);
  const { inputId } = await root.accept({ input: "hello" }, call);
  expect(await root.drive(call)).toBe("idle");
  expect(endpoint.requests).toHaveLength(1);
  expect(endpoint.requests[0]?.path).toMatch(path);
  expect(await generationState(rig)).toMatchObject({ status: "failed", reason: "overflow" });
  expect(await resultOf(rig, inputId)).toMatchObject({ status: "unanswered" });
}

/**
 * A keyless custom endpoint answered one prompt: one request on `path` carrying `header: value`, the answer and its
 * usage row.
 */
export async function expectKeylessAnswer(
  endpoint: FakeEndpoint,
  rig: WireRig,
  path: RegExp,
  [header, value]: readonly [string, string],
): Promise<void> {
  await (await rig.harness.root(call)).prompt({ input: "hello" }, call);
  expect(endpoint.requests).toHaveLength(1);
  expect(endpoint.requests[0]?.path).toMatch(path);
  expect(endpoint.requests[0]?.headers[header]).toBe(value);
  expect((await assistants(rig)).map((a) => a.content.map((b) => b.text))).toEqual([["no key needed"]]);
  expect(await usageRows(rig)).toHaveLength(1);
}

export async function entries(rig: WireRig): Promise<Entry[]> {
  return [...(await rig.storage.scanEntries({ conversationId: rig.root, limit: 1000 })).items];
}

export async function tasksOfKind(rig: WireRig, kind: string): Promise<Task[]> {
  return [...(await rig.storage.scanTasks({ kind, limit: 1000 })).items];
}

export async function usageRows(rig: WireRig): Promise<UsageRow[]> {
  return (await rig.storage.readList(bind(usageList, {}), { limit: 1000 })).items.map((e) => readUsageRow(e.value));
}

export async function resultOf(rig: WireRig, inputId: Id): Promise<InputResult | undefined> {
  return (await rig.storage.getValue(bindResult(rig.root, inputId)))?.value;
}

/** The assistant messages of the transcript (their pi-ai content blocks). */
export async function assistants(
  rig: WireRig,
): Promise<{ content: { type: string; [k: string]: unknown }[]; stopReason: string }[]> {
  return (await entries(rig))
    .filter((e) => e.kind === "assistant")
    .map(
      (e) =>
        (e.model as unknown as { content: { type: string }[]; stopReason: string }[])[0] as {
          content: { type: string; [k: string]: unknown }[];
          stopReason: string;
        },
    );
}

/** Poll real time (the HTTP exchange is real I/O) until `predicate` holds; fails after ~10 s. */
export async function eventually(predicate: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (await predicate()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

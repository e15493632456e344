/**
 * Images from the frontends (docs/frontends.md "Images"): a chat page's `file` parts and an AG-UI page's image content
 * parts reach a model that takes images (the built-in echo model names each image it got), come back in the history
 * (`GET .../chat/{c}/messages` as `file` parts, AG-UI's `MESSAGES_SNAPSHOT` as image parts), and anything else is
 * refused naming the part (415 `unsupported_media_type`; 413 `payload_too_large` over the per-message cap), with nothing
 * written. The provider wire of the same images is test/node/wire-images.test.ts.
 */
import { EventSchemas } from "@ag-ui/core/schemas";
import { abortAllDurableObjects } from "cloudflare:test";
import { validateUIMessages, type UIMessage } from "ai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/storage/records.js";
import { call, json, token, uniqueSession } from "./http-fixtures.js";
import { installSeams, resetSeams } from "./session-fixtures.js";

let tenants = 0;
let TENANT = "images";

beforeEach(() => {
  installSeams();
  tenants += 1;
  TENANT = `images-${tenants}-${Date.now().toString(36)}`;
});

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

/** A 1x1 PNG. */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";
const DATA_URL = `data:image/png;base64,${PNG}`;
const URL_IMAGE = "https://images.example.com/cat.jpg";

async function newSession(config: JsonObject = {}): Promise<{ name: string; t: string }> {
  const name = uniqueSession("images");
  const t = await token(TENANT, "client");
  const created = await call("PUT", `/v1/sessions/${name}`, { token: t, body: config });
  expect(created.status, await created.clone().text()).toBe(201);
  return { name, t };
}

/** The `data:` payloads of an SSE body. */
function dataOf(text: string): JsonObject[] {
  return text
    .split("\n\n")
    .filter((block) => block.startsWith("data: {"))
    .map((block) => JSON.parse(block.slice(6)) as JsonObject);
}

async function userEntries(name: string, t: string): Promise<number> {
  const response = await call("GET", `/v1/sessions/${name}/conversations/root/entries?kind=user`, { token: t });
  expect(response.status).toBe(200);
  return (await json<{ items: unknown[] }>(response)).items.length;
}

/** The answer text of a chat stream (its text deltas joined). */
function answerOf(chunks: readonly JsonObject[]): string {
  return chunks
    .filter((chunk) => chunk["type"] === "text-delta")
    .map((chunk) => String(chunk["delta"]))
    .join("");
}

async function chat(
  name: string,
  t: string,
  parts: readonly JsonObject[],
  id: string,
): Promise<{ status: number; body: JsonObject[] }> {
  const response = await call("POST", `/v1/sessions/${name}/chat`, {
    token: t,
    body: { id: "root", messages: [{ id, role: "user", parts }] },
  });
  const text = await response.text();
  return { status: response.status, body: response.status === 200 ? dataOf(text) : [JSON.parse(text) as JsonObject] };
}

describe("images from the chat route", () => {
  it("A chat page's images reach the model and come back in the history as file parts", async () => {
    const { name, t } = await newSession();
    const parts: JsonObject[] = [
      { type: "text", text: "what is in these?" },
      { type: "file", mediaType: "image/png", url: DATA_URL, filename: "dot.png" },
      { type: "file", mediaType: "image/jpeg", url: URL_IMAGE },
    ];
    const sent = await chat(name, t, parts, "img-1");
    expect(sent.status).toBe(200);
    // The echo model names each image it was given: both reached it.
    expect(answerOf(sent.body)).toBe(`what is in these? [image image/png] [image ${URL_IMAGE}]`);
    const history = await json<UIMessage[]>(await call("GET", `/v1/sessions/${name}/chat/root/messages`, { token: t }));
    await validateUIMessages({ messages: history });
    expect(history[0]).toEqual({
      id: "img-1",
      role: "user",
      parts: [
        { type: "text", text: "what is in these?", state: "done" },
        { type: "file", mediaType: "image/png", url: DATA_URL },
        { type: "file", mediaType: "image/jpeg", url: URL_IMAGE },
      ],
    });
    // Regenerate: the answer runs again on a fork, with the message's images.
    const answerId = String(sent.body.find((chunk) => chunk["type"] === "start")?.["messageId"]);
    const regenerated = await call("POST", `/v1/sessions/${name}/chat`, {
      token: t,
      body: {
        id: "root",
        messages: [{ id: "img-1", role: "user", parts }],
        trigger: "regenerate-message",
        messageId: answerId,
      },
    });
    expect(regenerated.status).toBe(200);
    expect(answerOf(dataOf(await regenerated.text()))).toBe(`what is in these? [image image/png] [image ${URL_IMAGE}]`);
    // A message of images alone is an input too.
    const alone = await chat(name, t, [{ type: "file", mediaType: "image/png", url: DATA_URL }], "img-2");
    expect(alone.status).toBe(200);
    expect(answerOf(alone.body)).toBe("[image image/png]");
    // The chat now points at the regeneration's fork: both messages there, once each, the second a file part alone.
    const after = await json<UIMessage[]>(await call("GET", `/v1/sessions/${name}/chat/root/messages`, { token: t }));
    expect(after.filter((m) => m.role === "user").map((m) => [m.id, m.parts])).toEqual([
      ["img-1", history[0]?.parts],
      ["img-2", [{ type: "file", mediaType: "image/png", url: DATA_URL }]],
    ]);
  });

  it("An edit that changes only a message's images continues on a fork; the same images again are a continuation", async () => {
    const { name, t } = await newSession();
    const text = { type: "text", text: "which colour?" };
    const first = await chat(name, t, [text, { type: "file", mediaType: "image/png", url: DATA_URL }], "edit-img");
    expect(first.status).toBe(200);
    // The page resends the message as it was (a continuation): no second input, the same answer.
    const again = await chat(name, t, [text, { type: "file", mediaType: "image/png", url: DATA_URL }], "edit-img");
    expect(again.status).toBe(200);
    expect(await userEntries(name, t)).toBe(1);
    // The page swaps the image, same text: an edit, accepted on a fork the chat moves to.
    const edited = await chat(name, t, [text, { type: "file", mediaType: "image/jpeg", url: URL_IMAGE }], "edit-img");
    expect(edited.status).toBe(200);
    expect(answerOf(edited.body)).toBe(`which colour? [image ${URL_IMAGE}]`);
    const history = await json<UIMessage[]>(await call("GET", `/v1/sessions/${name}/chat/root/messages`, { token: t }));
    expect(history.filter((m) => m.role === "user").map((m) => m.parts)).toEqual([
      [
        { type: "text", text: "which colour?", state: "done" },
        { type: "file", mediaType: "image/jpeg", url: URL_IMAGE },
      ],
    ]);
    // Conversation root keeps the first image.
    expect(await userEntries(name, t)).toBe(1);
  });

  it("Parts no model here can take are refused naming the part, and nothing is written", async () => {
    const { name, t } = await newSession();
    const cases: readonly [JsonObject, number, string][] = [
      [
        { type: "file", mediaType: "application/pdf", url: "https://example.test/a.pdf" },
        415,
        "unsupported_media_type",
      ],
      [{ type: "file", mediaType: "image/svg+xml", url: "https://example.test/a.svg" }, 415, "unsupported_media_type"],
      [{ type: "file", mediaType: "image/png", url: "http://example.test/a.png" }, 415, "unsupported_media_type"],
      [{ type: "file", mediaType: "image/png", url: "blob:https://page.test/1" }, 415, "unsupported_media_type"],
      [{ type: "file", mediaType: "image/png", url: "data:image/png,raw" }, 415, "unsupported_media_type"],
      [{ type: "file", mediaType: "text/plain", url: "data:text/plain;base64,aGk=" }, 415, "unsupported_media_type"],
      [{ type: "file", mediaType: "image/png", url: "data:image/png;base64,@@@" }, 400, "invalid_body"],
    ];
    for (const [index, [part, status, code]] of cases.entries()) {
      const sent = await chat(name, t, [{ type: "text", text: "look" }, part], `bad-${index}`);
      expect(sent.status, JSON.stringify(part)).toBe(status);
      expect(sent.body[0]).toMatchObject({ code, field: "messages[0].parts[1]" });
    }
    // Over the per-message cap of inline images (1.5 MiB of base64): 413 naming the part that crosses it.
    const big = "A".repeat(800 * 1024);
    const over = await chat(
      name,
      t,
      [
        { type: "file", mediaType: "image/png", url: `data:image/png;base64,${big}` },
        { type: "file", mediaType: "image/png", url: `data:image/png;base64,${big}` },
      ],
      "too-big",
    );
    expect(over.status).toBe(413);
    expect(over.body[0]).toMatchObject({ code: "payload_too_large", field: "messages[0].parts[1]" });
    // A message whose text and images together would not fit its entry's row: 413 naming the message's parts.
    const crowded = await chat(
      name,
      t,
      [
        { type: "text", text: "x".repeat(600_000) },
        { type: "file", mediaType: "image/png", url: `data:image/png;base64,${"A".repeat(1_400_000)}` },
      ],
      "crowded",
    );
    expect(crowded.status).toBe(413);
    expect(crowded.body[0]).toMatchObject({ code: "payload_too_large", field: "messages[0].parts" });
    expect(await userEntries(name, t)).toBe(0);
  });

  it("A model that takes no images refuses them naming the part and the model", async () => {
    const { name, t } = await newSession({ model: "echo/echo-text" });
    const sent = await chat(
      name,
      t,
      [
        { type: "text", text: "look" },
        { type: "file", mediaType: "image/png", url: DATA_URL },
      ],
      "text-only",
    );
    expect(sent.status).toBe(415);
    expect(sent.body[0]).toMatchObject({ code: "unsupported_media_type", field: "messages[0].parts[1]" });
    expect(String(sent.body[0]?.["detail"])).toContain("echo/echo-text");
    expect(await userEntries(name, t)).toBe(0);
    // Its text alone is accepted.
    expect((await chat(name, t, [{ type: "text", text: "look" }], "text-only-2")).status).toBe(200);
  });
});

describe("images from AG-UI", () => {
  async function run(name: string, t: string, body: JsonObject): Promise<{ status: number; body: JsonObject[] }> {
    const response = await call("POST", `/v1/sessions/${name}/ag-ui`, {
      token: t,
      body: { threadId: "root", runId: `run-${Math.random().toString(36).slice(2)}`, ...body },
    });
    const text = await response.text();
    return { status: response.status, body: response.status === 200 ? dataOf(text) : [JSON.parse(text) as JsonObject] };
  }

  it("Image content parts reach the model and come back in MESSAGES_SNAPSHOT; other media are refused naming the part", async () => {
    const { name, t } = await newSession();
    const content: JsonObject[] = [
      { type: "text", text: "and these?" },
      { type: "image", source: { type: "data", value: PNG, mimeType: "image/png" } },
      { type: "image", source: { type: "url", value: URL_IMAGE } },
    ];
    const sent = await run(name, t, { messages: [{ id: "ag-img-1", role: "user", content }] });
    expect(sent.status).toBe(200);
    for (const event of sent.body) expect(EventSchemas.safeParse(event).success, JSON.stringify(event)).toBe(true);
    const text = sent.body
      .filter((event) => event["type"] === "TEXT_MESSAGE_CONTENT")
      .map((event) => String(event["delta"]))
      .join("");
    expect(text).toBe(`and these? [image image/png] [image ${URL_IMAGE}]`);

    // A page loading its thread sees the message as it sent it.
    const loaded = await run(name, t, { messages: [] });
    const snapshot = loaded.body.find((event) => event["type"] === "MESSAGES_SNAPSHOT");
    expect(EventSchemas.safeParse(snapshot).success).toBe(true);
    expect((snapshot?.["messages"] as JsonObject[])[0]).toEqual({ id: "ag-img-1", role: "user", content });

    const before = await userEntries(name, t);
    const refused: readonly JsonObject[] = [
      { type: "document", source: { type: "data", value: "JVBERi0=", mimeType: "application/pdf" } },
      { type: "audio", source: { type: "data", value: "AAAA", mimeType: "audio/wav" } },
      { type: "image", source: { type: "file", value: "file-123", provider: "openai" } },
      { type: "image", source: { type: "url", value: "http://images.example.com/cat.jpg" } },
    ];
    for (const [index, part] of refused.entries()) {
      const bad = await run(name, t, {
        messages: [{ id: `ag-bad-${index}`, role: "user", content: [{ type: "text", text: "look" }, part] }],
      });
      expect(bad.status, JSON.stringify(part)).toBe(415);
      expect(bad.body[0]).toMatchObject({ code: "unsupported_media_type", field: "messages.0.content.1" });
    }
    // A document that is an image is read as one.
    const asDocument = await run(name, t, {
      messages: [
        {
          id: "ag-doc",
          role: "user",
          content: [{ type: "document", source: { type: "data", value: PNG, mimeType: "image/png" } }],
        },
      ],
    });
    expect(asDocument.status).toBe(200);
    expect(await userEntries(name, t)).toBe(before + 1);
  });
});

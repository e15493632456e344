/**
 * Images a frontend sends, on the provider's wire (docs/frontends.md "Images"): a chat page's `file` parts and an
 * AG-UI page's image parts, read by the frontends' one reader (src/worker/frontends/content-parts.ts) into the user
 * entry, reach pi-ai's REAL provider serialization (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages)
 * against a local fake endpoint that records the request: inline data as the provider's inline form, an https URL as
 * the provider's URL form (never fetched by the server: the fake endpoint sees one request, the model call).
 */
import { describe, expect, it } from "vitest";
import { readAgUiContent, readUiParts } from "../../src/worker/frontends/content-parts.js";
import { call, jsonError, openWire, useFakeEndpoint, type RecordedRequest } from "./wire-fixtures.js";

const endpoint = useFakeEndpoint();

/** A 1x1 PNG. */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";
const URL_IMAGE = "https://images.example.com/cat.jpg";

/** A chat page's message: text, an inline PNG and a JPEG by URL. */
const chatParts = [
  { type: "text", text: "what is in these?" },
  { type: "file", mediaType: "image/png", url: `data:image/png;base64,${PNG}`, filename: "dot.png" },
  { type: "file", mediaType: "image/jpeg", url: URL_IMAGE },
];

/** Accept `input` on the rig's model and drive one request (answered 400: only the request is under test). */
async function requestFor(model: string, secrets: Record<string, string>, input: unknown): Promise<RecordedRequest> {
  const rig = await openWire({ secrets, model });
  endpoint.reply(jsonError(400, { error: { type: "invalid_request_error", message: "recorded" } }));
  const root = await rig.harness.root(call);
  await root.accept({ input: input as never }, call);
  await root.drive(call);
  expect(endpoint.requests).toHaveLength(1);
  const request = endpoint.requests[0];
  if (request === undefined) throw new Error("no request");
  return request;
}

/** The last user message of a request body (Chat Completions `messages`, Responses `input`, Anthropic `messages`). */
function lastUser(body: Record<string, unknown>, key: "messages" | "input"): { content: unknown[] } {
  const list = body[key] as { role?: string; content: unknown[] }[];
  const users = list.filter((m) => m.role === "user");
  const user = users[users.length - 1];
  if (user === undefined) throw new Error("no user message");
  return user;
}

describe("images on the provider's wire", () => {
  it("OpenAI Chat Completions: image_url parts, a data URL inline and the https URL as it is", async () => {
    const read = readUiParts(chatParts, "messages[0]");
    const request = await requestFor("groq/qwen/qwen3.6-27b", { GROQ_API_KEY: "gsk-test" }, read.input);
    expect(request.path).toMatch(/\/chat\/completions$/);
    expect(lastUser(request.body, "messages").content).toEqual([
      { type: "text", text: "what is in these?" },
      { type: "image_url", image_url: { url: `data:image/png;base64,${PNG}` } },
      { type: "image_url", image_url: { url: URL_IMAGE } },
    ]);
  });

  it("OpenAI Responses: input_image parts, a data URL inline and the https URL as it is", async () => {
    const read = readUiParts(chatParts, "messages[0]");
    const request = await requestFor("openai/gpt-5-mini", { OPENAI_API_KEY: "sk-openai-test" }, read.input);
    expect(request.path).toMatch(/\/responses$/);
    expect(lastUser(request.body, "input").content).toEqual([
      { type: "input_text", text: "what is in these?" },
      expect.objectContaining({ type: "input_image", image_url: `data:image/png;base64,${PNG}` }),
      expect.objectContaining({ type: "input_image", image_url: URL_IMAGE }),
    ]);
  });

  it("Anthropic Messages: a base64 source inline and a url source for the https URL (from AG-UI image parts)", async () => {
    const read = readAgUiContent(
      [
        { type: "text", text: "what is in these?" },
        { type: "image", source: { type: "data", value: PNG, mimeType: "image/png" } },
        { type: "image", source: { type: "url", value: URL_IMAGE } },
      ],
      "messages.0.content",
    );
    const request = await requestFor("anthropic/claude-sonnet-4-5", { ANTHROPIC_API_KEY: "sk-ant-test" }, read.input);
    expect(request.path).toMatch(/^\/v1\/messages/);
    expect(lastUser(request.body, "messages").content).toEqual([
      expect.objectContaining({ type: "text", text: "what is in these?" }),
      expect.objectContaining({ type: "image", source: { type: "base64", media_type: "image/png", data: PNG } }),
      expect.objectContaining({ type: "image", source: { type: "url", url: URL_IMAGE } }),
    ]);
  });
});

/**
 * The frontends' one reader of a user message's parts (src/worker/frontends/content-parts.ts) and the model check:
 * which models are sent images, and which are sent image URLs (docs/frontends.md "Images"); and the provider payload
 * rewrite that turns a stored URL image into the provider's URL form, https only (src/kinds/image-urls.ts).
 */
import { describe, expect, it } from "vitest";
import { withImageUrls } from "../../src/kinds/image-urls.js";
import { checkModelTakes, readAgUiContent, readUiParts } from "../../src/worker/frontends/content-parts.js";
import { Problem } from "../../src/worker/problems.js";

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";

function refusal(run: () => void): { code: string; field?: string; detail: string } {
  try {
    run();
  } catch (error) {
    if (error instanceof Problem)
      return { code: error.code, detail: error.detail, ...(error.field === undefined ? {} : { field: error.field }) };
    throw error;
  }
  throw new Error("not refused");
}

describe("the model check", () => {
  const inline = readUiParts(
    [{ type: "file", mediaType: "image/png", url: `data:image/png;base64,${PNG}` }],
    "messages[0]",
  );
  const byUrl = readAgUiContent(
    [
      { type: "text", text: "this" },
      { type: "image", source: { type: "url", value: "https://images.example.com/a.webp", mimeType: "image/webp" } },
    ],
    "messages.2.content",
  );

  it("a model whose input lacks image refuses any image, naming the part and the model", () => {
    expect(
      refusal(() => checkModelTakes({ id: "local/text", api: "openai-completions", input: ["text"] }, inline)),
    ).toMatchObject({
      code: "unsupported_media_type",
      field: "messages[0].parts[0]",
      detail: expect.stringContaining("local/text"),
    });
  });

  it("an image URL goes only to an API that is sent URLs; inline data to every model that takes images", () => {
    const gemini = { id: "google/gemini-2.5-flash", api: "google-generative-ai", input: ["text", "image"] };
    expect(() => checkModelTakes(gemini, inline)).not.toThrow();
    expect(refusal(() => checkModelTakes(gemini, byUrl))).toMatchObject({
      code: "unsupported_media_type",
      field: "messages.2.content.1",
      detail: expect.stringContaining("google-generative-ai"),
    });
    for (const api of ["openai-completions", "openai-responses", "anthropic-messages"])
      expect(() => checkModelTakes({ id: "p/m", api, input: ["text", "image"] }, byUrl)).not.toThrow();
    // Text alone passes any model.
    expect(() =>
      checkModelTakes({ id: "p/m", api: "x", input: ["text"] }, readUiParts([{ type: "text", text: "hi" }], "m")),
    ).not.toThrow();
  });
});

describe("the payload rewrite", () => {
  it("rewrites https URL images to the provider's URL form and leaves everything else as it is", () => {
    const payload = {
      messages: [
        {
          role: "user",
          content: [{ type: "image_url", image_url: { url: "data:image/png;base64,url:https://a.test/x.png" } }],
        },
        {
          role: "user",
          content: [
            { type: "image", source: { type: "base64", media_type: "image/png", data: "url:https://a.test/y.png" } },
          ],
        },
        {
          role: "user",
          content: [
            { type: "image", source: { type: "base64", media_type: "image/png", data: "url:http://a.test/z.png" } },
          ],
        },
        { role: "user", content: [{ type: "image_url", image_url: { url: `data:image/png;base64,${PNG}` } }] },
      ],
    };
    expect(withImageUrls(payload)).toEqual({
      messages: [
        { role: "user", content: [{ type: "image_url", image_url: { url: "https://a.test/x.png" } }] },
        { role: "user", content: [{ type: "image", source: { type: "url", url: "https://a.test/y.png" } }] },
        payload.messages[2],
        payload.messages[3],
      ],
    });
    // Nothing to rewrite: undefined, so pi-ai sends its payload untouched.
    expect(withImageUrls({ messages: [payload.messages[3]] })).toBeUndefined();
  });
});

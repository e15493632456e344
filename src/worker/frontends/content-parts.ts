/**
 * What a frontend's user message may carry to the model (docs/frontends.md "Images"), one set of rules for the AI SDK
 * chat route (a UI message's `text` and `file` parts) and AG-UI (a user message's `text`, `image` and `document`
 * content parts):
 *
 * - text, joined in order;
 * - an image, of a type every provider that takes images reads (png, jpeg, gif, webp), given inline as base64 (a
 *   `data:` URL, AG-UI's `data` source), at most `MAX_IMAGE_CHARS` of base64 per message so its entry stays under the
 *   2 MB row limit (over it: 413 `payload_too_large` naming the part), or by an `https` URL, passed to the provider as
 *   that URL and never fetched by the server (kinds/image-urls.ts);
 * - anything else (another media type, an `http:` or `blob:` URL, a provider's file id, audio, video) is 415
 *   `unsupported_media_type` naming the part. Nothing is dropped without a word.
 *
 * Whether the conversation's model takes images is checked before anything is written (`checkModelTakes`): a model
 * whose input lacks "image", or a URL image for a model whose API cannot be sent a URL, is 415 naming the part and the
 * model. The same blocks come back from the transcript as the page sent them: `file` parts in the chat history
 * (`uiFileParts`), image content parts in AG-UI snapshots (`agUiUserContent`).
 */
import type { ImageContent, TextContent } from "@earendil-works/pi-ai";
import type { UserInput } from "../../core/entries.js";
import { imageUrlOf, URL_IMAGE_APIS, urlImageData } from "../../kinds/image-urls.js";
import { Problem } from "../problems.js";

/** Base64 characters of inline images one user message may carry (1.5 MiB: its entry stays under 2 MB). */
export const MAX_IMAGE_CHARS = 1.5 * 1024 * 1024;

/** The image types every provider that takes images reads. */
export const IMAGE_TYPES: readonly string[] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/**
 * UTF-8 bytes of text and base64 of images one user message may carry in all: its entry fits a stored row (2 MB, with
 * room for the entry's other fields).
 */
export const MAX_MESSAGE_BYTES = 1_800_000;

/** Longest image URL passed on. */
const MAX_URL_CHARS = 4096;

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const DATA_URL = /^data:([^;,]+)((?:;[^;,]*)*),(.*)$/s;

/** A user message read for the model: its content (a string when it is text only), its text and its images. */
export interface ReadContent {
  readonly input: UserInput;
  readonly text: string;
  /** Each image's field (`messages[0].parts[1]`) and whether it is named by URL. */
  readonly images: readonly { readonly field: string; readonly url: boolean }[];
}

/** One part as a frontend sent it, before it is read. */
type Read =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "image"; readonly block: ImageContent; readonly url: boolean }
  | { readonly type: "skip" };

function unsupported(field: string, what: string): Problem {
  return new Problem(
    "unsupported_media_type",
    `${what}: a user message carries text, and images (${IMAGE_TYPES.join(", ")}) as base64 data or an https URL`,
    field,
  );
}

function record(value: unknown): Readonly<Record<string, unknown>> | undefined {
  return value !== null && typeof value === "object" && !Array.isArray(value)
    ? (value as Readonly<Record<string, unknown>>)
    : undefined;
}

function imageType(mediaType: unknown, field: string): string {
  const type = typeof mediaType === "string" ? mediaType.trim().toLowerCase() : "";
  if (!IMAGE_TYPES.includes(type)) throw unsupported(field, `media type ${type === "" ? "(none)" : type}`);
  return type;
}

/** An image block from inline base64 `data` of `mediaType`. */
function inlineImage(data: string, mediaType: string, field: string): Read {
  if (data === "" || !BASE64.test(data)) throw new Problem("invalid_body", "the image data is not base64", field);
  return { type: "image", block: { type: "image", data, mimeType: mediaType }, url: false };
}

/** An image block named by `url` (https only: the provider fetches it, the server never does). */
function urlImage(url: string, mediaType: string, field: string): Read {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Problem("invalid_body", "the image URL does not parse", field);
  }
  if (parsed.protocol !== "https:") throw unsupported(field, `a ${parsed.protocol} URL`);
  if (url.length > MAX_URL_CHARS)
    throw new Problem("invalid_body", `an image URL is at most ${MAX_URL_CHARS} characters`, field);
  return { type: "image", block: { type: "image", data: urlImageData(url), mimeType: mediaType }, url: true };
}

/** An AI SDK `file` part: `{ type: "file", mediaType, url, filename? }`, `url` a data URL or an https URL. */
function fileRead(part: Readonly<Record<string, unknown>>, field: string): Read {
  const url = typeof part["url"] === "string" ? part["url"] : "";
  const data = DATA_URL.exec(url);
  if (data !== null) {
    // The data URL's own type names the bytes; the part's must agree that they are an image.
    const mediaType = imageType(data[1], field);
    imageType(part["mediaType"] ?? data[1], field);
    if (!(data[2] ?? "").split(";").includes("base64")) throw unsupported(field, "a data URL that is not base64");
    return inlineImage(data[3] ?? "", mediaType, field);
  }
  return urlImage(url, imageType(part["mediaType"], field), field);
}

/** An AG-UI media part's source: `data` (base64), `url`, or a provider's `file` id (refused). */
function sourceRead(part: Readonly<Record<string, unknown>>, field: string): Read {
  const source = record(part["source"]);
  if (source === undefined) throw new Problem("invalid_body", "a media part has a source", `${field}.source`);
  const value = typeof source["value"] === "string" ? source["value"] : "";
  switch (source["type"]) {
    case "data":
      return inlineImage(value, imageType(source["mimeType"], field), field);
    case "url":
      // A URL source may leave its type out; the provider reads it from the response.
      return urlImage(
        value,
        source["mimeType"] === undefined ? "image/*" : imageType(source["mimeType"], field),
        field,
      );
    default:
      throw unsupported(field, `a ${String(source["type"])} source`);
  }
}

/**
 * The content of the reads, and the caps: images (413 naming the part that crosses it) and the whole message (413
 * naming `at`, the message's parts).
 */
function contentOf(reads: readonly { readonly read: Read; readonly field: string }[], at: string): ReadContent {
  const blocks: (TextContent | ImageContent)[] = [];
  const images: { field: string; url: boolean }[] = [];
  let chars = 0;
  for (const { read, field } of reads) {
    switch (read.type) {
      case "text": {
        const last = blocks[blocks.length - 1];
        if (last?.type === "text") blocks[blocks.length - 1] = { type: "text", text: last.text + read.text };
        else blocks.push({ type: "text", text: read.text });
        break;
      }
      case "image":
        if (!read.url) {
          chars += read.block.data.length;
          if (chars > MAX_IMAGE_CHARS)
            throw new Problem(
              "payload_too_large",
              `a message carries at most ${MAX_IMAGE_CHARS} characters of base64 images; send a smaller image or an https URL`,
              field,
            );
        }
        blocks.push(read.block);
        images.push({ field, url: read.url });
        break;
      case "skip":
        break;
      default: {
        const never: never = read;
        return never;
      }
    }
  }
  const text = blocks.map((block) => (block.type === "text" ? block.text : "")).join("");
  const bytes =
    new TextEncoder().encode(text).length + blocks.reduce((n, b) => n + (b.type === "image" ? b.data.length : 0), 0);
  if (bytes > MAX_MESSAGE_BYTES)
    throw new Problem(
      "payload_too_large",
      `a user message carries at most ${MAX_MESSAGE_BYTES} bytes of text and images in all; send less`,
      at,
    );
  return { input: images.length === 0 ? text : blocks, text, images };
}

/**
 * A UI message's parts (`at`: the message's field, `messages[2]`): text parts in order, `file` parts as images, the
 * rest (`step-start`, `data-*`, sources) carry nothing to the model.
 */
export function readUiParts(parts: readonly Readonly<Record<string, unknown>>[], at: string): ReadContent {
  return contentOf(
    parts.map((part, p) => {
      const field = `${at}.parts[${p}]`;
      if (part["type"] === "text")
        return { field, read: { type: "text", text: typeof part["text"] === "string" ? part["text"] : "" } };
      if (part["type"] === "file") return { field, read: fileRead(part, field) };
      return { field, read: { type: "skip" } };
    }),
    `${at}.parts`,
  );
}

/** An AG-UI user message's content (`at`: its field, `messages.3.content`): a string, or text and media parts. */
export function readAgUiContent(
  content: string | readonly Readonly<Record<string, unknown>>[],
  at: string,
): ReadContent {
  if (typeof content === "string") return contentOf([{ field: at, read: { type: "text", text: content } }], at);
  return contentOf(
    content.map((part, p) => {
      const field = `${at}.${p}`;
      switch (part["type"]) {
        case "text":
          return { field, read: { type: "text", text: typeof part["text"] === "string" ? part["text"] : "" } };
        case "image":
        case "document":
          return { field, read: sourceRead(part, field) };
        default:
          throw unsupported(field, `a ${String(part["type"])} part`);
      }
    }),
    at,
  );
}

/** The images of a user message's content, in order, as one comparable string (an edit may change only them). */
export function imagesKey(content: string | readonly (TextContent | ImageContent)[]): string {
  if (typeof content === "string") return "";
  return JSON.stringify(content.flatMap((block) => (block.type === "image" ? [[block.mimeType, block.data]] : [])));
}

/** The model a conversation generates with, as the check needs it. */
export interface ModelInputs {
  /** `provider/model`. */
  readonly id: string;
  readonly api: string;
  readonly input: readonly string[];
}

/**
 * Refuse (415 naming the first image's part and the model) images for a model that does not take them, and URL images
 * for a model whose API is not sent URLs.
 */
export function checkModelTakes(model: ModelInputs, read: ReadContent): void {
  const first = read.images[0];
  if (first === undefined) return;
  if (!model.input.includes("image"))
    throw new Problem(
      "unsupported_media_type",
      `model ${model.id} takes no images; send text, or use a model whose input lists "image" (GET /v1/models)`,
      first.field,
    );
  const url = read.images.find((image) => image.url);
  if (url !== undefined && !URL_IMAGE_APIS.includes(model.api))
    throw new Problem(
      "unsupported_media_type",
      `model ${model.id} (API ${model.api}) is sent images inline only; send the image as base64 data`,
      url.field,
    );
}

/** A user entry's content as the AI SDK's `file` parts, in order after its text. */
export type UiFilePart = { readonly type: "file"; readonly mediaType: string; readonly url: string };

/** The stored image blocks of a user message as `file` parts (a data URL, or the URL it was named by). */
export function uiFileParts(content: string | readonly (TextContent | ImageContent)[]): UiFilePart[] {
  if (typeof content === "string") return [];
  return content.flatMap((block) =>
    block.type === "image"
      ? [
          {
            type: "file" as const,
            mediaType: block.mimeType,
            url: imageUrlOf(block.data) ?? `data:${block.mimeType};base64,${block.data}`,
          },
        ]
      : [],
  );
}

/** An AG-UI user message's content: the text alone, or text and image parts when it carried images. */
export type AgUiUserContent =
  | string
  | readonly (
      | { readonly type: "text"; readonly text: string }
      | {
          readonly type: "image";
          readonly source:
            | { readonly type: "data"; readonly value: string; readonly mimeType: string }
            | { readonly type: "url"; readonly value: string; readonly mimeType?: string };
        }
    )[];

export function agUiUserContent(content: string | readonly (TextContent | ImageContent)[]): AgUiUserContent {
  if (typeof content === "string") return content;
  if (!content.some((block) => block.type === "image"))
    return content.map((block) => (block.type === "text" ? block.text : "")).join("");
  return content.map((block) => {
    if (block.type === "text") return { type: "text" as const, text: block.text };
    const url = imageUrlOf(block.data);
    return {
      type: "image" as const,
      source:
        url === undefined
          ? { type: "data" as const, value: block.data, mimeType: block.mimeType }
          : { type: "url" as const, value: url, ...(block.mimeType === "image/*" ? {} : { mimeType: block.mimeType }) },
    };
  });
}

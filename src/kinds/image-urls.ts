/**
 * Images a user message names by an `https` URL (docs/frontends.md "Images"): passed to the provider as a URL, never
 * fetched by the server. pi-ai's `ImageContent` carries inline data only (`data`, base64, and `mimeType`), and each
 * provider serializes it inline (OpenAI: a `data:` URL in `image_url`; Anthropic: a `base64` source). So a URL image is
 * stored as an `ImageContent` whose `data` is `url:` and the URL (never valid base64: base64 has no `:`), and the
 * attempt's `onPayload` (model-request.ts) rewrites what pi-ai serialized from it into the provider's URL form just
 * before the request is sent:
 *
 *   openai-completions   `image_url.url: "data:{type};base64,url:{url}"`  -> `image_url.url: "{url}"`
 *   openai-responses     `image_url: "data:{type};base64,url:{url}"`      -> `image_url: "{url}"`
 *   anthropic-messages   `source: { type: "base64", data: "url:{url}" }`  -> `source: { type: "url", url: "{url}" }`
 *
 * Only the APIs in `URL_IMAGE_APIS` take one; the frontends refuse a URL image for any other model before anything is
 * written (frontends/content-parts.ts).
 */

/** The `data` of a URL image starts with this. */
export const URL_IMAGE_PREFIX = "url:";

/** The model APIs whose requests `withImageUrls` rewrites (and the built-in echo model, which reads no wire). */
export const URL_IMAGE_APIS: readonly string[] = [
  "openai-completions",
  "openai-responses",
  "azure-openai-responses",
  "anthropic-messages",
  "echo",
];

/** The `data` a URL image is stored with. */
export function urlImageData(url: string): string {
  return `${URL_IMAGE_PREFIX}${url}`;
}

/** The URL of an image block stored by `urlImageData` (undefined: inline data). */
export function imageUrlOf(data: string): string | undefined {
  return data.startsWith(URL_IMAGE_PREFIX) ? data.slice(URL_IMAGE_PREFIX.length) : undefined;
}

const DATA_URL = /^data:[^;,]+;base64,url:(https:\/\/.+)$/s;

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/**
 * The provider payload with every URL image in its URL form (see the module comment); undefined when it holds none
 * (pi-ai's `onPayload` then sends the payload as it is).
 */
export function withImageUrls(payload: unknown): unknown {
  let changed = false;
  const walk = (value: unknown): unknown => {
    if (typeof value === "string") {
      const match = DATA_URL.exec(value);
      if (match === null) return value;
      changed = true;
      return match[1];
    }
    if (Array.isArray(value)) {
      let out: unknown[] | undefined;
      value.forEach((item, i) => {
        const next = walk(item);
        if (next !== item) (out ??= [...value])[i] = next;
      });
      return out ?? value;
    }
    if (!isRecord(value)) return value;
    // Anthropic's inline image source.
    if (value["type"] === "base64" && typeof value["data"] === "string") {
      const url = imageUrlOf(value["data"]);
      if (url?.startsWith("https://") === true) {
        changed = true;
        return { type: "url", url };
      }
    }
    let out: Record<string, unknown> | undefined;
    for (const [key, item] of Object.entries(value)) {
      const next = walk(item);
      if (next !== item) (out ??= { ...value })[key] = next;
    }
    return out ?? value;
  };
  const next = walk(payload);
  return changed ? next : undefined;
}

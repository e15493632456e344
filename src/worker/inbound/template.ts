/**
 * What an inbound delivery becomes as input: the endpoint's template rendered with the payload (the model sees that
 * text, never the payload: the payload is kept in the user entry's data for operators, `inboundData`); without a
 * template, the payload pretty-printed.
 *
 * Template syntax, deliberately small (no code, no helpers, no conditions or loops):
 *
 *   {{ path }}   a path of dot-separated names into the payload; a number indexes an array
 *                (`{{action}} on {{repository.full_name}}: {{issue.title}}`, `{{commits.0.id}}`).
 *                Whitespace inside the braces is allowed.
 *
 * A string renders as itself, a number or boolean as its JSON text, an object or array as compact JSON;
 * a missing path or `null` renders empty. Text outside `{{ }}` is kept as written. Rendered text and
 * the attached payload are each cut at INBOUND_INPUT_LIMIT bytes (UTF-8) with a marker.
 */
import type { UserInput } from "../../core/entries.js";
import type { JsonObject, JsonValue } from "../../storage/records.js";

/** The longest rendered text and the longest attached payload, bytes of UTF-8 (marker included). */
export const INBOUND_INPUT_LIMIT = 16 * 1024;

/** What ends a text that was cut. */
export const CUT_MARKER = "\n… (cut at 16 KB)";

const encoder = new TextEncoder();

function utf8Length(codePoint: number): number {
  if (codePoint < 0x80) return 1;
  if (codePoint < 0x800) return 2;
  if (codePoint < 0x10000) return 3;
  return 4;
}

/**
 * `text` unchanged when it fits in INBOUND_INPUT_LIMIT bytes, else its longest prefix (whole characters) and the
 * marker.
 */
function cut(text: string): string {
  if (encoder.encode(text).length <= INBOUND_INPUT_LIMIT) return text;
  const room = INBOUND_INPUT_LIMIT - encoder.encode(CUT_MARKER).length;
  let bytes = 0;
  let end = 0;
  for (const char of text) {
    const size = utf8Length(char.codePointAt(0) ?? 0);
    if (bytes + size > room) break;
    bytes += size;
    end += char.length;
  }
  return text.slice(0, end) + CUT_MARKER;
}

function isArray(value: JsonValue): value is readonly JsonValue[] {
  return Array.isArray(value);
}

function isObject(value: JsonValue): value is JsonObject {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** The value at a dot-separated path of the payload (a number indexes an array); undefined when absent. */
export function lookup(payload: JsonValue, path: string): JsonValue | undefined {
  if (path === "") return undefined;
  let value: JsonValue | undefined = payload;
  for (const segment of path.split(".")) {
    if (value === undefined) return undefined;
    if (isArray(value)) {
      value = /^(?:0|[1-9][0-9]*)$/.test(segment) ? value[Number(segment)] : undefined;
    } else if (isObject(value)) {
      value = Object.hasOwn(value, segment) ? value[segment] : undefined;
    } else {
      return undefined;
    }
  }
  return value;
}

function show(value: JsonValue | undefined): string {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") return value;
  return JSON.stringify(value);
}

/** The template with every `{{ path }}` replaced by the payload's value there (see the module comment). */
export function renderTemplate(template: string, payload: JsonValue): string {
  return cut(template.replace(/\{\{\s*([^{}]*?)\s*\}\}/g, (_match, path: string) => show(lookup(payload, path))));
}

/** The payload pretty-printed (2 spaces), cut at INBOUND_INPUT_LIMIT with a marker. */
export function payloadText(payload: JsonValue): string {
  return cut(JSON.stringify(payload, null, 2));
}

/** What a template that renders nothing becomes (providers refuse empty text). */
export const EMPTY_RENDER = "(the endpoint's template rendered nothing for this delivery)";

/**
 * The input a delivery queues: with a template, the rendered text alone (the payload never reaches the model);
 * without a template, the payload as JSON.
 */
export function inboundInput(template: string | undefined, payload: JsonValue): UserInput {
  if (template === undefined) return payloadText(payload);
  const rendered = renderTemplate(template, payload);
  return rendered.trim() === "" ? EMPTY_RENDER : rendered;
}

/** The largest payload a user entry's data keeps whole, bytes of JSON; a larger one is kept as its cut text. */
export const INBOUND_DATA_PAYLOAD_BYTES = 64 * 1024;

/**
 * The user entry's `data` of a delivery (never model input, §2.1): where it came from (`source`, what the input's
 * events carry) and its payload, whole when its JSON fits INBOUND_DATA_PAYLOAD_BYTES, else pretty-printed and cut.
 */
export function inboundData(source: JsonObject, payload: JsonValue): JsonObject {
  const bytes = encoder.encode(JSON.stringify(payload)).length;
  return {
    inbound: {
      source,
      ...(bytes <= INBOUND_DATA_PAYLOAD_BYTES
        ? { payload }
        : { payloadText: payloadText(payload), payloadBytes: bytes }),
    },
  };
}

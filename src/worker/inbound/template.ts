/**
 * What an inbound delivery becomes as input: the endpoint's template
 * rendered with the payload, with the payload itself attached as JSON; without a template, the payload
 * pretty-printed.
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

function lookup(payload: JsonValue, path: string): JsonValue | undefined {
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

/**
 * The input a delivery queues: with a template, the rendered text and then the payload as JSON (two
 * text parts; the rendered part is left out when it renders empty, since providers refuse empty text);
 * without a template, the payload as JSON.
 */
export function inboundInput(template: string | undefined, payload: JsonValue): UserInput {
  const attached = payloadText(payload);
  if (template === undefined) return attached;
  const rendered = renderTemplate(template, payload);
  if (rendered.trim() === "") return [{ type: "text", text: attached }];
  return [
    { type: "text", text: rendered },
    { type: "text", text: attached },
  ];
}

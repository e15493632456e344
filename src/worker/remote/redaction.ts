/**
 * What a remote call may say about its target (docs/tools.md "What users and the model see"): a server
 * may echo what it was sent (its credentials, its own URL) in an error or a reply, and whatever a
 * transport turns into a task result or a transcript entry reaches the model, the transcript and every
 * reader of the session. A `Redactor` is built, per attempt, from the target's sealed values (an MCP
 * server's opened header values, an HTTP tool's signing secret) and its URL, and replaces in any text:
 *
 *   each whole value, the credential after an auth scheme (`Bearer xyz`: also `xyz`) and, for `Basic`,
 *   the decoded `user:pass` and both halves                               -> [redacted]
 *   the URL whole, its origin and path, its query                       -> [url]
 *   each value of its query (a key an operator put there)                -> [redacted]
 *
 * Parts shorter than MIN_PART_CHARS are left alone (replacing `a` or `42` would shred any text and hide
 * nothing worth hiding). A detail (an error's text) is redacted first and then cut to DETAIL_CHARS, so no
 * cut can leave the start of a secret behind. Used by the HTTP and MCP transports and the MCP registry.
 */
import type { RemoteReply } from "../../kinds/remote-call-state.js";
import type { JsonObject, JsonValue } from "../../storage/records.js";

/** Characters of a server's error text kept in a detail. */
export const DETAIL_CHARS = 500;

/** Shorter parts of a secret or a URL are not replaced. */
export const MIN_PART_CHARS = 4;

export const REDACTED = "[redacted]";
export const URL_MARK = "[url]";

/** What a target keeps from text that leaves the object. */
export interface RedactionSource {
  /** Sealed values as sent (header values, a signing secret). */
  readonly secrets?: readonly string[];
  /** The target's URLs (an operator's setting, possibly with keys in the query). */
  readonly urls?: readonly string[];
}

/** Replaces every sealed value, part of one and form of the target's URL in a text. */
export interface Redactor {
  (text: string): string;
}

/** A redactor for `source` (see the module comment for what it replaces). */
export function redactor(source: RedactionSource): Redactor {
  const pairs: [string, string][] = [];
  for (const url of source.urls ?? []) {
    for (const form of urlForms(url).forms) pairs.push([form, URL_MARK]);
    for (const value of urlForms(url).values) pairs.push([value, REDACTED]);
  }
  for (const secret of source.secrets ?? []) for (const part of secretParts(secret)) pairs.push([part, REDACTED]);
  // Longest first, so a value is replaced whole before any part of it is.
  const ordered = pairs
    .filter(([text]) => text.length >= MIN_PART_CHARS)
    .sort((a, b) => b[0].length - a[0].length || a[0].localeCompare(b[0]));
  return (text) => ordered.reduce((out, [find, mark]) => (out.includes(find) ? out.split(find).join(mark) : out), text);
}

/** A value and its parts: after an auth scheme the credential; for Basic the decoded `user:pass` and its halves. */
export function secretParts(value: string): string[] {
  const parts = [value];
  const scheme = /^([A-Za-z][A-Za-z0-9_-]*)\s+(\S+)$/.exec(value.trim());
  const credential = scheme?.[2]?.trim();
  if (credential !== undefined) parts.push(credential);
  if (credential !== undefined && scheme?.[1]?.toLowerCase() === "basic") {
    const decoded = decodeBase64(credential);
    if (decoded !== undefined) {
      parts.push(decoded);
      const colon = decoded.indexOf(":");
      if (colon >= 0) parts.push(decoded.slice(0, colon), decoded.slice(colon + 1));
    }
  }
  // A Standard Webhooks secret (`whsec_<base64>`): its key without the prefix too.
  if (value.startsWith("whsec_")) parts.push(value.slice("whsec_".length));
  return parts.filter((part) => part.length >= MIN_PART_CHARS);
}

/** The forms a URL takes in text (whole, normalised, origin and path, its query) and the values of its query. */
function urlForms(url: string): { readonly forms: string[]; readonly values: string[] } {
  const forms = [url];
  const values: string[] = [];
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { forms, values };
  }
  forms.push(parsed.href, `${parsed.origin}${parsed.pathname}`, `${parsed.host}${parsed.pathname}`);
  if (parsed.search.length > 1) forms.push(parsed.search.slice(1));
  for (const value of parsed.searchParams.values()) values.push(value, encodeURIComponent(value));
  return { forms, values };
}

function decodeBase64(text: string): string | undefined {
  try {
    const binary = atob(text);
    const decoded = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(
      Uint8Array.from(binary, (c) => c.charCodeAt(0)),
    );
    // Not a credential: control characters mean the base64 was something else.
    return /[\u0000-\u001f]/.test(decoded) ? undefined : decoded;
  } catch {
    return undefined;
  }
}

/** `text` redacted, then cut to `max` characters (with "..." when cut). */
export function redactedDetail(text: string, clean: Redactor, max = DETAIL_CHARS): string {
  const out = clean(text);
  return out.length > max ? `${out.slice(0, max)}...` : out;
}

/** Every string of a JSON value (and every key of its objects) redacted. */
export function redactJson(value: JsonValue, clean: Redactor): JsonValue {
  if (typeof value === "string") return clean(value);
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map((item) => redactJson(item, clean));
  const out: JsonObject = {};
  for (const [key, item] of Object.entries(value)) if (item !== undefined) out[clean(key)] = redactJson(item, clean);
  return out;
}

/**
 * A reply with nothing of its target in it: a result's output redacted (every string), a failure's detail
 * redacted and bounded, a refusal's problem redacted.
 */
export function redactReply(reply: RemoteReply, clean: Redactor): RemoteReply {
  switch (reply.type) {
    case "result":
      return { ...reply, output: redactJson(reply.output, clean) };
    case "rejected": {
      const { problem, ...rest } = reply;
      return {
        ...rest,
        detail: redactedDetail(reply.detail, clean),
        ...(problem === undefined ? {} : { problem: redactJson(problem, clean) as JsonObject }),
      };
    }
    case "failed":
    case "bad_response":
    case "timed_out":
      return { ...reply, detail: redactedDetail(reply.detail, clean) };
    case "accepted":
    case "too_large":
      return reply;
    default: {
      const never: never = reply;
      return never;
    }
  }
}

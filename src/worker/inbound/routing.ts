/**
 * Where a tenant endpoint's delivery goes (docs/integrations.md "Routing"): its `session` template rendered over the
 * payload names the session, its `route` template the thread, a chat of that session (a named pointer to a
 * conversation of its own, as the frontends name chats: session/chat-ops.ts). A rendered key that is not a name of
 * its kind is mapped by hashing: `r-` and the first 32 hex digits of its SHA-256, the readable key kept beside it
 * (the session's title and metadata, each input's `source.route`). A thread key that a chat id would read as a
 * conversation (`root`, a decimal id) is hashed too, so a route never lands on the root or on conversation 7.
 */
import type { JsonValue } from "../../storage/records.js";
import { sessionName } from "../schemas.js";
import { renderTemplate } from "./template.js";

/** A chat id: 1-128 characters `A-Z a-z 0-9 _ -` (the same alphabet as session/chat-ops.ts CHAT_ID). */
const CHAT_ALPHABET = /^[A-Za-z0-9_-]{1,128}$/;

/** What a chat id reads as a conversation rather than a name: `root` and decimal ids. */
const CONVERSATION_REF = /^(?:root|[0-9]+)$/;

/** The longest readable key kept (the longest metadata value). */
export const ROUTE_KEY_MAX = 256;

const encoder = new TextEncoder();

/** `r-` and the first 32 hex digits of the key's SHA-256. */
async function hashed(key: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(key)));
  return `r-${Array.from(digest.subarray(0, 16), (byte) => byte.toString(16).padStart(2, "0")).join("")}`;
}

/** A readable key and the name it maps to. */
export interface Routed {
  readonly key: string;
  readonly name: string;
}

/** The template rendered over the payload, trimmed; undefined when it renders nothing. */
function rendered(template: string, payload: JsonValue): string | undefined {
  const key = renderTemplate(template, payload).trim();
  return key === "" ? undefined : key;
}

/** The session a delivery goes to: the rendered key when it is a session name, else its hash. */
export async function routedSession(template: string, payload: JsonValue): Promise<Routed | undefined> {
  const key = rendered(template, payload);
  if (key === undefined) return undefined;
  return { key: key.slice(0, ROUTE_KEY_MAX), name: sessionName.safeParse(key).success ? key : await hashed(key) };
}

/** The thread (chat id) a delivery goes to: the rendered key when it is a chat name, else its hash. */
export async function routedThread(template: string, payload: JsonValue): Promise<Routed | undefined> {
  const key = rendered(template, payload);
  if (key === undefined) return undefined;
  const plain = CHAT_ALPHABET.test(key) && !CONVERSATION_REF.test(key);
  return { key: key.slice(0, ROUTE_KEY_MAX), name: plain ? key : await hashed(key) };
}

/**
 * Wire schemas of a tenant's API keys (docs/users.md "API keys"; part of the wire-schema module, so the OpenAPI
 * document takes them from here): the body of `POST /v1/api-keys`, the `{key}` of `DELETE /v1/api-keys/{key}`, and
 * what those routes answer. A key is a long-lived, revocable bearer credential of role operator or client for a
 * product's backend; its secret is answered once by the create and never again.
 */
import { z } from "zod";
import { sessionName, userActions } from "./schemas.js";

/** Live keys one tenant may hold. */
export const MAX_API_KEYS = 100;

/** What every key's secret starts with: `pe_live_`, then the tenant (base64url), `.`, the key's id, `.`, its secret. */
export const API_KEY_PREFIX = "pe_live_";

/** A key's id: `ak_` and 16 hex characters (what `GET` lists and `DELETE` names). */
export const apiKeyId = z.string().regex(/^ak_[0-9a-f]{16}$/, "an API key id is ak_ and 16 hex characters");

/** `POST /v1/api-keys`: a new key. */
export const apiKeyBody = z.strictObject({
  name: z
    .string({ error: "name is a string" })
    .min(1, "name must not be empty")
    .max(128, "name is at most 128 characters"),
  role: z.enum(["operator", "client"], { error: 'role is "operator" or "client"' }),
  /** The sessions the key may act in (as a token's `sessions` claim); absent: all of the tenant's. */
  sessions: z.array(sessionName).min(1, "sessions names at least one session").max(100).optional(),
  /** The actions of the user tokens the key mints (at most these); absent: any. */
  act: z.array(z.enum(userActions)).min(1).max(userActions.length).optional(),
  /** When the key stops working (ISO 8601, in the future); absent: it works until it is deleted. */
  expiresAt: z.iso.datetime({ offset: true, error: "expiresAt is an ISO 8601 time" }).optional(),
});
export type ApiKeyBody = z.input<typeof apiKeyBody>;

/** A key as `GET` lists it: never its secret. */
export const apiKeyOut = z.strictObject({
  id: z.string(),
  name: z.string(),
  prefix: z.string().describe("The start of the secret, to recognise it (never enough to use it)"),
  role: z.enum(["operator", "client"]),
  sessions: z.array(z.string()).optional(),
  act: z.array(z.enum(userActions)).optional(),
  createdAt: z.string().describe("ISO 8601"),
  lastUsedAt: z.string().nullable().describe("ISO 8601; recorded at most once an hour per key"),
  expiresAt: z.string().nullable().describe("ISO 8601; null: until deleted"),
});
/** The create's answer: the key and its secret (answered this once). */
export const apiKeyCreated = apiKeyOut.extend({
  secret: z.string().describe("The bearer credential: shown once, only a hash of it is stored"),
});
export const apiKeyList = z.strictObject({ items: z.array(apiKeyOut) });
export const apiKeyDeleted = z.strictObject({ id: z.string(), deleted: z.literal(true) });

export type ApiKeyResponse = z.infer<typeof apiKeyOut>;
export type ApiKeyCreatedResponse = z.infer<typeof apiKeyCreated>;

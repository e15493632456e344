/**
 * A tenant's API keys (docs/users.md "API keys"), kept by its DirectoryObject (directory/api-keys.ts); a request's key
 * is verified by identity/api-keys.ts.
 *
 *   POST   /v1/api-keys       (operator) { name, role, sessions?, act?, expiresAt? } -> 201 the key and its secret (once)
 *   GET    /v1/api-keys       (operator) { items }: never a secret
 *   DELETE /v1/api-keys/:key  (operator) { id, deleted: true }; 404 not_found
 *
 * A key never reaches more than the credential that created it: a creator that names its sessions creates keys within
 * them, and one whose `act` bounds the user tokens it mints creates keys within that `act` (403 naming the field).
 * Refusals are decided before anything is written.
 */
import { Hono } from "hono";
import {
  apiKeyBody,
  apiKeyId,
  MAX_API_KEYS,
  type ApiKeyCreatedResponse,
  type ApiKeyResponse,
} from "../../../api/api-keys.js";
import { refuseOutsideClaim, requires, type AppEnv } from "../../identity/auth.js";
import type { ApiKeyRecord } from "../../directory/api-keys.js";
import { directoryStub } from "../../directory/object.js";
import { forgetApiKey, newApiKey, secretHash } from "../../identity/api-keys.js";
import { hostClock } from "../../platform/host-config.js";
import { Problem } from "../../problems.js";
import { noQuery, userActions, type Claims } from "../../schemas.js";
import { body, query } from "./shared.js";

const iso = (ms: number): string => new Date(ms).toISOString();

function view(record: ApiKeyRecord): ApiKeyResponse {
  return {
    id: record.id,
    name: record.name,
    prefix: record.prefix,
    role: record.role,
    ...(record.sessions === undefined ? {} : { sessions: [...record.sessions] }),
    ...(record.act === undefined ? {} : { act: record.act.filter(isAction) }),
    createdAt: iso(record.createdAt),
    lastUsedAt: record.lastUsedAt === null ? null : iso(record.lastUsedAt),
    expiresAt: record.expiresAt === null ? null : iso(record.expiresAt),
  };
}

function isAction(value: string): value is (typeof userActions)[number] {
  return (userActions as readonly string[]).includes(value);
}

/** A key's `act` within its creator's: a creator whose `act` bounds what it mints passes the bound on. */
function boundedAct(
  creator: Claims,
  wanted: readonly (typeof userActions)[number][] | undefined,
): readonly string[] | undefined {
  if (creator.act === undefined) return wanted;
  const outside = (wanted ?? userActions).filter((action) => !(creator.act ?? []).includes(action));
  if (outside.length > 0) {
    throw new Problem(
      "forbidden",
      `this credential mints only ${creator.act.join(", ")}; a key it creates may not have ${outside.join(", ")}`,
      "act",
    );
  }
  return wanted ?? creator.act;
}

export const apiKeyRoutes = new Hono<AppEnv>();

apiKeyRoutes.post("/", requires("keys"), async (c) => {
  query(c, noQuery);
  const wanted = await body(c, apiKeyBody);
  const claims = c.get("claims");
  const now = hostClock().now();
  const expiresAt = wanted.expiresAt === undefined ? null : Date.parse(wanted.expiresAt);
  if (expiresAt !== null && expiresAt <= now)
    throw new Problem("invalid_body", "expiresAt: a time in the future", "expiresAt");
  // Never more than the creator reaches: its sessions, and the actions it may mint.
  if (claims.sessions !== undefined && wanted.sessions === undefined)
    throw new Problem(
      "forbidden",
      `this credential acts only in ${claims.sessions.join(", ")}: name the key's sessions among them`,
      "sessions",
    );
  refuseOutsideClaim(claims, wanted.sessions);
  const act = boundedAct(claims, wanted.act);
  const sessions = wanted.sessions === undefined ? undefined : [...new Set(wanted.sessions)];
  const key = newApiKey(claims.tenant);
  const outcome = await directoryStub(c.env, claims.tenant).createApiKey(
    key.id,
    {
      name: wanted.name,
      prefix: key.prefix,
      hash: await secretHash(key.secret),
      role: wanted.role,
      ...(sessions === undefined ? {} : { sessions }),
      ...(act === undefined ? {} : { act: [...new Set(act)] }),
      expiresAt,
    },
    MAX_API_KEYS,
  );
  if (outcome.type === "too_many")
    throw new Problem("conflict", `a tenant holds at most ${outcome.limit} API keys; delete one first`, "name");
  const created: ApiKeyCreatedResponse = { ...view(outcome.record), secret: key.secret };
  return c.json(created, 201);
});

apiKeyRoutes.get("/", requires("keys"), async (c) => {
  query(c, noQuery);
  const items = await directoryStub(c.env, c.get("claims").tenant).listApiKeys();
  return c.json({ items: items.map(view) });
});

apiKeyRoutes.delete("/:key", requires("keys"), async (c) => {
  query(c, noQuery);
  const id = c.req.param("key") ?? "";
  // Only an id is quoted back: a secret pasted here by mistake is not.
  if (!apiKeyId.safeParse(id).success)
    throw new Problem("not_found", "the tenant has no such API key (an id is ak_ and 16 hex characters)", "key");
  const notFound = new Problem("not_found", `the tenant has no API key ${id}`, "key");
  const tenant = c.get("claims").tenant;
  if (!(await directoryStub(c.env, tenant).deleteApiKey(id))) throw notFound;
  forgetApiKey(tenant, id);
  return c.json({ id, deleted: true as const });
});

/**
 * `POST /v1/tokens` (operator): mint a `user` token for one of the product's end users (docs/users.md):
 * `{ sub, act?, sessions?, ttlSeconds? }` → 201 `{ token, expiresAt }`, HS256 with JWT_SECRET, the
 * operator's tenant, a lifetime of `ttlSeconds` (default and maximum one hour, never past the
 * deployment's maximum token lifetime). Minting never grants more than the minting token reaches: an operator token
 * naming its sessions mints tokens bounded to them (identity/user-access.ts `mintedGrants`), and an API key with an
 * `act` mints tokens with at most those actions (403 naming `act` otherwise; absent: the key's).
 */
import { Hono } from "hono";
import { sign } from "hono/jwt";
import { jwtSecret, maxTokenLifetime, requires, type AppEnv } from "../../identity/auth.js";
import { mintTokenBody, noQuery, USER_TOKEN_MAX_SECONDS } from "../../schemas.js";
import { mintedGrants } from "../../identity/user-access.js";
import { body, query } from "./shared.js";
import { Problem } from "../../problems.js";

export const tokenRoutes = new Hono<AppEnv>();

tokenRoutes.post("/", requires("tokens"), async (c) => {
  query(c, noQuery);
  const wanted = await body(c, mintTokenBody);
  const minter = c.get("claims");
  const grants = mintedGrants(minter, wanted.sessions);
  const bound = minter.role === "user" ? undefined : minter.act;
  const outside = bound === undefined ? [] : (wanted.act ?? []).filter((action) => !bound.includes(action));
  if (outside.length > 0)
    throw new Problem("forbidden", `this credential mints only ${(bound ?? []).join(", ")} tokens`, "act");
  const act = wanted.act ?? bound;
  const now = Math.floor(Date.now() / 1000);
  const exp =
    now + Math.min(wanted.ttlSeconds ?? USER_TOKEN_MAX_SECONDS, USER_TOKEN_MAX_SECONDS, maxTokenLifetime(c.env));
  const claims = {
    tenant: c.get("claims").tenant,
    role: "user",
    sub: wanted.sub,
    ...(act === undefined ? {} : { act: [...new Set(act)] }),
    ...grants,
    iat: now,
    exp,
  };
  const token = await sign(claims, jwtSecret(c.env), "HS256");
  return c.json({ token, expiresAt: new Date(exp * 1000).toISOString() }, 201);
});

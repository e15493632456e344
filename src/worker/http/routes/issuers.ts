/**
 * A tenant's identity providers (docs/users.md "Identity providers"), kept by its DirectoryObject
 * (directory/issuers.ts); their tokens are verified by identity/issuer-tokens.ts.
 *
 *   PUT    /v1/issuers/:issuer  (operator) { issuer, jwksUri, audience, subClaim? } -> 201 created / 200 replaced
 *   GET    /v1/issuers        (operator) { items }
 *   GET    /v1/issuers/:issuer  (operator) the registration; 404 issuer_not_found
 *   DELETE /v1/issuers/:issuer  (operator) { name, deleted: true }; 404 issuer_not_found
 *
 * A JSON body that is not a valid registration, and a name a PUT may not use, are 422 `invalid_issuer`
 * naming the field; refusals are decided before anything is written. This isolate forgets its copy of
 * the registrations on every change; other isolates see it within REGISTRATIONS_TTL_MS.
 */
import { Hono } from "hono";
import { z } from "zod";
import { issuerBody, issuerName, MAX_ISSUERS, type IssuerResponse } from "../../../api/issuers.js";
import { requires, type AppEnv } from "../../identity/auth.js";
import type { IssuerRecord } from "../../directory/issuers.js";
import { directoryStub } from "../../directory/object.js";
import { forgetRegistrations } from "../../identity/issuer-tokens.js";
import { Problem } from "../../problems.js";
import { isDevelopment } from "../../env.js";
import { noQuery, parse } from "../../schemas.js";
import { body, query, type AppContext } from "./shared.js";

const iso = (ms: number): string => new Date(ms).toISOString();

function view(record: IssuerRecord): IssuerResponse {
  return { ...record, createdAt: iso(record.createdAt), updatedAt: iso(record.updatedAt) };
}

/** `jwksUri` is https:, or http: where ENVIRONMENT is development (`npm start`, the tests). */
export function checkJwksUri(jwksUri: string, environment: string | undefined): void {
  if (new URL(jwksUri).protocol !== "https:" && !isDevelopment(environment)) {
    throw new Problem(
      "invalid_issuer",
      "jwksUri: an https: URL (plain http: only where ENVIRONMENT is development)",
      "jwksUri",
    );
  }
}

/** The `:issuer` (its name) of a read or delete: a name no PUT accepts names no registration. */
function nameParam(c: AppContext): string {
  const name = c.req.param("issuer") ?? "";
  if (!issuerName.safeParse(name).success) throw notFound(name);
  return name;
}

function notFound(name: string): Problem {
  return new Problem("issuer_not_found", `the tenant has no identity provider ${JSON.stringify(name)}`);
}

export const issuerRoutes = new Hono<AppEnv>();

issuerRoutes.put("/:issuer", requires("issuers"), async (c) => {
  query(c, noQuery);
  const name = parse(issuerName, c.req.param("issuer") ?? "", "invalid_issuer", "name");
  const b = parse(issuerBody, await body(c, z.unknown()), "invalid_issuer");
  checkJwksUri(b.jwksUri, c.env.ENVIRONMENT);
  const tenant = c.get("claims").tenant;
  const outcome = await directoryStub(c.env, tenant).putIssuer(
    name,
    { issuer: b.issuer, jwksUri: b.jwksUri, audience: b.audience, subClaim: b.subClaim ?? "sub" },
    MAX_ISSUERS,
  );
  switch (outcome.type) {
    case "stored":
      forgetRegistrations(tenant);
      return c.json(view(outcome.record), outcome.created ? 201 : 200);
    case "duplicate":
      throw new Problem(
        "invalid_issuer",
        `audience: identity provider ${outcome.other} already accepts this issuer and audience`,
        "audience",
      );
    case "too_many":
      throw new Problem("conflict", `a tenant has at most ${outcome.limit} identity providers; delete one first`);
    default: {
      const never: never = outcome;
      return never;
    }
  }
});

issuerRoutes.get("/", requires("issuers"), async (c) => {
  query(c, noQuery);
  const items = await directoryStub(c.env, c.get("claims").tenant).listIssuers();
  return c.json({ items: items.map(view) });
});

issuerRoutes.get("/:issuer", requires("issuers"), async (c) => {
  query(c, noQuery);
  const name = nameParam(c);
  const record = await directoryStub(c.env, c.get("claims").tenant).getIssuer(name);
  if (record === undefined) throw notFound(name);
  return c.json(view(record));
});

issuerRoutes.delete("/:issuer", requires("issuers"), async (c) => {
  query(c, noQuery);
  const name = nameParam(c);
  const tenant = c.get("claims").tenant;
  if (!(await directoryStub(c.env, tenant).deleteIssuer(name))) throw notFound(name);
  forgetRegistrations(tenant);
  return c.json({ name, deleted: true as const });
});

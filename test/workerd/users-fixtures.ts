/**
 * Fixtures for tests of end users (docs/users.md): a user token creates sessions only from one of
 * the tenant's templates, so a test that creates user sessions first puts a template (as the
 * operator) and names it in the user's create body.
 */
import { call, token } from "./http-fixtures.js";

/** The template the user tests create from. */
export const USER_TEMPLATE = "end-user";

/** The echo model, with the title and labels left to users. */
export const USER_TEMPLATE_BODY: Readonly<Record<string, unknown>> = {
  model: "echo",
  userSettable: ["title", "labels"],
};

/** Put (create or replace) `name` in `tenant` as the operator; answers its name. */
export async function putUserTemplate(
  tenant: string,
  name = USER_TEMPLATE,
  definition: Readonly<Record<string, unknown>> = USER_TEMPLATE_BODY,
): Promise<string> {
  const response = await call("PUT", `/v1/templates/${name}`, {
    token: await token(tenant, "operator"),
    body: definition,
  });
  if (response.status !== 200 && response.status !== 201)
    throw new Error(`template ${name}: ${response.status} ${await response.text()}`);
  return name;
}

/** A user's create body: `body` from `template`. */
export function fromTemplate(
  body: Readonly<Record<string, unknown>> = {},
  template = USER_TEMPLATE,
): Record<string, unknown> {
  return { template, ...body };
}

/** The `role` claim of a JWT (unverified: the test signed it). */
export function roleOf(jwt: string): unknown {
  const payload = jwt.split(".")[1] ?? "";
  return (JSON.parse(atob(payload.replaceAll("-", "+").replaceAll("_", "/"))) as Record<string, unknown>)["role"];
}

/** The body a create sends with `jwt`: a user token's names the template, others' are `body` as is. */
export function createBody(
  jwt: string,
  body: Readonly<Record<string, unknown>> = {},
  template = USER_TEMPLATE,
): Record<string, unknown> {
  return roleOf(jwt) === "user" ? fromTemplate(body, template) : { ...body };
}

function hex(bytes: ArrayBuffer): string {
  return [...new Uint8Array(bytes)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

async function hmac(key: ArrayBuffer | Uint8Array, text: string): Promise<ArrayBuffer> {
  const imported = await crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return crypto.subtle.sign("HMAC", imported, new TextEncoder().encode(text));
}

/** An erasure's hash of `sub`, version 1 (records written before the keyed hash): SHA-256, hex. */
export async function plainHashOf(sub: string): Promise<string> {
  return hex(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(sub)));
}

/**
 * An erasure's hash of `sub`, version 2, as docs/operations.md states it (computed here, not with the Worker's code):
 * HMAC-SHA-256(HMAC-SHA-256(SUBJECT_HASH_KEY, "pico-edge subject-hash:" + tenant), sub), hex.
 */
export async function keyedHashOf(secret: string, tenant: string, sub: string): Promise<string> {
  const tenantKey = await hmac(new TextEncoder().encode(secret), `pico-edge subject-hash:${tenant}`);
  return hex(await hmac(tenantKey, sub));
}

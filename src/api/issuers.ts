/**
 * Wire schemas of a tenant's identity providers (docs/users.md "Identity providers"; part of the
 * wire-schema module, so the OpenAPI document takes them from here): the `{name}` of
 * `/v1/issuers/{name}`, the body of its PUT, and what those routes answer. Whether plain `http:` is
 * allowed for `jwksUri` depends on the deployment, so the route checks that (src/worker/http/routes/issuers.ts).
 */
import { z } from "zod";

/** Identity providers one tenant may register. */
export const MAX_ISSUERS = 20;

export const issuerName = z
  .string()
  .regex(/^[a-zA-Z0-9-]{1,32}$/, "an issuer name is 1-32 characters of a-z A-Z 0-9 -");

function protocolOf(url: string): string | undefined {
  try {
    return new URL(url).protocol;
  } catch {
    return undefined;
  }
}

const jwksUri = z
  .string({ error: "jwksUri is a string" })
  .max(2048, "jwksUri is at most 2,048 characters")
  .refine((url) => ["https:", "http:"].includes(protocolOf(url) ?? ""), "jwksUri is an absolute https: URL")
  .refine(
    (url) => protocolOf(url) === undefined || (new URL(url).username === "" && new URL(url).password === ""),
    "jwksUri carries no credentials",
  );

/** A claim's name: the provider's `sub` by default, or another claim that names the end user. */
const claimName = z
  .string({ error: "subClaim is a string" })
  .regex(/^[\x21-\x7e]{1,256}$/, "subClaim is 1-256 visible ASCII characters");

/** PUT /v1/issuers/{name}. */
export const issuerBody = z.strictObject({
  /** The exact `iss` of the provider's tokens. */
  issuer: z
    .string({ error: "issuer is a string" })
    .min(1, "issuer must not be empty")
    .max(512, "issuer is at most 512 characters"),
  jwksUri,
  /** The `aud` the provider's tokens carry for this deployment (one of the token's audiences). */
  audience: z
    .string({ error: "audience is a string" })
    .min(1, "audience must not be empty")
    .max(512, "audience is at most 512 characters"),
  subClaim: claimName.optional(),
});
export type IssuerBody = z.output<typeof issuerBody>;

const time = z.string().describe("ISO 8601");

export const issuerOut = z.strictObject({
  name: z.string(),
  issuer: z.string(),
  jwksUri: z.string(),
  audience: z.string(),
  subClaim: z.string().describe('The claim that names the end user (default "sub")'),
  createdAt: time,
  updatedAt: time,
});
export const issuerList = z.strictObject({ items: z.array(issuerOut) });
export const issuerDeleted = z.strictObject({ name: z.string(), deleted: z.literal(true) });

export type IssuerResponse = z.infer<typeof issuerOut>;
export type IssuerListResponse = z.infer<typeof issuerList>;

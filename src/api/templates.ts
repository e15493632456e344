/**
 * Wire schemas of a tenant's session templates (docs/users.md "Templates"): the body of
 * `PUT /v1/templates/{name}` (the session PUT's fields plus `userSettable`), the records the routes
 * answer, and the revocation answer of `POST /v1/users/{sub}/revoke`. A template fixes what the agent
 * is (model, tools, profile, thinking, ...) for the sessions users create from it; `userSettable`
 * names the fields a user token may still set at create or PATCH.
 */
import { z } from "zod";
import { retention, sessionFields, templateName, userVariables } from "./schemas.js";

export { templateName };

/** The fields a template holds, each of which it may mark user-settable. */
export const TEMPLATE_FIELDS = [
  "model",
  "thinking",
  "selectedTools",
  "profile",
  "budgetMs",
  "onInterrupt",
  "title",
  "labels",
  "metadata",
] as const;
export type TemplateField = (typeof TEMPLATE_FIELDS)[number];

const fieldName = z.enum(TEMPLATE_FIELDS, { error: `a user-settable field is one of ${TEMPLATE_FIELDS.join(", ")}` });

/** `PUT /v1/templates/{name}`: the session PUT's fields, plus the ones a user may set (default: none). */
export const templateBody = sessionFields.extend({
  userSettable: z
    .array(fieldName)
    .max(TEMPLATE_FIELDS.length)
    .refine((fields) => new Set(fields).size === fields.length, "userSettable names each field at most once")
    .optional(),
  /** The variables a user may set at create (default: none); `variables` holds the defaults. */
  userVariables: userVariables.optional(),
  /**
   * Sessions created from it are deleted this long after their last activity (docs/operations.md "Retention");
   * null: they never are, whatever the tenant's default; absent: the tenant's default.
   */
  retention: retention.nullable().optional(),
});
export type TemplateBody = z.infer<typeof templateBody>;

/** What a template stores: its fields with `userSettable` filled in. */
export type TemplateDefinition = Omit<TemplateBody, "userSettable"> & {
  readonly userSettable: readonly TemplateField[];
};

export const templateRecordOut = templateBody.extend({
  name: z.string(),
  version: z.number().int().describe("The template's version: its ETag is this number in quotes"),
  updatedAt: z.number().int().describe("Epoch ms of the last change"),
  userSettable: z.array(fieldName),
});
export type TemplateRecord = z.infer<typeof templateRecordOut>;

export const templatesListResponse = z.strictObject({ items: z.array(templateRecordOut) });
export const templateDeletedResponse = z.strictObject({ name: z.string(), deleted: z.literal(true) });

/** A user's subject in a path (`/v1/users/{sub}/revoke`): the `sub` claim of its tokens. */
export const userSub = z.string().min(1, "sub is 1-128 characters").max(128, "sub is 1-128 characters");

/** `POST /v1/users/{sub}/revoke`: tokens of `sub` issued before `revokedAt` (Unix seconds) are refused. */
export const revokeResponse = z.strictObject({
  sub: z.string(),
  revokedAt: z.number().int().describe("Unix seconds: this user's tokens with an earlier iat (or none) are refused"),
  sessions: z.number().int().describe("Sessions with this user's open watches that were told to close them"),
  unreached: z
    .array(z.string())
    .describe(
      "Sessions that could not be reached (their watches still close at their token's expiry); revoke again to retry",
    ),
});
export type RevokeResponse = z.infer<typeof revokeResponse>;

/** An erasure id (`er_` and 32 hex digits), as `POST /v1/users/{sub}/erase` answers it. */
export const erasureId = z.string().regex(/^er_[0-9a-f]{32}$/, "erasure is an erasure id (er_ and 32 hex digits)");

/** `POST /v1/users/{sub}/erase` and `GET /v1/erasures/{id}`: where a user's erasure stands (never the sub). */
export const erasureResponse = z.strictObject({
  id: z.string().describe("The erasure's id (never reused)"),
  subHash: z
    .string()
    .describe(
      "The user's sub hashed, hex: the only trace of who was erased. Version 2: HMAC-SHA-256 under a per-tenant key derived from SUBJECT_HASH_KEY; version 1: plain SHA-256 (erasures recorded before the keyed hash)",
    ),
  subHashVersion: z.union([z.literal(1), z.literal(2)]).describe("Which hash subHash is: 2 keyed, 1 plain SHA-256"),
  status: z.enum(["running", "done"]),
  phase: z
    .enum(["sessions", "usage", "directory", "done"])
    .describe("What it is deleting: the user's sessions, then its usage rows, then its directory rows"),
  cutoff: z.number().int().describe("Unix seconds: the user's tokens with an earlier iat (or none) are refused"),
  sessionsFound: z.number().int().describe("Sessions of the user found so far"),
  sessionsDeleted: z.number().int(),
  sessionsRemaining: z.number().int(),
  startedAt: z.number().int().describe("Epoch ms"),
  finishedAt: z.number().int().optional().describe("Epoch ms, once done"),
});
export type ErasureResponse = z.infer<typeof erasureResponse>;

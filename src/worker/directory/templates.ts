/**
 * Session templates at the session routes (docs/users.md "Templates"): a create with `{ template }`
 * starts from the template's fields; a user token must name one and may set only the fields the
 * template marks user-settable, and later PATCHes (config, title, labels, metadata) only those. Operators and
 * clients may name a template and override any field. The session keeps the template's name, version
 * and user-settable fields from its creation (`TemplateBinding`), so a later change or deletion of the
 * template does not change what its users may do. A profile a create or PATCH names must be in the tenant's
 * catalog (`refuseUnknownProfile`).
 */
import type { TemplateField, TemplateRecord } from "../../api/templates.js";
import { TEMPLATE_FIELDS } from "../../api/templates.js";
import { MAX_VARIABLES, placeholders } from "../../api/profiles.js";
import type { Retention } from "../../api/schemas.js";
import { directoryStub } from "./object.js";
import type { Env } from "../env.js";
import { Problem } from "../problems.js";
import { MAX_METADATA_KEYS, type Claims, type SessionConfigBody } from "../schemas.js";

/** Where a session keeps its TemplateBinding (its object's KV; written when it is created). */
export const TEMPLATE_KEY = "edge.session.template";

/** What a session remembers of the template it was created from. */
export interface TemplateBinding {
  readonly name: string;
  readonly version: number;
  readonly userSettable: readonly TemplateField[];
}

/**
 * Where a new session's retention comes from (docs/operations.md "Retention"); undefined: it has none. `tenant`: the
 * tenant's default, which the session learns from the directory's acknowledgment of its first row (a create without
 * a template asks the directory nothing before it).
 */
export type RetentionSource = { readonly type: "set"; readonly retention: Retention } | { readonly type: "tenant" };

/** A create's config after its template: the fields to create with, and the binding to keep. */
export interface ResolvedConfig {
  readonly config: Omit<SessionConfigBody, "template">;
  readonly binding?: TemplateBinding;
  /** The retention the session captures at create (undefined: none). */
  readonly retention?: RetentionSource;
}

const FIELDS: ReadonlySet<string> = new Set(TEMPLATE_FIELDS);

/** The fields a body sets (those present, in the template field order). */
function setFields(body: Readonly<Record<string, unknown>>): TemplateField[] {
  return TEMPLATE_FIELDS.filter((field) => body[field] !== undefined);
}

function templateFields(record: TemplateRecord): Omit<SessionConfigBody, "template"> {
  const out: Record<string, unknown> = {};
  for (const field of TEMPLATE_FIELDS) if (record[field] !== undefined) out[field] = record[field];
  return out as Omit<SessionConfigBody, "template">;
}

/**
 * 403 naming the first field a user may not set under `binding` (none: a session from no template lets users set
 * nothing).
 */
export function refuseUserFields(binding: TemplateBinding | undefined, fields: readonly string[]): void {
  const allowed = new Set<string>(binding?.userSettable ?? []);
  for (const field of fields) {
    if (!FIELDS.has(field) || allowed.has(field)) continue;
    throw new Problem(
      "forbidden",
      binding === undefined
        ? `a user may not set ${field}: this session was not created from a template that lets users set it`
        : `a user may not set ${field}: template ${binding.name} does not mark it user-settable (user-settable: ${binding.userSettable.join(", ") || "none"})`,
      field,
    );
  }
}

/**
 * The config a session PUT creates with. A user token must name a template (422 `invalid_template`
 * naming `template`), may set only its user-settable fields (403 naming the field), and gets the
 * template's values for the rest; other roles get the template's values under their own fields.
 * An unknown template is 404 `template_not_found`. Nothing is written.
 */
export async function resolveTemplateForUser(
  env: Env,
  claims: Claims,
  body: SessionConfigBody,
): Promise<ResolvedConfig> {
  const { template, ...fields } = body;
  if (template === undefined && claims.role === "user")
    throw new Problem(
      "invalid_template",
      "template: a user token creates sessions from a template ({ template: name })",
      "template",
    );
  // Without a template, no directory call: the session learns the tenant's default retention from its first row's
  // acknowledgment. With one, one call for the template and the default (a template's own, even null, wins).
  if (template === undefined) return { config: fields, retention: { type: "tenant" } };
  const defaults = await directoryStub(env, claims.tenant).sessionDefaults(template);
  const record = defaults.template;
  if (record === undefined)
    throw new Problem("template_not_found", `the tenant has no template ${JSON.stringify(template)}`, "template");
  const binding: TemplateBinding = {
    name: record.name,
    version: record.version,
    userSettable: [...record.userSettable],
  };
  if (claims.role === "user") {
    refuseUserFields(binding, setFields(fields));
    refuseUserVariables(record, fields.variables);
    refuseReservedMetadata(fields.metadata);
  }
  // The template's variables and metadata are defaults under the body's.
  const variables = { ...record.variables, ...fields.variables };
  // The cap counts the merged set: the body's 32 and a default of the template's are 33.
  if (Object.keys(variables).length > MAX_VARIABLES)
    throw new Problem(
      "invalid_body",
      `variables: with template ${record.name}'s defaults the session would hold ${Object.keys(variables).length}; at most ${MAX_VARIABLES}`,
      "variables",
    );
  const metadata = { ...record.metadata, ...fields.metadata };
  if (Object.keys(metadata).length > MAX_METADATA_KEYS)
    throw new Problem(
      "invalid_metadata",
      `metadata: with template ${record.name}'s keys the session would hold ${Object.keys(metadata).length}; at most ${MAX_METADATA_KEYS}`,
      "metadata",
    );
  return {
    config: {
      ...templateFields(record),
      ...fields,
      ...(Object.keys(variables).length === 0 ? {} : { variables }),
      ...(Object.keys(metadata).length === 0 ? {} : { metadata }),
    },
    binding,
    ...retentionOf(record.retention, defaults.retention),
  };
}

/**
 * The retention an imported session captures: its template's (by the binding's name, as the template is now), else
 * the tenant's default (learned from the directory's acknowledgment of the session's first row, as a create without
 * a template does). One directory call when the export names a template.
 */
export async function importRetention(
  env: Env,
  tenant: string,
  binding: TemplateBinding | undefined,
): Promise<RetentionSource | undefined> {
  if (binding === undefined) return { type: "tenant" };
  const defaults = await directoryStub(env, tenant).sessionDefaults(binding.name);
  if (defaults.template === undefined) return retentionOf(undefined, defaults.retention).retention;
  return retentionOf(defaults.template.retention, defaults.retention).retention;
}

/** A template's retention wins over the tenant's default; a template's null means none. */
function retentionOf(
  own: Retention | null | undefined,
  tenant: Retention | undefined,
): { readonly retention?: RetentionSource } {
  const retention = own === undefined ? tenant : own === null ? undefined : own;
  return retention === undefined ? {} : { retention: { type: "set", retention } };
}

/** 403 naming the first variable a user may not set: the template's `userVariables` lists those it may. */
function refuseUserVariables(record: TemplateRecord, variables: Readonly<Record<string, string>> | undefined): void {
  const allowed = new Set(record.userVariables ?? []);
  for (const name of Object.keys(variables ?? {})) {
    if (allowed.has(name)) continue;
    throw new Problem(
      "forbidden",
      `a user may not set the variable ${name}: template ${record.name} does not list it in userVariables (${[...allowed].join(", ") || "none"})`,
      `variables.${name}`,
    );
  }
}

/**
 * 422 `unknown_profile` naming `profile` when `profile` names no live profile of the tenant's
 * (docs/api.md "Profiles"); absent or null (none) passes. Asked before anything is written.
 */
export async function refuseUnknownProfile(
  env: Env,
  tenant: string,
  profile: string | null | undefined,
): Promise<void> {
  if (profile === undefined || profile === null) return;
  if (await directoryStub(env, tenant).hasProfile(profile)) return;
  throw unknownProfile(profile);
}

/**
 * At create: 422 `unknown_profile` as above, and 422 `missing_variable` naming `variables.{name}` for the
 * first placeholder of the profile's latest version that `variables` gives no value (docs/users.md
 * "Instructions"). Asked before anything is written.
 */
export async function refuseProfileAtCreate(
  env: Env,
  tenant: string,
  profile: string | null | undefined,
  variables: Readonly<Record<string, string>> | undefined,
): Promise<void> {
  if (profile === undefined || profile === null) return;
  const record = await directoryStub(env, tenant).getProfile(profile);
  if (record === undefined) throw unknownProfile(profile);
  for (const section of record.sections) {
    for (const name of placeholders(section.text)) {
      if (variables?.[name] !== undefined) continue;
      throw new Problem(
        "missing_variable",
        `variables.${name}: profile ${profile} (version ${record.version}) uses {{${name}}} in section ${section.id}; give it a value`,
        `variables.${name}`,
      );
    }
  }
}

export function unknownProfile(profile: string): Problem {
  return new Problem(
    "unknown_profile",
    `profile: the tenant has no profile ${JSON.stringify(profile)}; define it first (PUT /v1/profiles/${profile})`,
    "profile",
  );
}

/**
 * The metadata keys the service writes itself: `inbound.*`, which marks a session a tenant's inbound endpoint created
 * (http/routes/inbound-endpoints.ts routes a delivery only into a session marked for its endpoint).
 */
export const RESERVED_METADATA_PREFIX = "inbound.";

/**
 * 403 naming the first `inbound.*` metadata key a user's create or PATCH sets or clears, even where its template lets
 * users set metadata: a user's session never becomes one a tenant endpoint routes deliveries into.
 */
export function refuseReservedMetadata(metadata: Readonly<Record<string, unknown>> | undefined): void {
  const reserved = Object.keys(metadata ?? {}).find((key) => key.startsWith(RESERVED_METADATA_PREFIX));
  if (reserved === undefined) return;
  throw new Problem(
    "forbidden",
    `a user may not set the metadata key ${reserved}: keys starting with ${RESERVED_METADATA_PREFIX} are the service's`,
    `metadata.${reserved}`,
  );
}

/**
 * A user's PATCH (of a conversation's config, or the session's title and labels) sets only the fields
 * the session's template marks user-settable (403 naming the field). Other roles, and a session that
 * does not exist (the operation answers 404), pass.
 */
export async function refuseUserPatch(
  claims: Claims,
  stub: { templateBinding(): Promise<{ readonly exists: boolean; readonly binding?: TemplateBinding }> },
  patch: Readonly<Record<string, unknown>>,
): Promise<void> {
  if (claims.role !== "user") return;
  const state = await stub.templateBinding();
  if (!state.exists) return;
  refuseUserFields(
    state.binding,
    Object.keys(patch).filter((field) => patch[field] !== undefined),
  );
  const metadata = patch["metadata"];
  if (metadata !== null && typeof metadata === "object")
    refuseReservedMetadata(metadata as Readonly<Record<string, unknown>>);
}

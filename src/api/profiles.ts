/**
 * Wire schemas of a tenant's profiles (docs/api.md "Profiles"): the body of `PUT /v1/profiles/{name}`,
 * the records the routes answer, and the name a session, a conversation's config or a template uses to
 * name one. A profile says what the agent is: an ordered list of sections `{ id, text }` whose text may
 * hold `{{variable}}` placeholders (names of `a-z 0-9 _`; any other braces are literal text). Each PUT
 * makes a new version; every version stays readable by `(name, version)`.
 */
import { z } from "zod";

/** Sections a profile may hold. */
export const MAX_PROFILE_SECTIONS = 64;
/** A section's longest text, bytes of UTF-8. */
export const MAX_SECTION_BYTES = 32 * 1024;
/** A profile's longest text in all (every section's), bytes of UTF-8. */
export const MAX_PROFILE_BYTES = 128 * 1024;

/** A profile's name: the rules of a tool's name (src/api/tools.ts), so both read alike in a tenant's catalog. */
export const profileName = z
  .string()
  .regex(/^[a-zA-Z0-9_-]{1,64}$/, "a profile name is 1-64 characters of a-z A-Z 0-9 _ -")
  .refine((name) => !name.includes("__"), "a profile name may not contain __");

/** A section's id: unique within its profile, so a later slice can name one. */
export const sectionId = z
  .string()
  .regex(
    /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$/,
    "a section id is 1-64 characters of a-z A-Z 0-9 _ . - starting with a letter or digit",
  );

const utf8 = new TextEncoder();

function bytes(text: string): number {
  return utf8.encode(text).length;
}

/** Variables a session may hold, and the longest value, bytes of UTF-8. */
export const MAX_VARIABLES = 32;
export const MAX_VARIABLE_BYTES = 1024;

/** A variable's name: what a `{{name}}` placeholder names. */
export const variableName = z
  .string()
  .regex(/^[a-z0-9_]{1,64}$/, "a variable name is 1-64 characters of a-z 0-9 _ (what {{name}} names)");

const variableValue = z
  .string()
  .refine(
    (text) => bytes(text) <= MAX_VARIABLE_BYTES,
    `a variable's value is at most ${MAX_VARIABLE_BYTES} bytes of UTF-8`,
  );

/** A session's variables at create (and a template's defaults): at most 32 names, 1 KiB each. */
export const profileVariables = z
  .record(variableName, variableValue)
  .refine((vars) => Object.keys(vars).length <= MAX_VARIABLES, `at most ${MAX_VARIABLES} variables`);

/** A PATCH of variables: a value sets a name, null removes it. */
export const variablesPatch = z
  .record(variableName, variableValue.nullable())
  .refine((vars) => Object.keys(vars).length <= MAX_VARIABLES, `at most ${MAX_VARIABLES} variables`);

/** `{{name}}` with a name of `a-z 0-9 _`; anything else in braces is literal text. */
const PLACEHOLDER = /\{\{([a-z0-9_]+)\}\}/g;

/** The placeholder names a section's text holds, each once, in order of first use. */
export function placeholders(text: string): string[] {
  return [...new Set(Array.from(text.matchAll(PLACEHOLDER), (match) => match[1] ?? ""))];
}

export const profileSection = z.strictObject({
  id: sectionId,
  text: z
    .string()
    .refine(
      (text) => bytes(text) <= MAX_SECTION_BYTES,
      `a section's text is at most ${MAX_SECTION_BYTES} bytes of UTF-8`,
    ),
});
export type ProfileSection = z.infer<typeof profileSection>;

/** `PUT /v1/profiles/{name}`: the sections, in order. */
export const profileBody = z.strictObject({
  sections: z
    .array(profileSection)
    .min(1, "a profile has at least one section")
    .max(MAX_PROFILE_SECTIONS, `a profile has at most ${MAX_PROFILE_SECTIONS} sections`)
    .superRefine((sections, ctx) => {
      const seen = new Set<string>();
      sections.forEach((section, i) => {
        if (seen.has(section.id))
          ctx.addIssue({ code: "custom", message: `section id ${section.id} is used twice`, path: [i, "id"] });
        seen.add(section.id);
      });
      const total = sections.reduce((sum, section) => sum + bytes(section.text), 0);
      if (total > MAX_PROFILE_BYTES)
        ctx.addIssue({
          code: "custom",
          message: `the sections' text is ${total} bytes of UTF-8 in all; at most ${MAX_PROFILE_BYTES}`,
        });
    }),
});
export type ProfileBody = z.infer<typeof profileBody>;

export const profileRecordOut = z.strictObject({
  name: z.string(),
  version: z
    .number()
    .int()
    .describe("The profile's version, from 1 (each PUT makes the next); the ETag is this number in quotes"),
  sections: z.array(profileSection),
  createdAt: z.number().int().describe("Epoch ms this version was made"),
});
export type ProfileRecord = z.infer<typeof profileRecordOut>;

export const profilesListResponse = z.strictObject({ items: z.array(profileRecordOut) });
export const profileDeletedResponse = z.strictObject({
  name: z.string(),
  deleted: z.literal(true),
  version: z.number().int().describe("The version that was the latest"),
});
export type ProfileDeletedResponse = z.infer<typeof profileDeletedResponse>;

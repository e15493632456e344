/**
 * A tenant's profiles (docs/api.md "Profiles"), kept by the tenant's DirectoryObject (directory/profiles.ts):
 *
 *   PUT    /v1/profiles/:profile   (operator) { sections } -> 201 created / 200 a new version, the record, ETag
 *   GET    /v1/profiles            (operator) { items }: the live profiles' latest versions
 *   GET    /v1/profiles/:profile   (operator) the latest version, ETag; 404 profile_not_found (also a deleted one)
 *   DELETE /v1/profiles/:profile   (operator) { name, deleted: true, version }; 404; 409 profile_in_use
 *
 * `If-Match: "<version>"` (or `*`: the profile exists) makes a PUT or DELETE conditional: 412
 * `precondition_failed` otherwise. A JSON body that is not a valid profile, and a name a PUT may not use,
 * are 422 `invalid_profile` naming the field (`name`, `sections`, `sections.3.text`, ...). A DELETE while a
 * session template names the profile is 409 `profile_in_use`. Every refusal is decided before anything is
 * written.
 */
import { Hono } from "hono";
import { z } from "zod";
import { profileBody, profileName, type ProfileRecord } from "../../../api/profiles.js";
import { requires, type AppEnv } from "../../identity/auth.js";
import { directoryStub } from "../../directory/object.js";
import type { ProfileIfMatch } from "../../directory/profiles.js";
import { Problem } from "../../problems.js";
import { noQuery, parse } from "../../schemas.js";
import { body, query, type AppContext } from "./shared.js";

function directory(c: AppContext): ReturnType<typeof directoryStub> {
  return directoryStub(c.env, c.get("claims").tenant);
}

function notFound(name: string): Problem {
  return new Problem("profile_not_found", `the tenant has no profile ${JSON.stringify(name)}`);
}

/** The `:profile` of a read or delete: a name no PUT accepts names no profile. */
function nameParam(c: AppContext): string {
  const name = c.req.param("profile") ?? "";
  if (!profileName.safeParse(name).success) throw notFound(name);
  return name;
}

/** `If-Match`: one ETag this server sent (`"<version>"`), or `*`. */
function ifMatch(c: AppContext): ProfileIfMatch | undefined {
  const header = c.req.header("if-match");
  if (header === undefined) return undefined;
  if (header.trim() === "*") return "*";
  const match = /^"([1-9][0-9]{0,15})"$/.exec(header.trim());
  if (match === null)
    throw new Problem("invalid_header", 'If-Match is a profile ETag this server sent ("<version>") or *', "if-match");
  return Number(match[1]);
}

function precondition(name: string, current: number | undefined): Problem {
  return new Problem(
    "precondition_failed",
    current === undefined
      ? `If-Match: the tenant has no profile ${JSON.stringify(name)}`
      : `If-Match: profile ${name} is at version ${current}`,
    "if-match",
  );
}

function recordResponse(c: AppContext, record: ProfileRecord, status: 200 | 201 = 200): Response {
  c.header("ETag", `"${record.version}"`);
  return c.json(record, status);
}

export const profileRoutes = new Hono<AppEnv>();

profileRoutes.put("/:profile", requires("profiles"), async (c) => {
  query(c, noQuery);
  const name = parse(profileName, c.req.param("profile") ?? "", "invalid_profile", "name");
  const condition = ifMatch(c);
  const { sections } = parse(profileBody, await body(c, z.unknown()), "invalid_profile");
  const outcome = await directory(c).putProfile(name, sections, condition);
  switch (outcome.type) {
    case "stored":
      return recordResponse(c, outcome.record, outcome.created ? 201 : 200);
    case "precondition":
      throw precondition(name, outcome.current);
    case "too_many":
      throw new Problem(
        "invalid_profile",
        `the tenant holds at most ${outcome.limit} profiles; delete one first`,
        "name",
      );
    default: {
      const never: never = outcome;
      return never;
    }
  }
});

profileRoutes.get("/", requires("profiles"), async (c) => {
  query(c, noQuery);
  return c.json({ items: await directory(c).listProfiles() });
});

profileRoutes.get("/:profile", requires("profiles"), async (c) => {
  query(c, noQuery);
  const name = nameParam(c);
  const record = await directory(c).getProfile(name);
  if (record === undefined) throw notFound(name);
  return recordResponse(c, record);
});

profileRoutes.delete("/:profile", requires("profiles"), async (c) => {
  query(c, noQuery);
  const name = nameParam(c);
  const outcome = await directory(c).deleteProfile(name, ifMatch(c));
  switch (outcome.type) {
    case "deleted":
      return c.json({ name: outcome.name, deleted: true as const, version: outcome.version });
    case "not_found":
      throw notFound(name);
    case "precondition":
      throw precondition(name, outcome.current);
    case "in_use":
      throw new Problem(
        "profile_in_use",
        `session templates name profile ${name} (${outcome.templates.join(", ")}); change or delete them first`,
        "name",
      );
    default: {
      const never: never = outcome;
      return never;
    }
  }
});

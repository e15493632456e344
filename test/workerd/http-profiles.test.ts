/**
 * A tenant's profiles over HTTP (docs/api.md "Profiles"): the operator's CRUD, each PUT a new version
 * with its ETag, If-Match, validation (422 invalid_profile naming the field, nothing written), DELETE
 * refused while a template names the profile (409 profile_in_use), every version readable through the
 * directory; and naming a profile: an unknown name is 422 unknown_profile naming `profile` on every
 * route that sets one, writing nothing, and `profile: null` clears a conversation's profile.
 */
import { abortAllDurableObjects, env } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { directoryStub } from "../../src/worker/directory/object.js";
import type { Env } from "../../src/worker/env.js";
import { call, exists, json, lastSeq, token, uniqueSession } from "./http-fixtures.js";
import { resetSeams } from "./session-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

const SUPPORT = {
  sections: [
    { id: "role", text: "You are the support agent of {{company}}." },
    { id: "tone", text: "Be brief. Braces like {this} or {{ Not_A_Var }} are literal text." },
  ],
};

async function put(op: string, name: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return call("PUT", `/v1/profiles/${name}`, { token: op, body, headers });
}

describe("profiles: the operator's routes", () => {
  it("PUT makes a new version each time, GET answers the latest with its ETag, the list the live ones", async () => {
    const tenant = uniqueSession("profiles-crud");
    const op = await token(tenant, "operator");
    const created = await put(op, "support", SUPPORT);
    expect(created.status).toBe(201);
    const first = await json(created);
    expect(first).toMatchObject({ name: "support", version: 1, sections: SUPPORT.sections });
    expect(typeof first["createdAt"]).toBe("number");
    expect(created.headers.get("etag")).toBe('"1"');

    const next = { sections: [{ id: "role", text: "You answer questions about {{product}}." }] };
    const replaced = await put(op, "support", next);
    expect(replaced.status).toBe(200);
    expect(await json(replaced)).toMatchObject({ name: "support", version: 2, sections: next.sections });
    expect(replaced.headers.get("etag")).toBe('"2"');

    const read = await call("GET", "/v1/profiles/support", { token: op });
    expect(read.status).toBe(200);
    expect(read.headers.get("etag")).toBe('"2"');
    expect(await json(read)).toMatchObject({ name: "support", version: 2, sections: next.sections });

    expect((await put(op, "billing", SUPPORT)).status).toBe(201);
    const list = await json<{ items: { name: string; version: number }[] }>(
      await call("GET", "/v1/profiles", { token: op }),
    );
    expect(list.items.map((item) => [item.name, item.version])).toEqual([
      ["billing", 1],
      ["support", 2],
    ]);

    // Every version stays readable by (name, version): what a generation prepared its instructions from.
    const directory = directoryStub(env as unknown as Env, tenant);
    expect(await directory.getProfileVersion("support", 1)).toMatchObject({ version: 1, sections: SUPPORT.sections });
    expect(await directory.getProfileVersion("support", 3)).toBeUndefined();

    // Deleted: 404 to a read, gone from the list, its versions kept; a later PUT continues the numbering.
    const deleted = await call("DELETE", "/v1/profiles/support", { token: op });
    expect(deleted.status).toBe(200);
    expect(await json(deleted)).toEqual({ name: "support", deleted: true, version: 2 });
    const gone = await call("GET", "/v1/profiles/support", { token: op });
    expect(gone.status).toBe(404);
    expect((await json(gone))["code"]).toBe("profile_not_found");
    expect((await call("DELETE", "/v1/profiles/support", { token: op })).status).toBe(404);
    expect(await directory.getProfileVersion("support", 2)).toMatchObject({ version: 2, sections: next.sections });
    const revived = await put(op, "support", SUPPORT);
    expect(revived.status).toBe(201);
    expect((await json(revived))["version"]).toBe(3);

    // Only operators manage profiles.
    const client = await token(tenant, "client");
    expect((await call("GET", "/v1/profiles", { token: client })).status).toBe(403);
    expect((await put(client, "other", SUPPORT)).status).toBe(403);
  });

  it("If-Match makes a PUT or DELETE conditional: 412 precondition_failed unless it names the latest version", async () => {
    const tenant = uniqueSession("profiles-ifmatch");
    const op = await token(tenant, "operator");
    // `*` needs the profile to exist; a version needs it to be the latest.
    const absent = await put(op, "support", SUPPORT, { "if-match": "*" });
    expect(absent.status).toBe(412);
    expect(await json(absent)).toMatchObject({ code: "precondition_failed", field: "if-match" });
    expect((await call("GET", "/v1/profiles/support", { token: op })).status).toBe(404);

    expect((await put(op, "support", SUPPORT)).status).toBe(201);
    expect((await put(op, "support", SUPPORT, { "if-match": '"1"' })).status).toBe(200);
    const stale = await put(op, "support", SUPPORT, { "if-match": '"1"' });
    expect(stale.status).toBe(412);
    expect((await json(stale))["detail"]).toContain("version 2");
    expect((await put(op, "support", SUPPORT, { "if-match": "*" })).status).toBe(200);
    const malformed = await put(op, "support", SUPPORT, { "if-match": "W/1" });
    expect(malformed.status).toBe(400);
    expect(await json(malformed)).toMatchObject({ code: "invalid_header", field: "if-match" });
    expect((await json(await call("GET", "/v1/profiles/support", { token: op })))["version"]).toBe(3);

    const staleDelete = await call("DELETE", "/v1/profiles/support", { token: op, headers: { "if-match": '"2"' } });
    expect(staleDelete.status).toBe(412);
    expect((await call("GET", "/v1/profiles/support", { token: op })).status).toBe(200);
    const deleted = await call("DELETE", "/v1/profiles/support", { token: op, headers: { "if-match": '"3"' } });
    expect(deleted.status).toBe(200);
  });

  it("a PUT that is not a valid profile is 422 invalid_profile naming the field, and writes nothing", async () => {
    const tenant = uniqueSession("profiles-invalid");
    const op = await token(tenant, "operator");
    const section = (id: string, text = "x"): { id: string; text: string } => ({ id, text });
    const cases: [string, unknown, string][] = [
      ["bad name", SUPPORT, "name"],
      ["has__double", SUPPORT, "name"],
      ["a".repeat(65), SUPPORT, "name"],
      ["ok", {}, "sections"],
      ["ok", { sections: [] }, "sections"],
      ["ok", { sections: "text" }, "sections"],
      ["ok", { sections: [section("a"), section("b"), section("c"), { id: "d", text: 5 }] }, "sections.3.text"],
      ["ok", { sections: [section("a"), { text: "no id" }] }, "sections.1.id"],
      ["ok", { sections: [section("-leading")] }, "sections.0.id"],
      ["ok", { sections: [section("a"), section("a")] }, "sections.1.id"],
      ["ok", { sections: [{ id: "a", text: "x", extra: 1 }] }, "sections.0.extra"],
      ["ok", { sections: [section("a", "é".repeat(16 * 1024 + 1))] }, "sections.0.text"],
      ["ok", { sections: Array.from({ length: 65 }, (_, i) => section(`s${i}`)) }, "sections"],
      ["ok", { sections: Array.from({ length: 5 }, (_, i) => section(`s${i}`, "x".repeat(30_000))) }, "sections"],
      ["ok", { ...SUPPORT, version: 3 }, "version"],
    ];
    for (const [name, body, field] of cases) {
      const response = await put(op, encodeURIComponent(name), body);
      const problem = await json(response);
      expect(response.status, `${name} ${field}`).toBe(422);
      expect(problem["code"], field).toBe("invalid_profile");
      expect(problem["field"], `${name}: ${JSON.stringify(problem)}`).toBe(field);
    }
    // At the limits exactly: 64 sections, 32 KiB each and 128 KiB in all are fine.
    const full = Array.from({ length: 64 }, (_, i) => section(`s${i}`, i < 4 ? "x".repeat(32 * 1024) : ""));
    expect((await put(op, "full", { sections: full })).status).toBe(201);
    expect(await json(await call("GET", "/v1/profiles", { token: op }))).toMatchObject({ items: [{ name: "full" }] });

    const raw = await call("PUT", "/v1/profiles/ok", {
      token: op,
      rawBody: "{",
      headers: { "content-type": "application/json" },
    });
    expect(raw.status).toBe(400);
    expect((await json(raw))["code"]).toBe("invalid_json");
  });

  it("deleting a profile a template names is 409 profile_in_use; once no template names it, it goes", async () => {
    const tenant = uniqueSession("profiles-in-use");
    const op = await token(tenant, "operator");
    expect((await put(op, "support", SUPPORT)).status).toBe(201);
    const template = await call("PUT", "/v1/templates/helpdesk", {
      token: op,
      body: { model: "echo/echo", profile: "support" },
    });
    expect(template.status).toBe(201);
    const refused = await call("DELETE", "/v1/profiles/support", { token: op });
    expect(refused.status).toBe(409);
    const problem = await json(refused);
    expect(problem).toMatchObject({ code: "profile_in_use" });
    expect(problem["detail"]).toContain("helpdesk");
    expect((await call("GET", "/v1/profiles/support", { token: op })).status).toBe(200);

    // The template drops the profile: the delete goes through.
    expect(
      (await call("PUT", "/v1/templates/helpdesk", { token: op, body: { model: "echo/echo", profile: null } })).status,
    ).toBe(200);
    expect((await call("DELETE", "/v1/profiles/support", { token: op })).status).toBe(200);
  });
});

describe("profiles: naming one", () => {
  it("An unknown profile is refused at create and in a template", async () => {
    const tenant = uniqueSession("profiles-unknown");
    const op = await token(tenant, "operator");
    const client = await token(tenant, "client");
    const expectUnknown = async (response: Response, what: string): Promise<void> => {
      expect(response.status, what).toBe(422);
      expect(await json(response), what).toMatchObject({ code: "unknown_profile", field: "profile" });
    };

    // PUT /v1/sessions/{s}: nothing created.
    const name = uniqueSession("unknown-put");
    await expectUnknown(
      await call("PUT", `/v1/sessions/${name}`, { token: client, body: { profile: "ghost" } }),
      "PUT session",
    );
    expect(await exists(tenant, name)).toBe(false);

    // POST /v1/sessions: nothing created, nothing listed.
    await expectUnknown(
      await call("POST", "/v1/sessions", { token: client, body: { profile: "ghost" } }),
      "POST sessions",
    );
    expect(await json(await call("GET", "/v1/sessions", { token: op }))).toMatchObject({ items: [] });

    // PUT /v1/templates/{t}: nothing stored.
    await expectUnknown(
      await call("PUT", "/v1/templates/helpdesk", { token: op, body: { model: "echo/echo", profile: "ghost" } }),
      "PUT template",
    );
    expect(await json(await call("GET", "/v1/templates", { token: op }))).toEqual({ items: [] });

    // PATCH .../config: the conversation's config and log unchanged.
    expect((await put(op, "support", SUPPORT)).status).toBe(201);
    const session = uniqueSession("unknown-patch");
    const created = await call("PUT", `/v1/sessions/${session}`, {
      token: client,
      body: { profile: "support", variables: { company: "Acme" } },
    });
    expect(created.status).toBe(201);
    const config = `/v1/sessions/${session}/conversations/root/config`;
    const before = await json(await call("GET", config, { token: client }));
    expect(before["profile"]).toBe("support");
    const seq = await lastSeq(tenant, session);
    await expectUnknown(await call("PATCH", config, { token: client, body: { profile: "ghost" } }), "PATCH config");
    await expectUnknown(
      await call("PATCH", config, { token: client, body: { budgetMs: 5_000, profile: "ghost" } }),
      "PATCH config with another field",
    );
    expect(await json(await call("GET", config, { token: client }))).toEqual(before);
    expect(await lastSeq(tenant, session)).toBe(seq);

    // A deleted profile is as unknown as one never defined.
    expect((await put(op, "gone", SUPPORT)).status).toBe(201);
    expect((await call("DELETE", "/v1/profiles/gone", { token: op })).status).toBe(200);
    await expectUnknown(
      await call("PUT", `/v1/sessions/${uniqueSession("deleted")}`, { token: client, body: { profile: "gone" } }),
      "a deleted profile",
    );

    // A name no profile could have is the body's problem, as before.
    const malformed = await call("PUT", `/v1/sessions/${uniqueSession("bad")}`, {
      token: client,
      body: { profile: "not a name" },
    });
    expect(malformed.status).toBe(400);
    expect(await json(malformed)).toMatchObject({ code: "invalid_body", field: "profile" });
  });

  it("a known profile is set at create, from a template, by PATCH, and profile: null clears it", async () => {
    const tenant = uniqueSession("profiles-known");
    const op = await token(tenant, "operator");
    const client = await token(tenant, "client");
    expect((await put(op, "support", SUPPORT)).status).toBe(201);
    expect((await put(op, "billing", SUPPORT)).status).toBe(201);
    expect(
      (
        await call("PUT", "/v1/templates/helpdesk", {
          token: op,
          body: { model: "echo/echo", profile: "support", variables: { company: "Acme" }, userSettable: ["profile"] },
        })
      ).status,
    ).toBe(201);

    // From the template, overridden, and cleared over the template's by null.
    const fromTemplate = uniqueSession("from-template");
    const created = await call("PUT", `/v1/sessions/${fromTemplate}`, {
      token: client,
      body: { template: "helpdesk" },
    });
    expect(created.status).toBe(201);
    expect((await json<{ config: Record<string, unknown> }>(created)).config["profile"]).toBe("support");
    const overridden = await call("POST", "/v1/sessions", {
      token: client,
      body: { template: "helpdesk", profile: "billing" },
    });
    expect(overridden.status).toBe(201);
    expect((await json<{ config: Record<string, unknown> }>(overridden)).config["profile"]).toBe("billing");
    const cleared = await call("POST", "/v1/sessions", {
      token: client,
      body: { template: "helpdesk", profile: null },
    });
    expect(cleared.status).toBe(201);
    expect((await json<{ config: Record<string, unknown> }>(cleared)).config["profile"]).toBeUndefined();

    // A user may set it where the template marks it user-settable; an unknown name is refused for a user too.
    const alice = await token(tenant, "user", { sub: "alice" });
    const mine = uniqueSession("alice");
    await expect(
      call("PUT", `/v1/sessions/${mine}`, { token: alice, body: { template: "helpdesk", profile: "ghost" } }).then(
        async (response) => [response.status, (await json(response))["code"]],
      ),
    ).resolves.toEqual([422, "unknown_profile"]);
    expect(
      (await call("PUT", `/v1/sessions/${mine}`, { token: alice, body: { template: "helpdesk", profile: "billing" } }))
        .status,
    ).toBe(201);

    // PATCH sets a known profile, and null clears it.
    const config = `/v1/sessions/${fromTemplate}/conversations/root/config`;
    const patched = await call("PATCH", config, { token: client, body: { profile: "billing" } });
    expect(patched.status).toBe(200);
    expect((await json(patched))["profile"]).toBe("billing");
    const none = await call("PATCH", config, { token: client, body: { profile: null } });
    expect(none.status).toBe(200);
    expect((await json(none))["profile"]).toBeUndefined();
    expect((await json(await call("GET", config, { token: client })))["profile"]).toBeUndefined();
  });
});

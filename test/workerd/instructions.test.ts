/**
 * Instructions over HTTP (docs/users.md "Instructions"): a profile in the tenant's catalog, named by a
 * session, reaches the model as its system instruction through §8.2's sections (the echo model answers
 * `/instructions` with the instructions its request carried); an edit is a delta on the next generation,
 * never a rewrite; forks and collapses keep the instructions; variables fill the placeholders, and a user
 * sets only the names the template lists.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { call, json, token, uniqueSession } from "./http-fixtures.js";
import { resetSeams } from "./session-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

type Entry = { id: number; kind: string; model?: { role: string; sections?: Record<string, string | null> }[] };

async function putProfile(op: string, name: string, ...texts: string[]): Promise<void> {
  const response = await call("PUT", `/v1/profiles/${name}`, {
    token: op,
    body: { sections: texts.map((text, i) => ({ id: `s${i}`, text })) },
  });
  expect([200, 201]).toContain(response.status);
}

/** The answer's text of one input, waited for. */
async function ask(
  tok: string,
  session: string,
  input: string,
  conversation: string | number = "root",
): Promise<string> {
  const response = await call("POST", `/v1/sessions/${session}/conversations/${conversation}/inputs?wait=20`, {
    token: tok,
    body: { input },
  });
  const body = await json<{ status: string; outputText?: string }>(response);
  if (response.status !== 201) throw new Error(`input answered ${response.status}: ${JSON.stringify(body)}`);
  expect(body.status).toBe("done");
  return body.outputText ?? "";
}

async function systemEntries(tok: string, session: string, conversation: string | number = "root"): Promise<Entry[]> {
  const page = await json<{ items: Entry[] }>(
    await call("GET", `/v1/sessions/${session}/conversations/${conversation}/entries?kind=system&limit=100`, {
      token: tok,
    }),
  );
  return page.items;
}

async function config(
  tok: string,
  session: string,
  conversation: string | number = "root",
): Promise<Record<string, unknown>> {
  return json(await call("GET", `/v1/sessions/${session}/conversations/${conversation}/config`, { token: tok }));
}

describe("instructions from profiles", () => {
  it("A profile's text reaches the provider as its system instruction", async () => {
    const tenant = uniqueSession("instr-reach");
    const op = await token(tenant, "operator");
    await putProfile(op, "support", "You are the support agent of Acme.", "Answer in one sentence.");
    const session = uniqueSession("reach");
    const created = await call("PUT", `/v1/sessions/${session}`, {
      token: op,
      body: { model: "echo/echo", profile: "support" },
    });
    expect(created.status).toBe(201);
    // Nothing prepared yet: a session without a request has no instructions on record.
    expect((await config(op, session))["preparedProfile"]).toBeUndefined();

    const text = "You are the support agent of Acme.\n\nAnswer in one sentence.";
    expect(await ask(op, session, "/instructions")).toBe(text);
    const [baseline, ...rest] = await systemEntries(op, session);
    expect(rest).toEqual([]);
    expect(baseline?.model?.[0]).toMatchObject({ role: "system", sections: { "edge.profile": text } });
    expect(await config(op, session)).toMatchObject({
      profile: "support",
      preparedProfile: { name: "support", version: 1 },
    });
    // A session without a profile carries no instructions.
    const bare = uniqueSession("bare");
    expect((await call("PUT", `/v1/sessions/${bare}`, { token: op, body: { model: "echo/echo" } })).status).toBe(201);
    expect(await ask(op, bare, "/instructions")).toBe("(no instructions)");
  });

  it("Editing a profile writes a delta, not a rewrite", async () => {
    const tenant = uniqueSession("instr-delta");
    const op = await token(tenant, "operator");
    await putProfile(op, "support", "Version one.");
    const session = uniqueSession("delta");
    await call("PUT", `/v1/sessions/${session}`, { token: op, body: { model: "echo/echo", profile: "support" } });
    expect(await ask(op, session, "/instructions")).toBe("Version one.");
    const before = await systemEntries(op, session);
    expect(before).toHaveLength(1);

    await putProfile(op, "support", "Version two.");
    expect(await ask(op, session, "/instructions")).toBe("Version two.");
    const after = await systemEntries(op, session);
    // The baseline is untouched (same id, same text); the edit is one more entry with the changed section.
    expect(after).toHaveLength(2);
    expect(after[0]).toEqual(before[0]);
    expect(after[1]?.model?.[0]).toMatchObject({ role: "system", sections: { "edge.profile": "Version two." } });
    expect((await config(op, session))["preparedProfile"]).toEqual({ name: "support", version: 2 });

    // An unchanged profile adds nothing; switching profiles replaces the key, clearing deletes it.
    expect(await ask(op, session, "hello")).toBe("hello");
    expect(await systemEntries(op, session)).toHaveLength(2);
    await putProfile(op, "billing", "You handle invoices.");
    const cfg = `/v1/sessions/${session}/conversations/root/config`;
    expect((await call("PATCH", cfg, { token: op, body: { profile: "billing" } })).status).toBe(200);
    expect(await ask(op, session, "/instructions")).toBe("You handle invoices.");
    expect((await call("PATCH", cfg, { token: op, body: { profile: null } })).status).toBe(200);
    expect(await ask(op, session, "/instructions")).toBe("(no instructions)");
    const last = (await systemEntries(op, session)).at(-1);
    expect(last?.model?.[0]).toMatchObject({ role: "system", sections: { "edge.profile": null } });

    // A session naming a deleted profile keeps its last prepared instructions (a missing source is not a deletion).
    expect((await call("PATCH", cfg, { token: op, body: { profile: "billing" } })).status).toBe(200);
    expect(await ask(op, session, "/instructions")).toBe("You handle invoices.");
    expect((await call("DELETE", "/v1/profiles/billing", { token: op })).status).toBe(200);
    expect(await ask(op, session, "/instructions")).toBe("You handle invoices.");
  });

  it("A fork keeps its instructions and a collapse keeps them", async () => {
    const tenant = uniqueSession("instr-fork");
    const op = await token(tenant, "operator");
    await putProfile(op, "support", "Stay on topic.");
    const session = uniqueSession("fork");
    await call("PUT", `/v1/sessions/${session}`, { token: op, body: { model: "echo/echo", profile: "support" } });
    expect(await ask(op, session, "first question")).toBe("first question");
    for (const question of ["second", "third", "fourth", "fifth", "sixth"])
      expect(await ask(op, session, question)).toBe(question);

    // A fork at the first answer inherits the profile and sees the instructions prepared before it.
    const entries = await json<{ items: Entry[] }>(
      await call("GET", `/v1/sessions/${session}/conversations/root/entries?kind=assistant&limit=1`, { token: op }),
    );
    const at = entries.items[0]?.id;
    const forked = await call("POST", `/v1/sessions/${session}/conversations/root/fork`, { token: op, body: { at } });
    expect(forked.status).toBe(201);
    const fork = (await json<{ conversationId: number }>(forked)).conversationId;
    expect((await config(op, session, fork))["profile"]).toBe("support");
    expect(await ask(op, session, "/instructions", fork)).toBe("Stay on topic.");

    // After a collapse the next request carries the whole text again, in a fresh baseline.
    const collapsed = await call("POST", `/v1/sessions/${session}/conversations/root/collapse`, {
      token: op,
      body: {},
    });
    if (collapsed.status !== 202) throw new Error(`collapse: ${JSON.stringify(await json(collapsed))}`);
    const before = (await systemEntries(op, session)).length;
    let answer = "";
    for (let i = 0; i < 50 && answer !== "Stay on topic."; i++) answer = await ask(op, session, "/instructions");
    expect(answer).toBe("Stay on topic.");
    const after = await systemEntries(op, session);
    expect(after.length).toBeGreaterThan(before);
    expect(after.at(-1)?.model?.[0]).toMatchObject({ role: "system", sections: { "edge.profile": "Stay on topic." } });
  });

  it("Variables fill the profile, and users set only the template's", async () => {
    const tenant = uniqueSession("instr-vars");
    const op = await token(tenant, "operator");
    const client = await token(tenant, "client");
    const alice = await token(tenant, "user", { sub: "alice" });
    await putProfile(op, "support", "You work for {{company}}.", "You support {{product}}. {not a variable}");
    const template = await call("PUT", "/v1/templates/helpdesk", {
      token: op,
      body: { model: "echo/echo", profile: "support", variables: { company: "Acme" }, userVariables: ["product"] },
    });
    expect(template.status).toBe(201);

    // A user sets the names the template lists; the template's values fill the rest.
    const mine = uniqueSession("alice");
    const created = await call("PUT", `/v1/sessions/${mine}`, {
      token: alice,
      body: { template: "helpdesk", variables: { product: "Widget" } },
    });
    expect(created.status).toBe(201);
    expect(await ask(alice, mine, "/instructions")).toBe("You work for Acme.\n\nYou support Widget. {not a variable}");

    // A name the template does not list is 403 naming it; a placeholder without a value is 422 naming it.
    const refused = await call("PUT", `/v1/sessions/${uniqueSession("alice")}`, {
      token: alice,
      body: { template: "helpdesk", variables: { company: "Evil", product: "Widget" } },
    });
    expect(refused.status).toBe(403);
    expect(await json(refused)).toMatchObject({ code: "forbidden", field: "variables.company" });
    const missing = await call("PUT", `/v1/sessions/${uniqueSession("alice")}`, {
      token: alice,
      body: { template: "helpdesk" },
    });
    expect(missing.status).toBe(422);
    expect(await json(missing)).toMatchObject({ code: "missing_variable", field: "variables.product" });
    const bad = await call("PUT", `/v1/sessions/${uniqueSession("bad")}`, {
      token: client,
      body: { template: "helpdesk", variables: { "Not-A-Name": "x", product: "y" } },
    });
    expect(bad.status).toBe(400);

    // A user does not PATCH variables; an operator or client does, and the next generation renders them.
    const patch = `/v1/sessions/${mine}`;
    const userPatch = await call("PATCH", patch, { token: alice, body: { variables: { product: "Gadget" } } });
    expect(userPatch.status).toBe(403);
    const patched = await call("PATCH", patch, { token: client, body: { variables: { product: "Gadget" } } });
    expect(patched.status).toBe(200);
    expect((await json(patched))["variables"]).toEqual({ company: "Acme", product: "Gadget" });
    expect(await ask(alice, mine, "/instructions")).toBe("You work for Acme.\n\nYou support Gadget. {not a variable}");

    // A placeholder a later edit adds renders empty until it is set; variables are sticky, forks see them.
    await putProfile(op, "support", "You work for {{company}} in {{city}}.");
    expect(await ask(alice, mine, "/instructions")).toBe("You work for Acme in .");
    await call("PATCH", patch, { token: op, body: { variables: { city: "Oslo", product: null } } });
    expect(await ask(alice, mine, "/instructions")).toBe("You work for Acme in Oslo.");
    const newest = await json<{ items: Entry[] }>(
      await call("GET", `/v1/sessions/${mine}/conversations/root/entries?kind=assistant&limit=1`, { token: client }),
    );
    const forked = await call("POST", `/v1/sessions/${mine}/conversations/root/fork`, {
      token: client,
      body: { at: newest.items[0]?.id },
    });
    const fork = (await json<{ conversationId: number }>(forked)).conversationId;
    expect(await ask(client, mine, "/instructions", fork)).toBe("You work for Acme in Oslo.");
  });
});

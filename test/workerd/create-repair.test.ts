/**
 * Creation is atomic from the outside (docs/api.md "Directory"): a create cut right after its creating
 * commit (the host seam throws there, as if the object died) leaves a session without its template
 * binding and directory link; the retried PUT repairs both, so the session is listed and bound. A delete cut
 * after its wipe and before its unlink leaves a listed name no object holds; the retried DELETE unlinks it.
 */
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import type { DirectoryObject } from "../../src/worker/directory/object.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { call, json, stubOf, token, uniqueSession } from "./http-fixtures.js";
import { createBody, putUserTemplate } from "./users-fixtures.js";

afterEach(async () => {
  setHostSeams({});
  await abortAllDurableObjects();
});

async function listed(jwt: string): Promise<string[]> {
  const response = await call("GET", "/v1/sessions", { token: jwt });
  expect(response.status).toBe(200);
  return (await json<{ items: { session: string }[] }>(response)).items.map((item) => item.session);
}

describe("create repair", () => {
  it("A create cut after its commit is repaired by the retry", async () => {
    const tenant = `create-cut-${Date.now().toString(36)}`;
    await putUserTemplate(tenant);
    const alice = await token(tenant, "user", { sub: "alice" });
    const session = uniqueSession("cut");
    const body = createBody(alice, { title: "cut short" });
    setHostSeams({
      afterCreateCommit: () => {
        throw new Error("the object died after the creating commit");
      },
    });
    const cut = await call("PUT", `/v1/sessions/${session}`, { token: alice, body });
    expect(cut.status).toBe(500);
    setHostSeams({});
    expect(await stubOf(tenant, session).exists()).toBe(true);
    // The retry finds the session created and repairs what the cut left missing.
    const retried = await call("PUT", `/v1/sessions/${session}`, { token: alice, body });
    expect(retried.status, await retried.clone().text()).toBe(200);
    expect(await listed(alice)).toContain(session);
    expect(await stubOf(tenant, session).templateBinding()).toMatchObject({ exists: true, binding: expect.anything() });
    expect(await stubOf(tenant, session).directoryMeta()).toMatchObject({ title: "cut short" });
    // Deleted, it is listed no more.
    const operator = await token(tenant, "operator");
    expect((await call("DELETE", `/v1/sessions/${session}`, { token: operator })).status).toBe(200);
    expect(await listed(operator)).not.toContain(session);
  });

  it("A delete cut before its unlink is repaired by the retry", async () => {
    const tenant = `delete-cut-${Date.now().toString(36)}`;
    const operator = await token(tenant, "operator");
    const session = uniqueSession("delete-cut");
    expect((await call("PUT", `/v1/sessions/${session}`, { token: operator, body: {} })).status).toBe(201);
    expect(await listed(operator)).toContain(session);
    setHostSeams({
      afterDeleteWipe: () => {
        throw new Error("the object died after the wipe");
      },
    });
    const cut = await call("DELETE", `/v1/sessions/${session}`, { token: operator });
    expect(cut.status).toBe(500);
    setHostSeams({});
    // The cut left the session gone from its object but listed by its directory.
    expect(await stubOf(tenant, session).exists()).toBe(false);
    expect(await listed(operator)).toContain(session);
    // While the directory cannot answer, the retry cannot tell an orphan from an unknown name: 500, never 404.
    const directory = env.DIRECTORY.get(env.DIRECTORY.idFromName(tenant));
    await runInDurableObject(directory, (instance: DirectoryObject) => {
      instance.refusing = 1;
    });
    expect((await call("DELETE", `/v1/sessions/${session}`, { token: operator })).status).toBe(500);
    expect(await listed(operator)).toContain(session);
    // The retry unlinks the name the directory still lists and answers as the delete would have.
    const retried = await call("DELETE", `/v1/sessions/${session}`, { token: operator });
    expect(retried.status, await retried.clone().text()).toBe(200);
    expect(await json(retried)).toEqual({ deleted: true });
    expect(await listed(operator)).not.toContain(session);
    // A name neither holds is unknown, as before.
    expect((await call("DELETE", `/v1/sessions/${session}`, { token: operator })).status).toBe(404);
    expect((await call("DELETE", `/v1/sessions/${uniqueSession("never")}`, { token: operator })).status).toBe(404);
  });
});

/**
 * Creation is atomic from the outside (docs/api.md "Directory"): a create cut right after its creating
 * commit (the host seam throws there, as if the object died) leaves a session without its template
 * binding and directory link; the retried PUT repairs both, so the session is listed and bound.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
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
});

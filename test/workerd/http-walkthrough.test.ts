/**
 * The README's curl walkthrough as a test, end to end through the Worker's fetch: create a session,
 * accept input (the echo model answers), watch it, call the echo tool, fork, abort.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { PicoApiError } from "../../src/client/transport.js";
import { client, uniqueSession } from "./http-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

describe("HTTP walkthrough", () => {
  it("create, accept with wait, echo answer, tool call, fork, abort", async () => {
    const api = await client("acme");
    const name = uniqueSession("walk");
    const session = api.session(name);
    // The echo tool is selected by name: a session created without selectedTools selects none.
    const created = await session.create({ selectedTools: ["echo"] });
    expect(created.created).toBe(true);
    expect(created.config.model).toBe("echo/echo");
    // A bare alias names the same model, so the same config: created: false.
    expect((await session.create({ model: "echo", selectedTools: ["echo"] })).created).toBe(false);
    await expect(session.create({ model: "echo", thinking: "high" })).rejects.toMatchObject({ status: 409 });

    const root = session.conversation("root");
    const first = await root.accept("hello there", { idempotencyKey: "k-1", wait: 10 });
    expect(first.status).toBe("done");
    expect(first.duplicate).toBe(false);
    expect(first.answer?.kind).toBe("assistant");
    expect(JSON.stringify(first.answer)).toContain("hello there");

    const again = await root.accept("hello there", { idempotencyKey: "k-1" });
    expect(again).toMatchObject({ inputId: first.inputId, duplicate: true, status: "done" });
    await expect(root.accept("something else", { idempotencyKey: "k-1" })).rejects.toMatchObject({
      status: 422,
      code: "idempotency_key_reused",
    });
    expect(await session.acceptance("k-1")).toMatchObject({
      inputId: first.inputId,
      conversationId: first.conversationId,
    });
    expect((await session.input(first.inputId)).result.status).toBe("done");

    const tool = await root.accept('/call echo {"text":"ping"}', { wait: 10 });
    expect(tool.status).toBe("done");
    expect(JSON.stringify(tool.answer)).toContain("ping");

    const entries = await root.entries({ limit: 100 });
    expect(entries.items.map((e) => e.kind)).toEqual(expect.arrayContaining(["user", "assistant", "tool_result"]));

    const fork = await root.fork({ at: first.answer?.id ?? 0 });
    const forked = session.conversation(fork.conversationId);
    const forkEntries = await forked.entries({ limit: 100 });
    expect(forkEntries.items.map((e) => e.id)).toEqual(
      entries.items.filter((e) => e.id <= (first.answer?.id ?? 0)).map((e) => e.id),
    );

    await root.abort();
    const summary = await session.get();
    expect(summary.rootConversationId).toBe(first.conversationId);
    await expect(api.session(uniqueSession("never")).get()).rejects.toBeInstanceOf(PicoApiError);
  });
});

/**
 * The conversation and operator routes end to end: abort of a live turn, config read/patch (forks keep
 * their own), reset, collapse, usage, live tasks, task abort, inspect, shutdown, fault clear, quarantine
 * release and session delete.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { client, lastSeq, until, uniqueSession } from "./http-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

describe("conversation routes", () => {
  it("abort ends a live turn and its input is unanswered(aborted)", async () => {
    const api = await client("ops");
    const name = uniqueSession("abort");
    const s = api.session(name);
    await s.create({ model: "echo-slow" });
    const root = s.conversation("root");
    const accepted = await root.accept(
      "a long answer that the paced echo model streams slowly enough to abort it midway",
    );
    expect(accepted.status).toBe("placed");
    await root.abort();
    const result = await until(async () => {
      const r = (await s.input(accepted.inputId)).result;
      return r.status === "unanswered" || r.status === "done" ? r : undefined;
    }, "the aborted input's result");
    expect(result).toMatchObject({ status: "unanswered", reason: "aborted" });
    const operator = await client("ops", "operator");
    expect((await operator.session(name).tasks({ live: true })).items).toEqual([]);
  });

  it("PUT session onInterrupt: default retry, fail stored as the session's policy; another policy on the same session is 409", async () => {
    const api = await client("ops");
    const byDefault = api.session(uniqueSession("interrupt-default"));
    expect((await byDefault.create()).config).toMatchObject({ onInterrupt: "retry" });
    expect((await byDefault.create({ onInterrupt: "retry" })).created).toBe(false);
    const failing = api.session(uniqueSession("interrupt-fail"));
    expect((await failing.create({ onInterrupt: "fail" })).config).toMatchObject({ onInterrupt: "fail" });
    expect((await failing.get()).config).toMatchObject({ onInterrupt: "fail" });
    await expect(failing.create({ onInterrupt: "retry" })).rejects.toMatchObject({ status: 409 });
  });

  it("continue with nothing queued is 409 nothing_waiting, during a live turn 409 in_turn; input queued behind a live turn is not marked waiting; neither refusal writes", async () => {
    const api = await client("ops");
    const name = uniqueSession("continue");
    const s = api.session(name);
    await s.create({ model: "echo-slow" });
    const root = s.conversation("root");
    const seq = await lastSeq("ops", name);
    await expect(root.continue()).rejects.toMatchObject({ status: 409, code: "nothing_waiting" });
    expect(await lastSeq("ops", name)).toBe(seq);
    await root.accept("a long answer that streams for a while so that the turn stays live");
    const queued = await root.accept("after", { whenBusy: "followUp" });
    expect(queued.status).toBe("queued");
    const busy = await lastSeq("ops", name);
    await expect(root.continue()).rejects.toMatchObject({ status: 409, code: "in_turn" });
    expect(await lastSeq("ops", name)).toBe(busy);
    // Queued behind a live turn is not waiting: the turn places it at its boundary.
    expect((await root.snapshot()).inbox.map((item) => [item.id, item.waiting])).toEqual([[queued.inputId, false]]);
    await root.abort();
  });

  it("config is read and patched per conversation; a fork starts from the source's values", async () => {
    const api = await client("ops");
    const name = uniqueSession("config");
    const s = api.session(name);
    await s.create({ thinking: "low" });
    const root = s.conversation("root");
    // No selectedTools selects none; the default model reads back as `provider/model`.
    expect(await root.config()).toEqual({ model: "echo/echo", thinking: "low", selectedTools: [] });
    const answer = await root.accept("hi", { wait: 10 });
    const fork = await root.fork({ at: answer.answer?.id ?? 0 });
    // A bare alias is accepted and stored as its `provider/model` id.
    expect(await root.patchConfig({ model: "echo-slow", thinking: "high" })).toMatchObject({
      model: "echo/echo-slow",
      thinking: "high",
    });
    expect(await root.config()).toMatchObject({ model: "echo/echo-slow" });
    expect(await s.conversation(fork.conversationId).config()).toMatchObject({ model: "echo/echo", thinking: "low" });
  });

  it("reset writes a reset head and collapse starts a collapse task or says there is nothing to collapse", async () => {
    const api = await client("ops");
    const name = uniqueSession("reset");
    const s = api.session(name);
    await s.create({});
    const root = s.conversation("root");
    await root.accept("one", { wait: 10 });
    await root.reset();
    const entries = await root.entries({ limit: 100 });
    expect(entries.items[entries.items.length - 1]?.kind).toBe("reset");
    await expect(root.collapse()).rejects.toMatchObject({ status: 409 });
    for (let i = 0; i < 10; i++) await root.accept(`turn ${i}`, { wait: 10 });
    const collapse = await root.collapse("keep it short");
    expect(collapse.taskId).toBeGreaterThan(0);
  });
});

describe("operator routes", () => {
  it("usage, live tasks, task abort, inspect, shutdown, fault clear, quarantine release and delete", async () => {
    const operator = await client("ops", "operator");
    const name = uniqueSession("operator");
    const s = operator.session(name);
    await s.create({ model: "echo-slow" });
    await s.conversation("root").accept("usage please, paced so that a task is still live when listed", {});
    const live = await s.tasks({ live: true });
    expect(live.items.length).toBeGreaterThan(0);
    const task = live.items[0];
    if (task === undefined) throw new Error("no live task");
    const aborted = await s.abortTask(task.id);
    expect(aborted.id).toBe(task.id);
    await until(async () => ((await s.tasks({ live: true })).items.length === 0 ? true : undefined), "no live tasks");
    await expect(s.abortTask(task.id)).rejects.toMatchObject({ status: 409 });

    await s.conversation("root").accept("counted", { wait: 20 });
    const usage = await s.usage();
    expect(usage.totals?.attempts).toBeGreaterThan(0);
    expect(usage.rows.items.length).toBe(usage.totals?.attempts);

    const inspection = await s.inspect();
    expect(inspection.fault).toBeUndefined();
    expect(inspection.inflight).toEqual([]);
    expect(await s.clearFault()).toEqual({ cleared: false });
    await s.releaseTask(task.id);
    await expect(s.releaseTask(999_999)).rejects.toMatchObject({ status: 404, code: "task_not_found" });

    await s.shutdown();
    // Shut down, the session reopens on the next request (reopen starts nothing) and still answers.
    expect((await s.get()).lastSeq).toBeGreaterThan(0);

    await s.delete();
    await expect(s.get()).rejects.toMatchObject({ status: 404, code: "session_not_found" });
    expect(await lastSeq("ops", name)).toBe(0);
    // The name can be created again from scratch.
    expect((await s.create({})).created).toBe(true);
  });
});

/**
 * The job and new_context tools in a session Durable Object over HTTP, with the offline echo model
 * calling them (`/call NAME {json}`) and the scripted fake shell the object uses without a SANDBOX
 * binding: what `npm start` shows.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { call, json, token, uniqueSession } from "./http-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

interface Entry {
  readonly kind: string;
  readonly model?: { role: string; content: unknown }[];
}

function text(e: Entry | undefined): string {
  const content = e?.model?.[0]?.content;
  if (typeof content === "string") return content;
  return Array.isArray(content) ? content.map((p: { text?: string }) => p.text ?? "").join("") : "";
}

describe("job tools over HTTP", () => {
  it("the echo model calls job; the result is the command's output; the job is a task of the session", async () => {
    const name = uniqueSession("jobs");
    const t = await token("jobs", "client");
    expect(
      (await call("PUT", `/v1/sessions/${name}`, { token: t, body: { selectedTools: ["echo", "job", "new_context"] } }))
        .status,
    ).toBe(201);
    const res = await call("POST", `/v1/sessions/${name}/conversations/root/inputs?wait=20`, {
      token: t,
      body: { input: '/call job {"cmd":"echo hello from a job; exit 0"}' },
    });
    expect(res.status).toBe(201);
    const accepted = await json<{ result: { status: string } }>(res);
    expect(accepted.result.status).toBe("done");
    const entries = await json<{ items: Entry[] }>(
      await call("GET", `/v1/sessions/${name}/conversations/root/entries?kind=tool_result`, { token: t }),
    );
    expect(text(entries.items[0])).toBe("hello from a job\n");
    const op = await token("jobs", "operator");
    const tasks = await json<{ items: { kind: string; state: { status: string; cmd?: string } }[] }>(
      await call("GET", `/v1/sessions/${name}/tasks`, { token: op }),
    );
    expect(tasks.items.filter((task) => task.kind === "job").map((task) => task.state)).toMatchObject([
      { status: "exited", cmd: "echo hello from a job; exit 0" },
    ]);
  });

  it("the echo model calls new_context; the handoff lands after the exchange", async () => {
    const name = uniqueSession("handoff");
    const t = await token("jobs", "client");
    await call("PUT", `/v1/sessions/${name}`, { token: t, body: { selectedTools: ["new_context"] } });
    const res = await call("POST", `/v1/sessions/${name}/conversations/root/inputs?wait=20`, {
      token: t,
      body: { input: '/call new_context {"message":"start over with the plan"}' },
    });
    expect((await json<{ result: { status: string } }>(res)).result.status).toBe("done");
    const entries = await json<{ items: Entry[] }>(
      await call("GET", `/v1/sessions/${name}/conversations/root/entries`, { token: t }),
    );
    const kinds = entries.items.map((e) => e.kind);
    expect(kinds.indexOf("handoff")).toBeGreaterThan(kinds.indexOf("tool_result"));
  });
});

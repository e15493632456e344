/**
 * What a deployment can use (issue 10 "Real models"): GET /v1/models (client role) over HTTP, the
 * providers the Worker's bindings enable (catalogue secrets, MODEL_PROVIDERS), a misconfiguration as a
 * typed `misconfigured` problem, and a thinking level outside pi-ai's levels refused at the boundary.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { Env } from "../../src/worker/env.js";
import { listModels } from "../../src/worker/models.js";
import { Problem } from "../../src/worker/problems.js";
import { call, exists, json, token, uniqueSession } from "./http-fixtures.js";

const base = env as unknown as Env;

describe("GET /v1/models", () => {
  it("lists the echo models for a client; no token is 401, an agent token 403", async () => {
    const response = await call("GET", "/v1/models", { token: await token("models", "client") });
    expect(response.status).toBe(200);
    const body = await json<{ defaultModel: string; providers: string[]; models: { id: string; api: string }[] }>(response);
    expect(body.defaultModel).toBe("echo");
    expect(body.models.map((m) => m.id)).toEqual(expect.arrayContaining(["echo/echo", "echo/echo-slow"]));
    expect((await call("GET", "/v1/models")).status).toBe(401);
    expect((await call("GET", "/v1/models", { token: await token("models", "agent") })).status).toBe(403);
    expect((await call("GET", "/v1/models?x=1", { token: await token("models", "client") })).status).toBe(400);
  });

  it("a provider secret and a custom endpoint in the bindings add their models; a bad MODEL_PROVIDERS is misconfigured, naming the path", async () => {
    const listed = await listModels({
      ...base,
      GROQ_API_KEY: "gsk-test",
      MODEL_PROVIDERS: JSON.stringify([{ id: "vllm", baseUrl: "http://10.0.0.5:8000/v1", api: "openai-completions", keySecret: "VLLM_KEY", models: [{ id: "qwen3-32b", reasoning: true }] }]),
    } as Env);
    expect(listed.providers).toEqual(expect.arrayContaining(["echo", "groq", "vllm"]));
    expect(listed.models).toEqual(expect.arrayContaining([expect.objectContaining({ id: "vllm/qwen3-32b", api: "openai-completions", reasoning: true })]));
    expect(listed.models.some((m) => m.provider === "groq")).toBe(true);
    expect(listed.providers).not.toContain("anthropic");
    const bad = listModels({ ...base, MODEL_PROVIDERS: JSON.stringify([{ id: "x", baseUrl: "http://h", api: "grpc", models: ["a"] }]) } as Env);
    await expect(bad).rejects.toBeInstanceOf(Problem);
    await expect(bad).rejects.toMatchObject({ code: "misconfigured", detail: expect.stringContaining("MODEL_PROVIDERS[0].api") });
  });
});

describe("thinking at the boundary", () => {
  it("a thinking level that is not one of pi-ai's is 400 naming the field and creates nothing", async () => {
    const name = uniqueSession("thinking");
    const response = await call("PUT", `/v1/sessions/${name}`, { token: await token("models", "client"), body: { thinking: "loud" } });
    expect(response.status).toBe(400);
    expect(await json(response)).toMatchObject({ code: "invalid_body", field: "thinking" });
    expect(await exists("models", name)).toBe(false);
  });
});

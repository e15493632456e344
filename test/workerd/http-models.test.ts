/**
 * What a deployment can use (docs/models.md): GET /v1/models (client role) over HTTP, the
 * providers the Worker's bindings enable (catalogue secrets, MODEL_PROVIDERS), a misconfiguration as a
 * typed `misconfigured` problem, a thinking level outside pi-ai's levels refused at the boundary, and
 * the generation retry policy set by configuration (MODEL_RETRY_* vars, src/worker/platform/retry-config.ts).
 */
import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { Env } from "../../src/worker/env.js";
import { defaultTurnOptions } from "../../src/kinds/services.js";
import { sessionTurnKit } from "../../src/worker/session/kinds.js";
import { buildModels, listModels } from "../../src/worker/platform/models.js";
import { Problem } from "../../src/worker/problems.js";
import { retryOptions } from "../../src/worker/platform/retry-config.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { call, exists, json, token, uniqueSession } from "./http-fixtures.js";

const base = env as unknown as Env;

describe("GET /v1/models", () => {
  it("lists the echo models for a client; no token is 401, an agent token 403", async () => {
    const response = await call("GET", "/v1/models", { token: await token("models", "client") });
    expect(response.status).toBe(200);
    const body = await json<{ defaultModel: string; providers: string[]; models: { id: string; api: string }[] }>(
      response,
    );
    expect(body.defaultModel).toBe("echo/echo");
    expect(body.models.map((m) => m.id)).toEqual(expect.arrayContaining(["echo/echo", "echo/echo-slow"]));
    expect((await call("GET", "/v1/models")).status).toBe(401);
    expect(
      (await call("GET", "/v1/models", { token: await token("models", "agent", { sessions: ["any"] }) })).status,
    ).toBe(403);
    expect((await call("GET", "/v1/models?x=1", { token: await token("models", "client") })).status).toBe(400);
  });

  it("a provider secret and a custom endpoint in the bindings add their models; a bad MODEL_PROVIDERS is misconfigured, naming the path", async () => {
    const listed = await listModels({
      ...base,
      GROQ_API_KEY: "gsk-test",
      MODEL_PROVIDERS: JSON.stringify([
        {
          id: "vllm",
          baseUrl: "http://10.0.0.5:8000/v1",
          api: "openai-completions",
          keySecret: "VLLM_KEY",
          models: [{ id: "qwen3-32b", reasoning: true }],
        },
      ]),
    } as Env);
    expect(listed.providers).toEqual(expect.arrayContaining(["echo", "groq", "vllm"]));
    expect(listed.models).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: "vllm/qwen3-32b", api: "openai-completions", reasoning: true }),
      ]),
    );
    expect(listed.models.some((m) => m.provider === "groq")).toBe(true);
    expect(listed.providers).not.toContain("anthropic");
    // DEFAULT_MODEL may name a bare alias; the listing reports it as `provider/model`.
    expect((await listModels({ ...base, DEFAULT_MODEL: "echo-slow" } as Env)).defaultModel).toBe("echo/echo-slow");
    const bad = listModels({
      ...base,
      MODEL_PROVIDERS: JSON.stringify([{ id: "x", baseUrl: "http://h", api: "grpc", models: ["a"] }]),
    } as Env);
    await expect(bad).rejects.toBeInstanceOf(Problem);
    await expect(bad).rejects.toMatchObject({
      code: "misconfigured",
      detail: expect.stringContaining("MODEL_PROVIDERS[0].api"),
    });
  });
});

describe("thinking at the boundary", () => {
  it("a thinking level that is not one of pi-ai's is 400 naming the field and creates nothing", async () => {
    const name = uniqueSession("thinking");
    const response = await call("PUT", `/v1/sessions/${name}`, {
      token: await token("models", "client"),
      body: { thinking: "loud" },
    });
    expect(response.status).toBe(400);
    expect(await json(response)).toMatchObject({ code: "invalid_body", field: "thinking" });
    expect(await exists("models", name)).toBe(false);
  });
});

describe("the retry policy from configuration (MODEL_RETRY_* vars)", () => {
  it("unset vars keep the turn kit's defaults; set vars (strings or typed [vars] values) become the session kit's retry options", async () => {
    expect(retryOptions(base)).toEqual({
      maxAttempts: defaultTurnOptions.maxAttempts,
      retryBaseMs: defaultTurnOptions.retryBaseMs,
      retryMaxDelayMs: defaultTurnOptions.retryMaxDelayMs,
      retryJitter: defaultTurnOptions.retryJitter,
      retryHonourHints: true,
    });
    const configured = retryOptions({
      MODEL_RETRY_ATTEMPTS: "3",
      MODEL_RETRY_BASE_MS: 500,
      MODEL_RETRY_MAX_MS: " 60000 ",
      MODEL_RETRY_JITTER: "0",
      MODEL_RETRY_HONOUR_HINTS: "false",
    });
    expect(configured).toEqual({
      maxAttempts: 3,
      retryBaseMs: 500,
      retryMaxDelayMs: 60_000,
      retryJitter: 0,
      retryHonourHints: false,
    });
    const kit = sessionTurnKit(await buildModels(base), { turn: configured });
    expect(kit.options).toMatchObject(configured);
    expect(kit.options.flushMs).toBe(defaultTurnOptions.flushMs);
  });

  it("a bad value is a misconfigured problem naming the var and saying what it expects", () => {
    const cases: [Record<string, unknown>, string, string][] = [
      [{ MODEL_RETRY_ATTEMPTS: "0" }, "MODEL_RETRY_ATTEMPTS", "from 1 to 100"],
      [{ MODEL_RETRY_ATTEMPTS: "2.5" }, "MODEL_RETRY_ATTEMPTS", "whole number"],
      [{ MODEL_RETRY_ATTEMPTS: "many" }, "MODEL_RETRY_ATTEMPTS", "whole number"],
      [{ MODEL_RETRY_BASE_MS: "-1" }, "MODEL_RETRY_BASE_MS", "whole number"],
      [{ MODEL_RETRY_MAX_MS: 1e12 }, "MODEL_RETRY_MAX_MS", "from 1 to 86400000"],
      [{ MODEL_RETRY_JITTER: "1.5" }, "MODEL_RETRY_JITTER", "from 0 to 1"],
      [{ MODEL_RETRY_HONOUR_HINTS: "yes" }, "MODEL_RETRY_HONOUR_HINTS", "true or false"],
      [{ MODEL_RETRY_ATTEMPTS: { n: 3 } }, "MODEL_RETRY_ATTEMPTS", "a string or number"],
      [{ MODEL_RETRY_BASE_MS: "10000", MODEL_RETRY_MAX_MS: "5000" }, "MODEL_RETRY_MAX_MS", "above the longest wait"],
      [{ MODEL_RETRY_BASE_MS: "600000" }, "MODEL_RETRY_BASE_MS", "above the longest wait"],
    ];
    for (const [vars, name, expected] of cases) {
      let thrown: unknown;
      try {
        retryOptions(vars);
      } catch (error) {
        thrown = error;
      }
      expect(thrown, JSON.stringify(vars)).toBeInstanceOf(Problem);
      expect(thrown, JSON.stringify(vars)).toMatchObject({
        code: "misconfigured",
        detail: expect.stringContaining(`${name} is invalid`),
      });
      expect((thrown as Problem).detail, JSON.stringify(vars)).toContain(expected);
    }
  });

  it("a session object whose bindings carry a bad MODEL_RETRY_ATTEMPTS refuses to create the session (misconfigured) and writes nothing", async () => {
    const name = uniqueSession("retry-config");
    const namespace = base.SESSIONS;
    const stub = namespace.get(namespace.idFromName(`models:${name}`)) as unknown as DurableObjectStub<SessionObject>;
    await runInDurableObject(stub, async (instance: SessionObject, state) => {
      Object.defineProperty(instance, "env", { value: { ...base, MODEL_RETRY_ATTEMPTS: "0" } });
      const outcome = await instance.createSession({});
      expect(outcome).toMatchObject({
        ok: false,
        problem: { code: "misconfigured", detail: expect.stringContaining("MODEL_RETRY_ATTEMPTS") },
      });
      expect([
        ...state.storage.sql.exec(
          "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_cf\\_%' ESCAPE '\\' AND name <> 'sqlite_sequence'",
        ),
      ]).toEqual([]);
    });
    expect(await exists("models", name)).toBe(false);
  });
});

/**
 * The generation's request options and retry policy (src/kinds/model-request.ts, docs/models.md
 * "Retries") and the custom-provider configuration (src/models/providers.ts): thinking levels per model, the
 * provider's retry hints, jittered capped backoff, and typed configuration errors.
 */
import { fauxAssistantMessage, type Api, type Model } from "@earendil-works/pi-ai";
import { describe, expect, it } from "vitest";
import {
  attemptOptions,
  backoffMs,
  exchangeProbe,
  reasoningFor,
  retryDecision,
  retryHintMs,
  type ExchangeProbe,
} from "../../src/kinds/model-request.js";
import {
  buildProviderModels,
  CATALOGUE,
  enabledCatalogue,
  parseCustomProviders,
  ProviderConfigError,
  secretsOf,
} from "../../src/models/providers.js";

const reasoningModel = {
  id: "m",
  name: "m",
  api: "openai-completions",
  provider: "p",
  baseUrl: "http://x",
  reasoning: true,
  input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 1000,
  maxTokens: 100,
} as Model<Api>;
const plainModel = { ...reasoningModel, reasoning: false } as Model<Api>;

function probeWith(status: number, headers: Record<string, string>): ExchangeProbe {
  return { fetch: globalThis.fetch, requests: 1, last: { status, headers: new Headers(headers) } };
}

const failed = (errorMessage: string) => fauxAssistantMessage([], { stopReason: "error", errorMessage });

describe("thinking", () => {
  it("maps the conversation's level to pi-ai's reasoning option; off, unset, unknown and non-reasoning models send none", () => {
    expect(reasoningFor(reasoningModel, "high")).toBe("high");
    expect(reasoningFor(reasoningModel, "off")).toBeUndefined();
    expect(reasoningFor(reasoningModel, null)).toBeUndefined();
    expect(reasoningFor(reasoningModel, "loud")).toBeUndefined();
    expect(reasoningFor(plainModel, "high")).toBeUndefined();
    const options = attemptOptions(reasoningModel, "low", new AbortController().signal, exchangeProbe());
    expect(options).toMatchObject({ reasoning: "low", maxRetries: 0 });
    expect(typeof options.fetch).toBe("function");
  });
});

describe("retry hints", () => {
  it("reads retry-after-ms, retry-after seconds and HTTP dates, and OpenAI's reset headers on a 429", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(retryHintMs(failed("429"), probeWith(429, { "retry-after-ms": "1500" }), now)).toBe(1500);
    expect(retryHintMs(failed("429"), probeWith(429, { "retry-after": "30" }), now)).toBe(30_000);
    expect(retryHintMs(failed("503"), probeWith(503, { "retry-after": "Thu, 01 Jan 2026 00:02:00 GMT" }), now)).toBe(
      120_000,
    );
    expect(
      retryHintMs(
        failed("429"),
        probeWith(429, { "x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s" }),
        now,
      ),
    ).toBe(360_000);
    expect(retryHintMs(failed("500"), probeWith(500, {}), now)).toBeUndefined();
  });

  it("reads a hint in the error text (Gemini's retryDelay, 'try again in')", () => {
    expect(retryHintMs(failed('429 {"error":{"details":[{"retryDelay":"42s"}]}}'), undefined, 0)).toBe(42_000);
    expect(retryHintMs(failed("Rate limit reached. Please try again in 1.5s."), undefined, 0)).toBe(1500);
    expect(retryHintMs(failed("Please retry in 2 minutes"), undefined, 0)).toBe(120_000);
    expect(retryHintMs(failed("overloaded"), undefined, 0)).toBeUndefined();
  });
});

describe("backoff", () => {
  const policy = { retryBaseMs: 2000, retryMaxDelayMs: 300_000, retryJitter: 0.25 };

  it("doubles per attempt, adds at most the jitter fraction, and stops at the cap", () => {
    expect(backoffMs(policy, 1, () => 0)).toBe(2000);
    expect(backoffMs(policy, 3, () => 0)).toBe(8000);
    expect(backoffMs(policy, 3, () => 0.999)).toBeLessThanOrEqual(10_000);
    expect(backoffMs(policy, 3, () => 0.999)).toBeGreaterThan(9_900);
    expect(backoffMs(policy, 12, () => 0)).toBe(300_000);
  });

  it("takes the longer of the hint and the backoff; a hint over the cap gives up with the reason", () => {
    expect(retryDecision(policy, 1, 30_000, () => 0)).toEqual({ type: "wait", delayMs: 30_000, hinted: true });
    expect(retryDecision(policy, 1, 100, () => 0)).toEqual({ type: "wait", delayMs: 2000, hinted: false });
    const decision = retryDecision(policy, 1, 3_600_000, () => 0);
    expect(decision.type).toBe("give_up");
    expect(decision.type === "give_up" ? decision.reason : "").toContain("3600 s");
  });
});

describe("providers", () => {
  it("a catalogue provider is enabled only when all its secrets are set", () => {
    const ids = (values: Record<string, string>) => enabledCatalogue(secretsOf(values)).map((p) => p.id);
    expect(ids({})).toEqual([]);
    expect(ids({ ANTHROPIC_API_KEY: "k", GROQ_API_KEY: " " })).toEqual(["anthropic"]);
    expect(ids({ CLOUDFLARE_API_KEY: "k" })).toEqual([]);
    expect(ids({ CLOUDFLARE_API_KEY: "k", CLOUDFLARE_ACCOUNT_ID: "a" })).toEqual(["cloudflare-workers-ai"]);
    expect(new Set(CATALOGUE.map((p) => p.id)).size).toBe(CATALOGUE.length);
  });

  it("every catalogue factory loads and its provider has the catalogue's id and models", async () => {
    for (const entry of CATALOGUE) {
      const provider = await entry.load();
      expect(provider.id, entry.id).toBe(entry.id);
      expect(provider.getModels().length, entry.id).toBeGreaterThan(0);
    }
  }, 60_000);

  it("pi-ai reads each catalogue provider's key from the secret the catalogue names, so the secret that enables a provider is the one its requests send", async () => {
    for (const entry of CATALOGUE) {
      const values = Object.fromEntries(entry.secrets.map((name, i) => [name, `value-${i}-of-${entry.id}`]));
      const models = await buildProviderModels(secretsOf(values), []);
      expect(
        models.getProviders().map((p) => p.id),
        entry.id,
      ).toContain(entry.id);
      // The key goes in `apiKey` or, for AI Gateway, in its `cf-aig-authorization` header; account and
      // gateway ids in the provider's env. Every secret the catalogue requires is one pi-ai reads.
      const auth = JSON.stringify(await models.getAuth(entry.id)) ?? "(no auth resolved)";
      for (const value of Object.values(values)) expect(auth, entry.id).toContain(value);
    }
  }, 60_000);

  it("custom endpoints parse from a JSON string; each bad declaration is a typed error naming its path", () => {
    expect(
      parseCustomProviders(
        '[{"id":"vllm","baseUrl":"http://h:8000/v1/","api":"openai-completions","keySecret":"VLLM_KEY","models":["a",{"id":"b","reasoning":true}]}]',
      ),
    ).toEqual([
      {
        id: "vllm",
        baseUrl: "http://h:8000/v1",
        api: "openai-completions",
        keySecret: "VLLM_KEY",
        models: [{ id: "a" }, { id: "b", reasoning: true }],
      },
    ]);
    expect(parseCustomProviders("")).toEqual([]);
    const bad: [unknown, string][] = [
      ["{", "MODEL_PROVIDERS"],
      [{}, "MODEL_PROVIDERS"],
      [[{ id: "Bad Id", baseUrl: "http://h", api: "openai-completions", models: ["a"] }], "MODEL_PROVIDERS[0].id"],
      [[{ id: "anthropic", baseUrl: "http://h", api: "openai-completions", models: ["a"] }], "MODEL_PROVIDERS[0].id"],
      [[{ id: "x", baseUrl: "ftp://h", api: "openai-completions", models: ["a"] }], "MODEL_PROVIDERS[0].baseUrl"],
      [[{ id: "x", baseUrl: "http://h", api: "grpc", models: ["a"] }], "MODEL_PROVIDERS[0].api"],
      [[{ id: "x", baseUrl: "http://h", api: "openai-completions", models: [] }], "MODEL_PROVIDERS[0].models"],
      [
        [{ id: "x", baseUrl: "http://h", api: "openai-completions", models: [{ id: "a", contextWindow: -1 }] }],
        "MODEL_PROVIDERS[0].models[0].contextWindow",
      ],
      [
        [{ id: "x", baseUrl: "http://h", api: "openai-completions", keySecret: "lower", models: ["a"] }],
        "MODEL_PROVIDERS[0].keySecret",
      ],
    ];
    for (const [raw, path] of bad) {
      let error: unknown;
      try {
        parseCustomProviders(raw);
      } catch (caught) {
        error = caught;
      }
      expect(error, path).toBeInstanceOf(ProviderConfigError);
      expect((error as ProviderConfigError).path).toBe(path);
    }
  });
});

/**
 * The real model providers a deployment can use (§8.2 "model"; docs/models.md; this layer imports pi-ai
 * only): every pi-ai catalogue provider that authenticates with an API key, enabled by its usual
 * secret, and custom OpenAI- or Anthropic-compatible endpoints declared in configuration and built
 * with pi-ai's `createProvider`. A provider module is imported (dynamic `import()`) only when its
 * secret is set, and its SDK only on its first request (pi-ai's lazy API wrappers), so no provider
 * is evaluated at startup. OAuth, cloud credential files and AWS signing (Bedrock, Vertex ADC,
 * GitHub Copilot, OpenAI Codex) are out of scope.
 */
import {
  createModels,
  createProvider,
  type Api,
  type Model,
  type MutableModels,
  type Provider,
  type ProviderStreams,
} from "@earendil-works/pi-ai";

/** A catalogue provider: its pi-ai id, the secrets that must all be set, and its lazy factory. */
export interface CatalogueProvider {
  readonly id: string;
  readonly name: string;
  /** Every one of these must be set (a Cloudflare provider also needs its account id). */
  readonly secrets: readonly string[];
  readonly load: () => Promise<Provider>;
}

/** pi-ai 1.6's API-key providers, in the order of docs/models.md. Literal imports, so bundlers can see them. */
export const CATALOGUE: readonly CatalogueProvider[] = [
  {
    id: "anthropic",
    name: "Anthropic",
    secrets: ["ANTHROPIC_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/anthropic")).anthropicProvider(),
  },
  {
    id: "openai",
    name: "OpenAI",
    secrets: ["OPENAI_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/openai")).openaiProvider(),
  },
  {
    id: "google",
    name: "Google Gemini",
    secrets: ["GEMINI_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/google")).googleProvider(),
  },
  {
    id: "mistral",
    name: "Mistral",
    secrets: ["MISTRAL_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/mistral")).mistralProvider(),
  },
  {
    id: "groq",
    name: "Groq",
    secrets: ["GROQ_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/groq")).groqProvider(),
  },
  {
    id: "xai",
    name: "xAI",
    secrets: ["XAI_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/xai")).xaiProvider(),
  },
  {
    id: "deepseek",
    name: "DeepSeek",
    secrets: ["DEEPSEEK_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/deepseek")).deepseekProvider(),
  },
  {
    id: "openrouter",
    name: "OpenRouter",
    secrets: ["OPENROUTER_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/openrouter")).openrouterProvider(),
  },
  {
    id: "cerebras",
    name: "Cerebras",
    secrets: ["CEREBRAS_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/cerebras")).cerebrasProvider(),
  },
  {
    id: "fireworks",
    name: "Fireworks",
    secrets: ["FIREWORKS_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/fireworks")).fireworksProvider(),
  },
  {
    id: "together",
    name: "Together AI",
    secrets: ["TOGETHER_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/together")).togetherProvider(),
  },
  {
    id: "baseten",
    name: "Baseten",
    secrets: ["BASETEN_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/baseten")).basetenProvider(),
  },
  {
    id: "huggingface",
    name: "Hugging Face",
    secrets: ["HF_TOKEN"],
    load: async () => (await import("@earendil-works/pi-ai/providers/huggingface")).huggingfaceProvider(),
  },
  {
    id: "nvidia",
    name: "NVIDIA NIM",
    secrets: ["NVIDIA_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/nvidia")).nvidiaProvider(),
  },
  {
    id: "vercel-ai-gateway",
    name: "Vercel AI Gateway",
    secrets: ["AI_GATEWAY_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/vercel-ai-gateway")).vercelAIGatewayProvider(),
  },
  {
    id: "azure",
    name: "Azure OpenAI",
    secrets: ["AZURE_OPENAI_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/azure")).azureProvider(),
  },
  {
    id: "cloudflare-workers-ai",
    name: "Cloudflare Workers AI",
    secrets: ["CLOUDFLARE_API_KEY", "CLOUDFLARE_ACCOUNT_ID"],
    load: async () =>
      (await import("@earendil-works/pi-ai/providers/cloudflare-workers-ai")).cloudflareWorkersAIProvider(),
  },
  {
    id: "cloudflare-ai-gateway",
    name: "Cloudflare AI Gateway",
    secrets: ["CLOUDFLARE_API_KEY", "CLOUDFLARE_ACCOUNT_ID", "CLOUDFLARE_GATEWAY_ID"],
    load: async () =>
      (await import("@earendil-works/pi-ai/providers/cloudflare-ai-gateway")).cloudflareAIGatewayProvider(),
  },
  {
    id: "zai",
    name: "Z.ai",
    secrets: ["ZAI_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/zai")).zaiProvider(),
  },
  {
    id: "zai-coding-cn",
    name: "Z.ai Coding Plan (China)",
    secrets: ["ZAI_CODING_CN_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/zai-coding-cn")).zaiCodingCnProvider(),
  },
  {
    id: "minimax",
    name: "MiniMax",
    secrets: ["MINIMAX_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/minimax")).minimaxProvider(),
  },
  {
    id: "minimax-cn",
    name: "MiniMax (China)",
    secrets: ["MINIMAX_CN_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/minimax-cn")).minimaxCnProvider(),
  },
  {
    id: "moonshotai",
    name: "Moonshot AI",
    secrets: ["MOONSHOT_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/moonshotai")).moonshotaiProvider(),
  },
  {
    id: "moonshotai-cn",
    name: "Moonshot AI (China)",
    secrets: ["MOONSHOT_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/moonshotai-cn")).moonshotaiCnProvider(),
  },
  {
    id: "kimi-coding",
    name: "Kimi For Coding",
    secrets: ["KIMI_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/kimi-coding")).kimiCodingProvider(),
  },
  {
    id: "opencode",
    name: "OpenCode Zen",
    secrets: ["OPENCODE_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/opencode")).opencodeProvider(),
  },
  {
    id: "opencode-go",
    name: "OpenCode Go",
    secrets: ["OPENCODE_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/opencode-go")).opencodeGoProvider(),
  },
  {
    id: "meta",
    name: "Meta",
    secrets: ["META_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/meta")).metaProvider(),
  },
  {
    id: "ant-ling",
    name: "Ant Ling",
    secrets: ["ANT_LING_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/ant-ling")).antLingProvider(),
  },
  {
    id: "radius",
    name: "Radius",
    secrets: ["RADIUS_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/radius")).radiusProvider(),
  },
  {
    id: "qwen-token-plan",
    name: "Qwen Token Plan (Team)",
    secrets: ["QWEN_TOKEN_PLAN_TEAM_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/qwen-token-plan")).qwenTokenPlanProvider(),
  },
  {
    id: "qwen-token-plan-individual",
    name: "Qwen Token Plan (Individual)",
    secrets: ["QWEN_TOKEN_PLAN_INDIVIDUAL_API_KEY"],
    load: async () =>
      (await import("@earendil-works/pi-ai/providers/qwen-token-plan-individual")).qwenTokenPlanIndividualProvider(),
  },
  {
    id: "qwen-token-plan-cn",
    name: "Qwen Token Plan (Team, China)",
    secrets: ["QWEN_TOKEN_PLAN_TEAM_CN_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/qwen-token-plan-cn")).qwenTokenPlanCnProvider(),
  },
  {
    id: "qwen-token-plan-individual-cn",
    name: "Qwen Token Plan (Individual, China)",
    secrets: ["QWEN_TOKEN_PLAN_INDIVIDUAL_CN_API_KEY"],
    load: async () =>
      (
        await import("@earendil-works/pi-ai/providers/qwen-token-plan-individual-cn")
      ).qwenTokenPlanIndividualCnProvider(),
  },
  {
    id: "xiaomi",
    name: "Xiaomi MiMo",
    secrets: ["XIAOMI_API_KEY"],
    load: async () => (await import("@earendil-works/pi-ai/providers/xiaomi")).xiaomiProvider(),
  },
  {
    id: "xiaomi-token-plan-cn",
    name: "Xiaomi MiMo Token Plan (China)",
    secrets: ["XIAOMI_TOKEN_PLAN_CN_API_KEY"],
    load: async () =>
      (await import("@earendil-works/pi-ai/providers/xiaomi-token-plan-cn")).xiaomiTokenPlanCnProvider(),
  },
  {
    id: "xiaomi-token-plan-ams",
    name: "Xiaomi MiMo Token Plan (Amsterdam)",
    secrets: ["XIAOMI_TOKEN_PLAN_AMS_API_KEY"],
    load: async () =>
      (await import("@earendil-works/pi-ai/providers/xiaomi-token-plan-ams")).xiaomiTokenPlanAmsProvider(),
  },
  {
    id: "xiaomi-token-plan-sgp",
    name: "Xiaomi MiMo Token Plan (Singapore)",
    secrets: ["XIAOMI_TOKEN_PLAN_SGP_API_KEY"],
    load: async () =>
      (await import("@earendil-works/pi-ai/providers/xiaomi-token-plan-sgp")).xiaomiTokenPlanSgpProvider(),
  },
];

// ---------------------------------------------------------------------------------------------
// Custom endpoints

export const CUSTOM_APIS = ["openai-completions", "openai-responses", "anthropic-messages"] as const;
export type CustomApi = (typeof CUSTOM_APIS)[number];

export interface CustomModelConfig {
  readonly id: string;
  readonly name?: string;
  readonly contextWindow?: number;
  readonly maxTokens?: number;
  readonly reasoning?: boolean;
}

/** One operator-declared endpoint (vLLM, Ollama, a company gateway). */
export interface CustomProviderConfig {
  readonly id: string;
  readonly name?: string;
  readonly baseUrl: string;
  readonly api: CustomApi;
  readonly models: readonly CustomModelConfig[];
  /** The secret (binding) holding its API key; absent for a keyless endpoint. */
  readonly keySecret?: string;
}

/** A configuration error: names the offending path and says what was expected. Writes nothing. */
export class ProviderConfigError extends Error {
  readonly path: string;
  constructor(path: string, message: string) {
    super(`${path}: ${message}`);
    this.name = "ProviderConfigError";
    this.path = path;
  }
}

const ID = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const SECRET = /^[A-Z][A-Z0-9_]{0,127}$/;

/** Parse `MODEL_PROVIDERS` (a JSON array, as a string or already parsed); throws ProviderConfigError. */
export function parseCustomProviders(raw: unknown): CustomProviderConfig[] {
  let value = raw;
  if (typeof raw === "string") {
    if (raw.trim() === "") return [];
    try {
      value = JSON.parse(raw) as unknown;
    } catch (error) {
      throw new ProviderConfigError(
        "MODEL_PROVIDERS",
        `not valid JSON (${error instanceof Error ? error.message : String(error)})`,
      );
    }
  }
  if (!Array.isArray(value)) throw new ProviderConfigError("MODEL_PROVIDERS", "expected a JSON array of providers");
  const seen = new Set<string>();
  return value.map((item: unknown, i) => {
    const at = `MODEL_PROVIDERS[${i}]`;
    const p = record(item, at);
    const id = text(p["id"], `${at}.id`);
    if (!ID.test(id))
      throw new ProviderConfigError(`${at}.id`, "lower-case letters, digits, '.', '_' or '-' (at most 64)");
    if (seen.has(id) || CATALOGUE.some((c) => c.id === id) || id === "echo")
      throw new ProviderConfigError(`${at}.id`, `provider id ${id} is already taken`);
    seen.add(id);
    const baseUrl = text(p["baseUrl"], `${at}.baseUrl`);
    if (!/^https?:\/\/[^\s]+$/.test(baseUrl)) throw new ProviderConfigError(`${at}.baseUrl`, "an http(s) URL");
    const api = text(p["api"], `${at}.api`);
    if (!(CUSTOM_APIS as readonly string[]).includes(api))
      throw new ProviderConfigError(`${at}.api`, `one of ${CUSTOM_APIS.join(", ")}`);
    const keySecret = p["keySecret"] === undefined ? undefined : text(p["keySecret"], `${at}.keySecret`);
    if (keySecret !== undefined && !SECRET.test(keySecret))
      throw new ProviderConfigError(`${at}.keySecret`, "a secret name such as MY_GATEWAY_KEY");
    const name = p["name"] === undefined ? undefined : text(p["name"], `${at}.name`);
    if (!Array.isArray(p["models"]) || p["models"].length === 0)
      throw new ProviderConfigError(
        `${at}.models`,
        "a non-empty array of model ids or { id, name?, contextWindow?, maxTokens?, reasoning? }",
      );
    const models = (p["models"] as unknown[]).map((m, j): CustomModelConfig => {
      const mAt = `${at}.models[${j}]`;
      if (typeof m === "string") return { id: text(m, mAt) };
      const o = record(m, mAt);
      const out: { id: string; name?: string; contextWindow?: number; maxTokens?: number; reasoning?: boolean } = {
        id: text(o["id"], `${mAt}.id`),
      };
      if (o["name"] !== undefined) out.name = text(o["name"], `${mAt}.name`);
      if (o["contextWindow"] !== undefined) out.contextWindow = positive(o["contextWindow"], `${mAt}.contextWindow`);
      if (o["maxTokens"] !== undefined) out.maxTokens = positive(o["maxTokens"], `${mAt}.maxTokens`);
      if (o["reasoning"] !== undefined) {
        if (typeof o["reasoning"] !== "boolean") throw new ProviderConfigError(`${mAt}.reasoning`, "true or false");
        out.reasoning = o["reasoning"];
      }
      return out;
    });
    return {
      id,
      baseUrl: baseUrl.replace(/\/+$/, ""),
      api: api as CustomApi,
      models,
      ...(name === undefined ? {} : { name }),
      ...(keySecret === undefined ? {} : { keySecret }),
    };
  });
}

function record(value: unknown, at: string): Readonly<Record<string, unknown>> {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new ProviderConfigError(at, "expected an object");
  return value as Readonly<Record<string, unknown>>;
}

function text(value: unknown, at: string): string {
  if (typeof value !== "string" || value.trim() === "" || value.length > 500)
    throw new ProviderConfigError(at, "a non-empty string");
  return value;
}

function positive(value: unknown, at: string): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value <= 0)
    throw new ProviderConfigError(at, "a positive integer");
  return value;
}

async function customApi(api: CustomApi): Promise<ProviderStreams> {
  switch (api) {
    case "openai-completions":
      return (await import("@earendil-works/pi-ai/api/openai-completions.lazy")).openAICompletionsApi();
    case "openai-responses":
      return (await import("@earendil-works/pi-ai/api/openai-responses.lazy")).openAIResponsesApi();
    case "anthropic-messages":
      return (await import("@earendil-works/pi-ai/api/anthropic-messages.lazy")).anthropicMessagesApi();
    default: {
      const never: never = api;
      return never;
    }
  }
}

/** The key a keyless custom endpoint is sent (`Authorization: Bearer keyless`, `x-api-key: keyless`). */
export const KEYLESS_PLACEHOLDER = "keyless";

/** Build one custom provider with pi-ai's createProvider; its key comes from `secrets[keySecret]`. */
export async function customProvider(config: CustomProviderConfig, secrets: Secrets): Promise<Provider> {
  const models: Model<Api>[] = config.models.map((m) => ({
    id: m.id,
    name: m.name ?? m.id,
    api: config.api,
    provider: config.id,
    baseUrl: config.baseUrl,
    reasoning: m.reasoning ?? false,
    input: ["text"],
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    contextWindow: m.contextWindow ?? 128_000,
    maxTokens: m.maxTokens ?? 16_384,
  }));
  const keySecret = config.keySecret;
  return createProvider({
    id: config.id,
    name: config.name ?? config.id,
    baseUrl: config.baseUrl,
    auth: {
      apiKey: {
        name: `${config.name ?? config.id} API key`,
        // Keyless endpoints (a local vLLM or Ollama) get a placeholder key: pi-ai's API modules refuse
        // to send a request with no key at all ("No API key for provider"), and such servers ignore it.
        resolve: async () => {
          if (keySecret === undefined) return { auth: { apiKey: KEYLESS_PLACEHOLDER }, source: "none" };
          const key = secrets(keySecret);
          return key === undefined ? undefined : { auth: { apiKey: key }, source: keySecret };
        },
      },
    },
    models,
    api: await customApi(config.api),
  });
}

// ---------------------------------------------------------------------------------------------
// The collection

/** Reads a secret or variable by name; undefined when unset or blank. */
export type Secrets = (name: string) => string | undefined;

export function secretsOf(values: Readonly<Record<string, unknown>>): Secrets {
  return (name) => {
    const value = values[name];
    return typeof value === "string" && value.trim() !== "" ? value : undefined;
  };
}

/** The catalogue providers whose secrets are all set. */
export function enabledCatalogue(secrets: Secrets): CatalogueProvider[] {
  return CATALOGUE.filter((p) => p.secrets.every((name) => secrets(name) !== undefined));
}

/**
 * A pi-ai Models collection with `extra` providers (the offline ones), every enabled catalogue
 * provider and the custom endpoints. Provider auth reads `secrets`, never `process.env`.
 */
export async function buildProviderModels(
  secrets: Secrets,
  custom: readonly CustomProviderConfig[],
  extra: readonly Provider[] = [],
): Promise<MutableModels> {
  const models = createModels({
    authContext: {
      env: async (name) => secrets(name),
      fileExists: async () => false,
    },
  });
  for (const provider of extra) models.setProvider(provider);
  const loaded = await Promise.all([
    ...enabledCatalogue(secrets).map((p) => p.load()),
    ...custom.map((c) => customProvider(c, secrets)),
  ]);
  for (const provider of loaded) models.setProvider(provider);
  return models;
}

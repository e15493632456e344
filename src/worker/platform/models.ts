/**
 * The pi-ai models a session Durable Object runs with (§8.2 "model"): always the built-in
 * deterministic `echo` models (offline, tests), plus every pi-ai catalogue provider whose API key
 * secret is set and every custom endpoint declared in `MODEL_PROVIDERS` (src/models/providers.ts;
 * the "Providers" table of docs/models.md says which secret enables which provider).
 *
 * Providers read their keys through an auth context over the Worker's bindings (not `process.env`).
 * The model a session uses is its `model` config value; `DEFAULT_MODEL` (else `echo/echo`) is what a
 * session gets when its PUT names none. `GET /v1/models` lists what a deployment can use. Model ids are
 * reported in one form, `provider/model`; a bare id (`echo`) is accepted on input as an alias.
 */
import type { Api, Model, Models } from "@earendil-works/pi-ai";
import {
  buildProviderModels,
  parseCustomProviders,
  ProviderConfigError,
  secretsOf,
  type CustomProviderConfig,
} from "../../models/providers.js";
import { echoProvider, ECHO_MODEL, ECHO_PROVIDER } from "./echo-model.js";
import { modelResolver } from "../../kinds/services.js";
import type { Env } from "../env.js";
import { Problem } from "../problems.js";

function bindings(env: Env): Readonly<Record<string, unknown>> {
  return env as unknown as Readonly<Record<string, unknown>>;
}

/** The custom endpoints of `MODEL_PROVIDERS`; a bad declaration is a `misconfigured` problem naming its path. */
export function customProviders(env: Env): CustomProviderConfig[] {
  try {
    return parseCustomProviders(bindings(env)["MODEL_PROVIDERS"] ?? []);
  } catch (error) {
    if (error instanceof ProviderConfigError)
      throw new Problem("misconfigured", `MODEL_PROVIDERS is invalid: ${error.message}`);
    throw error;
  }
}

export async function buildModels(env: Env): Promise<Models> {
  return buildProviderModels(secretsOf(bindings(env)), customProviders(env), [echoProvider()]);
}

/** The deployment's default model as configured: `DEFAULT_MODEL` (maybe a bare alias), else `echo/echo`. */
export function defaultModel(env: Env): string {
  return present(env.DEFAULT_MODEL) ? (env.DEFAULT_MODEL as string) : `${ECHO_PROVIDER}/${ECHO_MODEL}`;
}

/** One row of `GET /v1/models`: the id a session config names, and what the model can do. */
export interface ModelListing {
  readonly id: string;
  readonly provider: string;
  readonly name: string;
  readonly api: string;
  readonly reasoning: boolean;
  readonly input: readonly string[];
  readonly contextWindow: number;
  readonly maxTokens: number;
}

export function listing(model: Model<Api>): ModelListing {
  return {
    id: `${model.provider}/${model.id}`,
    provider: model.provider,
    name: model.name,
    api: model.api,
    reasoning: model.reasoning,
    input: [...model.input],
    contextWindow: model.contextWindow,
    maxTokens: model.maxTokens,
  };
}

/** Every chat model of every provider this deployment has configured, the default first in its provider. */
export async function listModels(
  env: Env,
): Promise<{ defaultModel: string; providers: string[]; models: ModelListing[] }> {
  const models = await buildModels(env);
  const all = models.getModels().map(listing);
  // In the `provider/model` form the listing uses, whether `DEFAULT_MODEL` names it so or by a bare alias.
  const configured = defaultModel(env);
  const model = modelResolver(models).resolve(configured);
  const shown = model === undefined ? configured : `${model.provider}/${model.id}`;
  return { defaultModel: shown, providers: models.getProviders().map((p) => p.id), models: all };
}

function present(value: string | undefined): boolean {
  return value !== undefined && value.trim() !== "";
}

/**
 * The pi-ai models a session Durable Object runs with: always the built-in deterministic `echo` model
 * (offline, tests), plus a real provider from pi-ai's catalogue for each API key secret that is set:
 *
 *   ANTHROPIC_API_KEY -> provider "anthropic" (models "anthropic/<id>")
 *   OPENAI_API_KEY    -> provider "openai"    (models "openai/<id>")
 *
 * Providers read their keys through the auth context below, which looks in the Worker's bindings (not
 * `process.env`). The model a session uses is its `model` config value; `DEFAULT_MODEL` (else `echo`)
 * is what a session gets when its PUT names none.
 */
import { createModels, type Models } from "@earendil-works/pi-ai";
import { anthropicProvider } from "@earendil-works/pi-ai/providers/anthropic";
import { openaiProvider } from "@earendil-works/pi-ai/providers/openai";
import { echoProvider, ECHO_MODEL } from "./echo-model.js";
import type { Env } from "./env.js";

export function buildModels(env: Env): Models {
  const secrets: Readonly<Record<string, string | undefined>> = {
    ANTHROPIC_API_KEY: env.ANTHROPIC_API_KEY,
    OPENAI_API_KEY: env.OPENAI_API_KEY,
  };
  const models = createModels({
    authContext: {
      env: async (name) => {
        const value = secrets[name];
        return value === undefined || value.trim() === "" ? undefined : value;
      },
      fileExists: async () => false,
    },
  });
  models.setProvider(echoProvider());
  if (present(env.ANTHROPIC_API_KEY)) models.setProvider(anthropicProvider());
  if (present(env.OPENAI_API_KEY)) models.setProvider(openaiProvider());
  return models;
}

export function defaultModel(env: Env): string {
  return present(env.DEFAULT_MODEL) ? (env.DEFAULT_MODEL as string) : ECHO_MODEL;
}

function present(value: string | undefined): boolean {
  return value !== undefined && value.trim() !== "";
}

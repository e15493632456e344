/**
 * A session's config (docs/api.md "Sessions"): the create config as a PUT gives it (defaults filled in,
 * compared canonically with the one the session was created with), the checks a config passes before
 * anything is written (a known model, registered tools), and the creating commit's values (the config
 * itself and the root conversation's generation and turn values, §9.5).
 */
import type { Models } from "@earendil-works/pi-ai";
import { initialValue, type InitialValue } from "../../core/harness.js";
import { sessionValue, type ValueSpec } from "../../core/state.js";
import { generationConfig, turnPolicy, type OnInterrupt } from "../../kinds/config.js";
import { modelResolver } from "../../kinds/services.js";
import type { JsonValue } from "../../storage/records.js";
import type { ConfigValues, SessionConfig } from "../../api/responses.js";
import { Problem } from "../problems.js";
import type { SessionConfigBody } from "../schemas.js";

/** A stored create config; sessions created before `onInterrupt` existed have the default. */
export function storedConfig(
  stored: Omit<SessionConfig, "onInterrupt"> & { readonly onInterrupt?: OnInterrupt },
): SessionConfig {
  return { ...stored, onInterrupt: stored.onInterrupt ?? "retry" };
}

/** The create config, stored in the creating commit so a later PUT can be compared with it. */
export const createConfigValue: ValueSpec<SessionConfig> = sessionValue<SessionConfig>("edge.session.config");

/**
 * The session's incarnation (src/kinds/incarnation.ts): minted for the creating commit and stored in it, so it
 * is durable with the session, the same after every restart, and gone with it when the session is deleted.
 */
export const incarnationValue: ValueSpec<string> = sessionValue<string>("edge.session.incarnation");

const INCARNATION_DIGITS = "0123456789abcdefghijklmnopqrstuv";

/** A new incarnation: 10 characters of 0-9 a-v, 50 random bits. */
export function mintIncarnation(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(10)), (byte) => INCARNATION_DIGITS[byte & 31]).join("");
}

/** Canonical JSON (sorted keys), for comparing configs. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/**
 * A model id as the service stores and reports it: `provider/model`, as `GET /v1/models` lists it. A bare
 * alias (`echo`) is accepted on input and resolves to its model's id (`echo/echo`); an id that resolves to
 * no model is returned as given (checkConfig rejects it).
 */
export function canonicalModel(models: Models, id: string): string {
  const model = modelResolver(models).resolve(id);
  return model === undefined ? id : `${model.provider}/${model.id}`;
}

/**
 * A create's config with the defaults filled in (`model`: the deployment's default model, in its
 * `provider/model` form; `selectedTools`: none).
 */
export function normalizeConfig(body: SessionConfigBody, model: string, models: Models): SessionConfig {
  return {
    model: canonicalModel(models, body.model ?? model),
    selectedTools: body.selectedTools ?? [],
    ...(body.thinking === undefined ? {} : { thinking: body.thinking }),
    // `profile: null` names none (over a template's profile), the same as leaving it out.
    ...(body.profile === undefined || body.profile === null ? {} : { profile: body.profile }),
    ...(body.budgetMs === undefined ? {} : { budgetMs: body.budgetMs }),
    onInterrupt: body.onInterrupt ?? "retry",
  };
}

/** Check that a model id resolves and tools are registered (before anything is written). */
export function checkConfig(
  models: Models,
  toolNames: readonly string[],
  config: Pick<ConfigValues, "model" | "selectedTools">,
): void {
  if (config.model !== undefined && modelResolver(models).resolve(config.model) === undefined) {
    const known = models.getModels().map((m) => `${m.provider}/${m.id}`);
    throw new Problem(
      "unknown_model",
      `model ${config.model} is not available here (known: ${known.slice(0, 20).join(", ")}${known.length > 20 ? ", ..." : ""})`,
      "model",
    );
  }
  for (const [i, name] of (config.selectedTools ?? []).entries()) {
    if (!toolNames.includes(name))
      throw new Problem(
        "unknown_tool",
        `tool ${name} is not registered (registered: ${toolNames.join(", ")})`,
        `selectedTools.${i}`,
      );
  }
}

/**
 * The creating commit's root values: the create config (for a later PUT to compare) and the root conversation's config.
 */
export function createValues(config: SessionConfig): InitialValue[] {
  return [
    { spec: createConfigValue, value: config as unknown as JsonValue },
    initialValue(generationConfig.model, config.model),
    initialValue(generationConfig.selectedTools, [...config.selectedTools]),
    ...(config.thinking === undefined ? [] : [initialValue(generationConfig.thinking, config.thinking)]),
    ...(config.profile === undefined ? [] : [initialValue(generationConfig.profile, config.profile)]),
    ...(config.budgetMs === undefined ? [] : [initialValue(generationConfig.budgetMs, config.budgetMs)]),
    initialValue(turnPolicy.onInterrupt, config.onInterrupt),
  ];
}

/**
 * Fixtures for turn tests: a faux pi-ai provider, a turn kit with an echo-like tool, and a harness with
 * a configured root (model, selected tools).
 */
import {
  createModels,
  fauxAssistantMessage,
  fauxProvider,
  fauxToolCall,
  type FauxResponseStep,
} from "@earendil-works/pi-ai";
import { BACKGROUND_CONTEXT } from "../../src/core/call.js";
import { Harness, initialValue } from "../../src/core/harness.js";
import type { DriverHost } from "../../src/core/host.js";
import { generationConfig } from "../../src/kinds/config.js";
import type { AnyTool, TurnOptions } from "../../src/kinds/services.js";
import { createTurnKit, type TurnKit } from "../../src/kinds/turns.js";
import type { Storage } from "../../src/storage/storage.js";

export const call = BACKGROUND_CONTEXT;

export const echoTool: AnyTool = {
  name: "echo",
  description: "Returns its arguments.",
  parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  async execute(_id, params, out) {
    out.write(String(params["text"]));
  },
};

export interface TurnFixture {
  readonly harness: Harness;
  readonly kit: TurnKit;
  readonly faux: ReturnType<typeof fauxProvider>;
  readonly modelId: string;
}

export async function openTurns(
  storage: Storage,
  options: { responses?: FauxResponseStep[]; tools?: AnyTool[]; turn?: Partial<TurnOptions>; host?: DriverHost } = {},
): Promise<TurnFixture> {
  const faux = fauxProvider();
  const models = createModels();
  models.setProvider(faux.provider);
  const model = faux.getModel();
  const modelId = `${model.provider}/${model.id}`;
  faux.setResponses(options.responses ?? []);
  const kit = createTurnKit({
    models,
    tools: options.tools ?? [echoTool],
    options: { retryBaseMs: 10, ...options.turn },
  });
  const harness = await Harness.open(
    storage,
    {
      taskKinds: kit.kinds,
      rootValues: [
        initialValue(generationConfig.model, modelId),
        initialValue(generationConfig.selectedTools, ["echo"]),
      ],
      ...(options.host === undefined ? {} : { host: options.host }),
    },
    call,
  );
  kit.install(harness);
  return { harness, kit, faux, modelId };
}

export { fauxAssistantMessage, fauxToolCall };

/** The text of an assistant entry's message. */
export function textOf(entry: { readonly model?: readonly unknown[] } | undefined): string {
  const message = entry?.model?.[0] as { content?: unknown } | undefined;
  const content = message?.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .flatMap((part: { type?: string; text?: string }) =>
      part.type === "text" && part.text !== undefined ? [part.text] : [],
    )
    .join("");
}

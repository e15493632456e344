/**
 * The frontends' model check (docs/frontends.md "Images"): a user message that carries images is refused before
 * anything is written when the conversation's model takes no images, or is not sent image URLs
 * (frontends/content-parts.ts `checkModelTakes`). The model is the conversation's `model` config value, resolved
 * against the deployment's models (platform/models.ts).
 */
import { modelResolver } from "../../../kinds/services.js";
import type { Env } from "../../env.js";
import { checkModelTakes, type ReadContent } from "../../frontends/content-parts.js";
import { buildModels } from "../../platform/models.js";
import { Problem } from "../../problems.js";
import type { ConversationRef } from "../../schemas.js";
import type { SessionRpc } from "../../session/rpc.js";
import { run } from "./shared.js";

export async function checkImagesFor(
  env: Env,
  stub: SessionRpc,
  ref: ConversationRef,
  read: ReadContent,
): Promise<void> {
  const first = read.images[0];
  if (first === undefined) return;
  const id = (await run(stub.op("getConfig", ref))).model;
  const model = id === undefined ? undefined : modelResolver(await buildModels(env)).resolve(id);
  if (model === undefined)
    throw new Problem(
      "unsupported_media_type",
      `the conversation's model ${id ?? "(none)"} is not available here, so nothing can take the image`,
      first.field,
    );
  checkModelTakes({ id: `${model.provider}/${model.id}`, api: model.api, input: model.input }, read);
}

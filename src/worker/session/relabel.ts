/**
 * PATCH /v1/sessions/{session} inside the session object (SessionObject.relabel): change the directory title, labels
 * and/or metadata (`null` title clears it; metadata merges, a null value deleting its key), and the session's variables
 * (null removes one). Refused means nothing written: metadata over MAX_METADATA_KEYS after the merge is 422 before
 * anything is written, the variables commit (which refuses more than MAX_VARIABLES after its merge, on the commit line)
 * comes next, and only then the directory change, which nothing refuses once checked. The answer carries the title,
 * labels and metadata both at its top level (what the previous release's Worker reads) and as `meta`.
 */
import { Problem } from "../problems.js";
import { MAX_METADATA_KEYS } from "../schemas.js";
import { mergeMetadata, type DirectoryLink, type RelabelAnswer } from "./directory-link.js";
import type { OpenSession } from "./opening.js";

export interface RelabelChange {
  readonly title?: string | null;
  readonly labels?: readonly string[];
  readonly metadata?: Readonly<Record<string, string | null>>;
}

export async function relabelSession(
  session: OpenSession,
  directory: DirectoryLink,
  change: RelabelChange,
  variables?: Readonly<Record<string, string | null>>,
): Promise<RelabelAnswer> {
  const meta = directory.meta();
  const relabels = change.title !== undefined || change.labels !== undefined || change.metadata !== undefined;
  if (!relabels) {
    const set = variables === undefined ? undefined : await session.api.setVariables(variables);
    const kept = meta === undefined ? {} : { ...meta, meta };
    return { ...kept, ...(set === undefined ? {} : { variables: set.variables }) };
  }
  if (meta === undefined)
    throw new Problem("conflict", "this session has no directory entry (it was not created over HTTP)");
  const metadata = mergeMetadata(meta.metadata, change.metadata);
  if (Object.keys(metadata).length > MAX_METADATA_KEYS)
    throw new Problem(
      "invalid_metadata",
      `metadata: the session would hold ${Object.keys(metadata).length} keys after this patch; at most ${MAX_METADATA_KEYS} (null deletes a key)`,
      "metadata",
    );
  const set = variables === undefined ? undefined : await session.api.setVariables(variables);
  await directory.relabel({
    ...(change.title === undefined ? {} : { title: change.title }),
    ...(change.labels === undefined ? {} : { labels: change.labels }),
    ...(change.metadata === undefined ? {} : { metadata }),
  });
  const after = directory.meta() ?? { labels: [], metadata: {} };
  return { ...after, meta: after, ...(set === undefined ? {} : { variables: set.variables }) };
}

/**
 * Wire schemas of a session's export and import (docs/operations.md "Export and import", docs/api.md): the
 * header line of an export, the shape of each batch line after it (§7.3, §7.4), the import's answer and its
 * size limit. Used by the session routes, the SessionObject's transfer (src/worker/session/transfer.ts) and
 * the OpenAPI document.
 */
import { z } from "zod";
import { metadata, sessionLabels, sessionName, sessionTitle, templateName } from "./schemas.js";
import { TEMPLATE_FIELDS } from "./templates.js";

/** The `format` of an export's header line. */
export const EXPORT_FORMAT = "pico-edge.session-export";
/** The export format version this code writes and imports. */
export const EXPORT_VERSION = 1;
/** The largest import body: bytes of JSONL, header line included. */
export const MAX_IMPORT_BYTES = 64 * 1024 * 1024;

/**
 * An export's first line: the format, the session it was taken from, and the product data pico storage does
 * not hold (owner, directory title, labels and metadata, template binding, profile). The lines after it are
 * §7.3 batches (`exportBatchLine`).
 */
export const exportHeader = z.strictObject({
  format: z.literal(EXPORT_FORMAT),
  version: z.literal(EXPORT_VERSION),
  session: sessionName,
  incarnation: z.string().min(1).max(64).optional(),
  /** The last sequence the export holds: its batches number 1..lastSeq without a gap. */
  lastSeq: z.number().int().min(0),
  /** A user's export (no remote URLs): never importable. */
  redacted: z.boolean(),
  owner: z.string().min(1).max(256).optional(),
  title: sessionTitle().optional(),
  labels: sessionLabels().readonly(),
  metadata,
  template: z
    .strictObject({
      name: templateName,
      version: z.number().int().min(1),
      userSettable: z.array(z.enum(TEMPLATE_FIELDS)).readonly(),
    })
    .optional(),
  profile: z.string().min(1).max(200).optional(),
});
export type ExportHeader = z.infer<typeof exportHeader>;

const WRITE_TYPES = [
  "value.set",
  "value.delete",
  "list.append",
  "list.remove",
  "list.clear",
  "createConversation",
  "deleteConversation",
  "entry",
  "task",
  "patch",
  "settle",
] as const;

/** One batch line after the header: `{ first, writes }` (§7.4); storage checks each write's structure. */
export const exportBatchLine = z.strictObject({
  first: z.number().int().min(1),
  writes: z.array(z.looseObject({ type: z.enum(WRITE_TYPES) })).min(1),
});

/** POST /v1/sessions/{session}/import: what was imported and what it settled. */
export const importResponse = z.strictObject({
  session: sessionName,
  incarnation: z.string(),
  lastSeq: z.number().int(),
  /** Live tasks marked for abort on import (their abort handlers settle them). */
  aborted: z.array(z.number().int()),
  /** Schedules that come back paused. */
  paused: z.array(z.number().int()),
  /** Whether the rig came back paused (GUPP and the witness wait for `POST .../rig/resume`). */
  rigPaused: z.boolean(),
  /** What the export held that the import left out: inbound endpoints by name (their secrets are sealed for the source). */
  omitted: z.strictObject({ inbound: z.array(z.string()) }),
});
export type ImportResponse = z.infer<typeof importResponse>;

/** POST /v1/sessions/{session}/rig/resume: whether the rig was paused (an import pauses a copy's rig). */
export const rigResumeResponse = z.strictObject({ resumed: z.boolean() });
export type RigResumeResponse = z.infer<typeof rigResumeResponse>;

/**
 * Wire schema of `GET /v1/stats` (docs/operations.md "Stats"; part of the wire-schema module, so the OpenAPI
 * document and the typed client take it from here): the tenant's operator signals, summed from the counters its
 * sessions push to the directory.
 */
import { z } from "zod";

export const statsResponse = z.strictObject({
  /** Sessions by the status they last reported (faulted: a session fault or a quarantined task). */
  sessions: z.strictObject({ idle: z.number().int(), busy: z.number().int(), faulted: z.number().int() }),
  liveTasks: z.number().int(),
  quarantinedTasks: z.number().int(),
  /** Outbox deliveries still to send, and those that gave up (kept until pruned). */
  outboxBacklog: z.number().int(),
  deadDeliveries: z.number().int(),
  /** Items on the sessions' pending lists, and the earliest of their deadlines (ISO 8601; null: none has one). */
  pendingItems: z.number().int(),
  earliestPendingDeadline: z.string().nullable(),
  /** How far behind the sessions the counters may be, ms (each session pushes at most once a minute). */
  stalenessMs: z.number().int(),
});
export type StatsResponse = z.infer<typeof statsResponse>;

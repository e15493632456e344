/**
 * Events out (docs/integrations.md "Events out"): the shapes shared by the session's event capture
 * (outbox/events.ts), its sender (outbox/sender.ts) and its delivery book (outbox/book.ts); the event
 * types and endpoint records are the tenant registry's (directory/endpoints.ts). An event is one element of the session
 * list `edge.outbox`, written in the commit
 * it reports; its deliveries (one per matching endpoint) are host bookkeeping (outbox/book.ts).
 */
import type { Id, JsonObject } from "../../storage/records.js";
import { sessionList, sessionValue } from "../../core/state.js";
import type { EventType } from "../directory/endpoints.js";

/** One event as the session stores it (element of `edge.outbox`). */
export interface OutboxEvent {
  /**
   * `evt_{incarnation}{time}_{element}`: stable across retries (the `webhook-id`) and unique across re-creations of
   * the session (src/kinds/incarnation.ts).
   */
  readonly id: string;
  readonly type: EventType;
  /** When it was committed (ms, the session's clock). */
  readonly timestamp: number;
  /** `data` always carries `session` and `seq` (the commit it belongs to). */
  readonly data: JsonObject;
  /** The endpoint ids it goes to (those matching when it was committed). */
  readonly to: readonly string[];
  /**
   * Committed while the tenant's directory could not be read (`to` is empty): its endpoints are the
   * ones matching when the directory answers again.
   */
  readonly unresolved?: true;
}

/**
 * A session's retention ran out (session/retention.ts): the commit that records it reports `session.expired`, and the
 * session is deleted once its outbox holds nothing undelivered.
 */
export interface ExpiryRecord {
  readonly deleteAfterDays: number;
  readonly lastActivityAt: number;
  readonly expiredAt: number;
}

export const expiryMark = sessionValue<ExpiryRecord>("edge.retention.expired");

/** The session list the events are kept in until their deliveries are done and pruned. */
export const outboxList = sessionList<OutboxEvent>("edge.outbox");

export type DeliveryStatus = "pending" | "done" | "dead";

/** One delivery (an event to one endpoint) as operators see it. */
export interface DeliveryView {
  /** `${eventElement}.${endpointId}`. */
  readonly id: string;
  readonly eventId: string;
  readonly endpointId: string;
  readonly type: EventType;
  readonly status: DeliveryStatus;
  readonly attempts: number;
  readonly lastStatusCode: number | null;
  /** ISO time of the next attempt (pending only). */
  readonly nextAttemptAt: string | null;
  readonly lastError?: string;
}

/** The event element a delivery id names, and its endpoint. */
export function parseDeliveryId(id: string): { readonly element: Id; readonly endpoint: string } | undefined {
  const match = /^([0-9]{1,15})\.(we_[a-z0-9]{1,40})$/.exec(id);
  if (match === null) return undefined;
  return { element: Number(match[1]), endpoint: match[2] as string };
}

/** The outbox operations of the session's op table (session/ops.ts): arguments and results. */
export interface OutboxSessionOps {
  deliveries: {
    readonly args: [query: { readonly status?: DeliveryStatus; readonly endpoint?: string; readonly limit: number }];
    readonly result: DeliveryView[];
  };
  retryDelivery: { readonly args: [id: string]; readonly result: DeliveryView };
}

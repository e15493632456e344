/**
 * Which deliveries of an inbound endpoint become inputs (docs/integrations.md "Filters and loops"), and what an input's
 * events carry back about it (`source`). Checked after the signature, before anything is accepted: a delivery that
 * does not pass answers 200 `{ ignored: true, reason }` and writes nothing.
 *
 *   events  the delivery's event type is one of them: GitHub's `X-GitHub-Event`, Slack's `event.type` (or the
 *           body's `type`), Stripe's and Standard Webhooks' body `type`
 *   when    every condition holds: the payload's value at `path` `equals` a value, is `in` a list, or `exists`
 *   ignore  the sender is not one of them: GitHub's `sender.login`, Slack's `event.user` or `event.bot_id`
 *   self    the integration's own user, whose deliveries are always ignored (its own replies never loop back)
 */
import type { JsonObject, JsonValue } from "../../storage/records.js";
import { lookup } from "./template.js";
import type { InboundFormat } from "./verify.js";

export type InboundCondition =
  | { readonly path: string; readonly equals: string | number | boolean | null }
  | { readonly path: string; readonly in: readonly (string | number | boolean)[] }
  | { readonly path: string; readonly exists: boolean };

/** An endpoint's filters and the fields its events carry; absent: everything passes, no fields. */
export interface InboundFilters {
  readonly events?: readonly string[];
  readonly when?: readonly InboundCondition[];
  readonly ignore?: readonly string[];
  readonly self?: string;
  readonly fields?: readonly string[];
}

/** The filters of a record or a PUT, for storing and showing (absent ones left out). */
export function filtersOf(from: InboundFilters): InboundFilters {
  return {
    ...(from.events === undefined ? {} : { events: from.events }),
    ...(from.when === undefined ? {} : { when: from.when }),
    ...(from.ignore === undefined ? {} : { ignore: from.ignore }),
    ...(from.self === undefined ? {} : { self: from.self }),
    ...(from.fields === undefined ? {} : { fields: from.fields }),
  };
}

function text(value: JsonValue | undefined): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/** The delivery's event type, as its platform names it. */
export function eventOf(
  format: InboundFormat,
  header: (name: string) => string | undefined,
  payload: JsonValue,
): string | undefined {
  switch (format) {
    case "github":
      return header("x-github-event");
    case "slack":
      return text(lookup(payload, "event.type")) ?? text(lookup(payload, "type"));
    case "stripe":
    case "standard":
      return text(lookup(payload, "type"));
    default: {
      const never: never = format;
      return never;
    }
  }
}

/** Who sent the delivery, as the loop guard names senders (none: a platform whose deliveries name nobody). */
export function sendersOf(format: InboundFormat, payload: JsonValue): string[] {
  switch (format) {
    case "github":
      return [text(lookup(payload, "sender.login"))].filter((s): s is string => s !== undefined);
    case "slack":
      return [text(lookup(payload, "event.user")), text(lookup(payload, "event.bot_id"))].filter(
        (s): s is string => s !== undefined,
      );
    case "stripe":
    case "standard":
      return [];
    default: {
      const never: never = format;
      return never;
    }
  }
}

function holds(condition: InboundCondition, payload: JsonValue): boolean {
  const value = lookup(payload, condition.path);
  if ("exists" in condition) return (value !== undefined && value !== null) === condition.exists;
  if ("equals" in condition) return value === condition.equals || (value === undefined && condition.equals === null);
  return condition.in.some((candidate) => candidate === value);
}

/** Why the delivery is ignored, or undefined when it passes the endpoint's filters. */
export function ignoredBecause(
  filters: InboundFilters,
  event: string | undefined,
  senders: readonly string[],
  payload: JsonValue,
): string | undefined {
  if (filters.self !== undefined && senders.includes(filters.self))
    return `sent by the integration's own user (${filters.self})`;
  const ignored = senders.find((sender) => filters.ignore?.includes(sender) === true);
  if (ignored !== undefined) return `sender ${ignored} is ignored`;
  if (filters.events !== undefined && (event === undefined || !filters.events.includes(event)))
    return `event ${event ?? "(none)"} is not one of ${filters.events.join(", ")}`;
  const failed = filters.when?.find((condition) => !holds(condition, payload));
  if (failed !== undefined) return `the condition on ${failed.path} does not hold`;
  return undefined;
}

/** The values of the endpoint's `fields` in the payload (absent ones left out). */
export function fieldValues(filters: InboundFilters, payload: JsonValue): JsonObject {
  const out: Record<string, JsonValue> = {};
  for (const path of filters.fields ?? []) {
    const value = lookup(payload, path);
    if (value !== undefined) out[path] = value;
  }
  return out;
}

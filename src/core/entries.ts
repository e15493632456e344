/**
 * Entry kinds (§2.1): a kind is only a name and a type witness. The built-ins and their typed append
 * helpers materialize pi-ai messages at append time; nothing runs while reading.
 */
import type {
  AssistantMessage,
  ImageContent,
  SystemMessage,
  TextContent,
  ToolResultMessage,
  UserMessage,
} from "@earendil-works/pi-ai";
import type {
  ContextEdits,
  ContextHead,
  Entry,
  EntryBase,
  EntryData,
  EntryIdentity,
  Id,
  JsonObject,
  JsonValue,
  Message,
  ModelProjection,
} from "../storage/records.js";
import { PicoError } from "./errors.js";

export interface EntryKind<E extends Entry = Entry> {
  readonly kind: string;
  is(entry: Entry | undefined): entry is E;
}

/** What `tx.entry` takes for a kind: the entry without identity; heads pass an id or "self" (§9.2). */
export type EntryInput<E extends Entry> = Omit<E, keyof EntryIdentity | "head"> &
  (E extends ContextHead ? { readonly head: Id | "self" } : { readonly head?: never });

/** The untyped draft form, for kinds known only by name. */
export interface EntryDraft {
  readonly key?: string;
  readonly data?: JsonValue;
  readonly model?: readonly Message[];
  readonly head?: Id | "self";
  readonly edits?: Entry["edits"];
}

export function defineEntryKind<E extends Entry>(kind: string): EntryKind<E> {
  if (kind === "") throw new TypeError("an entry kind needs a name");
  return Object.freeze({
    kind,
    is: (entry: Entry | undefined): entry is E => entry !== undefined && entry.kind === kind,
  });
}

// ---------------------------------------------------------------------------------------------
// Built-in kinds

export type UserInput = string | readonly (TextContent | ImageContent)[];

export type SectionChange =
  | { readonly key: string; readonly action: "set"; readonly value: JsonValue; readonly rendered: string }
  | { readonly key: string; readonly action: "remove" };

export interface SystemData {
  readonly baseline?: true;
  readonly sections?: readonly SectionChange[];
}

export interface SummaryData {
  readonly summarizedThrough: Id;
}

export interface HandoffData {
  readonly text: string;
}

export type UserEntry = EntryBase & ModelProjection<UserMessage>;
export type AssistantEntry = EntryBase & ModelProjection<AssistantMessage>;
export type ToolResultEntry = EntryBase & EntryData<JsonObject> & ModelProjection<ToolResultMessage>;
export type SystemEntry = EntryBase &
  EntryData<SystemData & JsonObject> &
  ModelProjection<SystemMessage> &
  Partial<ContextEdits>;
export type NoticeEntry = EntryBase & EntryData & Partial<ModelProjection>;
export type SummaryEntry = EntryBase & EntryData<SummaryData & JsonObject> & ModelProjection<UserMessage> & ContextHead;
export type HandoffEntry = EntryBase & EntryData<HandoffData & JsonObject> & ModelProjection<UserMessage> & ContextHead;
export type ResetEntry = EntryBase & ContextHead;

export const userKind = defineEntryKind<UserEntry>("user");
export const assistantKind = defineEntryKind<AssistantEntry>("assistant");
export const toolResultKind = defineEntryKind<ToolResultEntry>("tool_result");
export const systemKind = defineEntryKind<SystemEntry>("system");
export const noticeKind = defineEntryKind<NoticeEntry>("notice");
export const summaryKind = defineEntryKind<SummaryEntry>("summary");
export const handoffKind = defineEntryKind<HandoffEntry>("handoff");
export const resetKind = defineEntryKind<ResetEntry>("reset");

export const builtinEntryKinds: readonly EntryKind[] = [
  userKind,
  assistantKind,
  toolResultKind,
  systemKind,
  noticeKind,
  summaryKind,
  handoffKind,
  resetKind,
];

/** A managed system entry: kind `system` whose data has `baseline` or `sections` (§2.1, §8.2). */
export function isManagedSystem(entry: Entry): boolean {
  if (entry.kind !== systemKind.kind) return false;
  const data = entry.data;
  if (data === null || typeof data !== "object" || Array.isArray(data)) return false;
  return "baseline" in data || "sections" in data;
}

// ---------------------------------------------------------------------------------------------
// Typed append helpers: they materialize the model projection when the entry is written.

export function userEntry(input: UserInput, timestamp: number, key?: string): EntryInput<UserEntry> {
  const content = typeof input === "string" ? input : [...input];
  const message: UserMessage = { role: "user", content, timestamp };
  return key === undefined ? { model: [message] } : { model: [message], key };
}

export function assistantEntry(message: AssistantMessage): EntryInput<AssistantEntry> {
  return { model: [message] };
}

export function toolResultEntry(message: ToolResultMessage, data: JsonObject): EntryInput<ToolResultEntry> {
  return { model: [message], data, key: message.toolCallId };
}

export function systemEntry(
  data: SystemData & JsonObject,
  message: SystemMessage | undefined,
  edits?: SystemEntry["edits"],
): EntryInput<SystemEntry> {
  const model = message === undefined ? [] : [message];
  return edits === undefined ? { data, model } : { data, model, edits };
}

export function noticeEntry(data: JsonValue, message?: Message): EntryInput<NoticeEntry> {
  return message === undefined ? { data } : { data, model: [message] };
}

/** A summary projects before the retained range it heads (§2.3). */
export function summaryEntry(
  text: string,
  summarizedThrough: Id,
  head: Id,
  timestamp: number,
): EntryInput<SummaryEntry> {
  return {
    data: { summarizedThrough },
    model: [{ role: "user", content: `<summary>\n${text}\n</summary>`, timestamp }],
    head,
  };
}

/** A handoff starts a new context at itself with its message (§2.3). */
export function handoffEntry(text: string, timestamp: number): EntryInput<HandoffEntry> {
  return { data: { text }, model: [{ role: "user", content: text, timestamp }], head: "self" };
}

/** A reset starts an empty context at itself (§2.3). */
export function resetEntry(): EntryInput<ResetEntry> {
  return { head: "self" };
}

// ---------------------------------------------------------------------------------------------
// Mutable registration (§9.6)

export class EntryKindRegistry {
  readonly #kinds = new Map<string, EntryKind>();

  constructor(initial: readonly EntryKind[] = []) {
    for (const kind of initial) this.register(kind);
  }

  register<E extends Entry>(kind: EntryKind<E>): EntryKind<E> {
    if (this.#kinds.has(kind.kind)) throw new PicoError("conflict", `entry kind ${kind.kind} is already registered`);
    this.#kinds.set(kind.kind, kind);
    return kind;
  }

  replace<E extends Entry>(kind: EntryKind<E>): EntryKind<E> {
    if (!this.#kinds.has(kind.kind)) throw new PicoError("not_found", `entry kind ${kind.kind} is not registered`);
    this.#kinds.set(kind.kind, kind);
    return kind;
  }

  remove(name: string): void {
    if (!this.#kinds.delete(name)) throw new PicoError("not_found", `entry kind ${name} is not registered`);
  }

  get(name: string): EntryKind | undefined {
    return this.#kinds.get(name);
  }

  has(name: string): boolean {
    return this.#kinds.has(name);
  }

  names(): string[] {
    return [...this.#kinds.keys()];
  }
}

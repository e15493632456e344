/**
 * Handles over one value or list of state (§9.1): what the harness, a conversation handle and a task
 * runtime hand out (`harness.value(spec)`, `runtime.list(spec)`). Reads take effect at once; writes are
 * one commit each. The harness builds them (`valueHandle`, `listHandle` in harness.ts).
 */
import type { Element, Id, ListQuery, Page } from "../storage/records.js";
import type { Call } from "./call.js";

export interface ValueHandle<T> {
  get(call: Call): Promise<T | undefined>;
  /** Rewindable conversation values only: the value as of entry `at`. */
  getAt(at: Id, call: Call): Promise<T | undefined>;
  set(value: T, call: Call): Promise<void>;
  delete(call: Call): Promise<void>;
}

export interface ListHandle<T> {
  read(query: Partial<ListQuery> | undefined, call: Call): Promise<Page<Element<T>>>;
  append(value: T, call: Call): Promise<Id>;
  remove(element: Id, call: Call): Promise<void>;
  clear(call: Call): Promise<void>;
}

/**
 * Context derivation (§2.2, §2.3, §2.4) for the core: what the model sees is derived from the
 * transcript by a fixed rule and never stored.
 *
 * - `deriveContext(storage, conversationId, through)`: cold derivation at a target (fork-aware).
 * - `ContextCache`: the conversation handle's process-local cache; the commit line feeds it with
 *   `observe` after each durable batch, generation preparation takes snapshots with `contextEntries`.
 * - `requestMessages(context)`: the request messages of a snapshot, tool exchanges normalized.
 * - `extendsItems(previous, next)`: whether two snapshots of one fold are known to share a prefix.
 *
 * Runtime-agnostic: imports only the storage interface and pi-ai types.
 */
export type { ContextItem, DerivedContext } from "./context-fold.js";
export { extendsItems } from "./context-fold.js";
export { deriveContext } from "./context-derive.js";
export { ContextCache, type ContextCacheStats } from "./context-cache.js";
export { requestMessages, normalizeToolExchanges, isReplayable, MISSING_TOOL_RESULT } from "./context-request.js";

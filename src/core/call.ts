/**
 * Call is Chord's Context (§6.5): cancellation, telemetry parent and the driver's private invocation
 * identity travel together. Every async public operation takes a final `call`.
 */
export type { Context as Call } from "@earendil-works/chord";
export {
  BACKGROUND_CONTEXT,
  awaitWithContext,
  createContextKey,
  withAbortSignal,
  withCancel,
  withContextValue,
  withoutAbortSignal,
} from "@earendil-works/chord/context";

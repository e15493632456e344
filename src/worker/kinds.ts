/**
 * The task kinds a session Durable Object registers when it opens its harness. Built-in kinds
 * (generation, tools, ...) join this list as later issues add them; for now it is empty.
 *
 * `registerTestKinds` is the test seam: in `@cloudflare/vitest-plugin`, test files run in the same
 * isolate as the Durable Objects of the main worker, so module state is shared and a test can install
 * kinds with controllable behaviour before it creates or reopens a session. Production code never calls
 * it. A kind registered here is seen by every harness opened afterwards (each open reads the list).
 */
import type { AnyTaskKind } from "../core/task-kind.js";

const builtinKinds: readonly AnyTaskKind[] = [];

let testKinds: readonly AnyTaskKind[] = [];

/** The kinds a session harness opens with: built-ins, then test kinds (a test kind replaces a built-in). */
export function sessionTaskKinds(): AnyTaskKind[] {
  const names = new Set(testKinds.map((kind) => kind.kind));
  return [...builtinKinds.filter((kind) => !names.has(kind.kind)), ...testKinds];
}

/** Test only: install (or, with a kind of the same name, replace) kinds for harnesses opened from now on. */
export function registerTestKinds(kinds: readonly AnyTaskKind[]): void {
  const names = new Set(kinds.map((kind) => kind.kind));
  testKinds = [...testKinds.filter((kind) => !names.has(kind.kind)), ...kinds];
}

/** Test only: forget every test kind. */
export function resetTestKinds(): void {
  testKinds = [];
}

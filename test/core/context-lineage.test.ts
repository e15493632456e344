/**
 * §2.2: snapshots of one context fold with only appends between them share their prefix, and
 * `extendsItems` says so without comparing items; a new head or an edit starts a new lineage, so it
 * never claims a prefix that an edit or a slice changed (request building then compares the items).
 */
import { describe, expect, it } from "vitest";
import { extendsItems } from "../../src/core/context.js";
import { ContextFold } from "../../src/core/context-fold.js";
import type { ContextEdit, Entry, Id } from "../../src/storage/records.js";
import { assistant, user } from "./context-fixtures.js";

const entry = (id: Id, extra: Partial<Entry> = {}): Entry => ({
  id,
  conversationId: 1,
  kind: "user",
  model: [user(`entry ${id}`)],
  ...extra,
});

const edit = (id: Id, edits: readonly ContextEdit[]): Entry => ({ id, conversationId: 1, kind: "edit", edits });

describe("context fold lineage (§2.2)", () => {
  it("appends keep one lineage; an edit or a new head starts another", () => {
    const fold = new ContextFold();
    fold.add(entry(1));
    fold.add(entry(2));
    const first = fold.snapshot(1, 2).items;
    fold.add(entry(3));
    const appended = fold.snapshot(1, 3).items;
    expect(extendsItems(first, appended)).toBe(true);
    expect(appended.slice(0, first.length)).toEqual(first);
    // A longer snapshot is not a prefix of a shorter one.
    expect(extendsItems(appended, first)).toBe(false);

    // An edit replaces an item inside the prefix: the old snapshot's items are no longer the new one's.
    fold.add(edit(4, [{ target: 2, action: "replace", messages: [assistant("replaced")] }]));
    const edited = fold.snapshot(1, 4).items;
    expect(edited[1]).not.toBe(appended[1]);
    expect(extendsItems(appended, edited)).toBe(false);

    // A new head slices the range: a new lineage again.
    fold.add(entry(5));
    const beforeHead = fold.snapshot(1, 5).items;
    expect(extendsItems(edited, beforeHead)).toBe(true);
    fold.add(entry(6, { kind: "summary", head: 5, model: [user("summary")] }));
    const afterHead = fold.snapshot(1, 6).items;
    expect(extendsItems(beforeHead, afterHead)).toBe(false);

    // Arrays of another fold, or not from a fold at all, are unknown.
    const other = new ContextFold();
    other.add(entry(1));
    expect(extendsItems(other.snapshot(1, 1).items, appended)).toBe(false);
    expect(extendsItems([...first], appended)).toBe(false);
  });
});

import { describe, expect, it } from "vitest";
import { version } from "node:process";

describe("node project", () => {
  it("runs on Node 22.19 or newer", () => {
    const [major, minor] = version.slice(1).split(".").map(Number);
    expect((major ?? 0) > 22 || ((major ?? 0) === 22 && (minor ?? 0) >= 19)).toBe(true);
  });
});

/**
 * Inbound templates (src/worker/inbound/template.ts): `{{ path }}` into the payload (dots, array
 * indexes), missing paths empty, objects as compact JSON, whitespace in braces, the 16 KB cut; the
 * payload attached pretty-printed; the input the accept op takes.
 */
import { describe, expect, it } from "vitest";
import {
  CUT_MARKER,
  INBOUND_INPUT_LIMIT,
  EMPTY_RENDER,
  inboundInput,
  payloadText,
  renderTemplate,
} from "../../src/worker/inbound/template.js";
import { userInput } from "../../src/api/schemas.js";
import type { JsonValue } from "../../src/storage/records.js";

const issueEvent: JsonValue = {
  action: "opened",
  issue: {
    number: 42,
    title: "Crash on start",
    labels: [{ name: "bug" }, { name: "p1" }],
    locked: false,
    assignee: null,
  },
  repository: { full_name: "acme/app", stars: 3 },
  commits: [{ id: "abc123" }],
};

const bytes = (text: string): number => new TextEncoder().encode(text).length;

describe("inbound templates", () => {
  it("renders scalar and nested paths", () => {
    expect(renderTemplate("{{action}} on {{repository.full_name}}: {{issue.title}}", issueEvent)).toBe(
      "opened on acme/app: Crash on start",
    );
    expect(renderTemplate("#{{issue.number}} locked={{issue.locked}} stars={{repository.stars}}", issueEvent)).toBe(
      "#42 locked=false stars=3",
    );
    expect(renderTemplate("no placeholders", issueEvent)).toBe("no placeholders");
  });

  it("indexes arrays by number", () => {
    expect(renderTemplate("{{issue.labels.1.name}} / {{commits.0.id}}", issueEvent)).toBe("p1 / abc123");
    expect(renderTemplate("[{{issue.labels.9.name}}][{{issue.labels.x}}][{{issue.labels.01.name}}]", issueEvent)).toBe(
      "[][][]",
    );
    expect(renderTemplate("{{0}}", ["first", "second"])).toBe("first");
  });

  it("renders a missing path, null and an empty path as nothing", () => {
    expect(
      renderTemplate("[{{nope}}][{{issue.nope.deeper}}][{{issue.title.length}}][{{issue.assignee}}][{{}}]", issueEvent),
    ).toBe("[][][][][]");
    expect(renderTemplate("[{{a}}]", "a string payload")).toBe("[]");
    expect(renderTemplate("[{{constructor}}][{{__proto__}}][{{toString}}]", issueEvent)).toBe("[][][]");
  });

  it("allows whitespace inside the braces and keeps other text as written", () => {
    expect(renderTemplate("{{ action }}|{{  issue.title\t}}|{{\nrepository.full_name }}", issueEvent)).toBe(
      "opened|Crash on start|acme/app",
    );
    expect(renderTemplate("{ {{action}} } {{ unclosed", issueEvent)).toBe("{ opened } {{ unclosed");
  });

  it("renders objects and arrays as compact JSON", () => {
    expect(renderTemplate("{{issue.labels}}", issueEvent)).toBe('[{"name":"bug"},{"name":"p1"}]');
    expect(renderTemplate("{{repository}}", issueEvent)).toBe('{"full_name":"acme/app","stars":3}');
  });

  it("cuts the rendered text at 16 KB with a marker", () => {
    const long = { text: "x".repeat(20_000) };
    const rendered = renderTemplate("say {{text}}", long);
    expect(INBOUND_INPUT_LIMIT).toBe(16 * 1024);
    expect(bytes(rendered)).toBe(INBOUND_INPUT_LIMIT);
    expect(rendered.startsWith("say xxx")).toBe(true);
    expect(rendered.endsWith(CUT_MARKER)).toBe(true);
    // Whole characters only: a cut never splits a multi-byte character.
    const wide = renderTemplate("{{text}}", { text: "é🔑".repeat(6_000) });
    expect(bytes(wide)).toBeLessThanOrEqual(INBOUND_INPUT_LIMIT);
    expect(wide).not.toContain("\uFFFD");
    expect(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/.test(wide)).toBe(false);
    const fits = "y".repeat(INBOUND_INPUT_LIMIT);
    expect(renderTemplate("{{t}}", { t: fits })).toBe(fits);
  });

  it("pretty-prints the payload and cuts it at 16 KB with a marker", () => {
    expect(payloadText({ a: 1, b: [true] })).toBe('{\n  "a": 1,\n  "b": [\n    true\n  ]\n}');
    const big = payloadText({ items: Array.from({ length: 2_000 }, (_, i) => ({ i, name: `item ${i}` })) });
    expect(bytes(big)).toBe(INBOUND_INPUT_LIMIT);
    expect(big.startsWith('{\n  "items": [\n')).toBe(true);
    expect(big.endsWith("\n… (cut at 16 KB)")).toBe(true);
  });

  it("makes the input the accept op takes: the rendered text alone, or without a template the payload", () => {
    const templated = inboundInput("{{action}}: {{issue.title}}", issueEvent);
    expect(templated).toBe("opened: Crash on start");
    const plain = inboundInput(undefined, issueEvent);
    expect(plain).toBe(payloadText(issueEvent));
    // A template that renders empty says so (providers refuse empty text); the payload still stays out.
    expect(inboundInput("{{missing}}  ", issueEvent)).toBe(EMPTY_RENDER);
    for (const input of [templated, plain, inboundInput("{{missing}}", issueEvent), inboundInput(undefined, null)]) {
      expect(userInput.safeParse(input).success).toBe(true);
    }
  });
});

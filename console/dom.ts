/**
 * The console's DOM helpers (docs/console.md): find an element by id, make one with text and
 * attributes. Shared by console/main.ts and console/rig.ts.
 */

export const $ = <T extends HTMLElement = HTMLElement>(id: string): T => {
  const element = document.getElementById(id);
  if (element === null) throw new Error(`missing #${id}`);
  return element as T;
};

export function el(tag: string, text: string, attrs: Record<string, string> = {}): HTMLElement {
  const element = document.createElement(tag);
  element.textContent = text;
  for (const [k, v] of Object.entries(attrs)) element.setAttribute(k, v);
  return element;
}

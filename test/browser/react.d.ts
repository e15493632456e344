/**
 * The few React types test/browser/use-chat-page.tsx uses. React 19 ships no types and the repository has
 * no @types/react, so this declares what the page needs (the JSX namespace for `jsx: "react-jsx"`,
 * `useState`, `createRoot`) and nothing more; @ai-sdk/react's own declarations import `ReactNode` from here.
 */
declare module "react" {
  export interface ReactElement {
    readonly type: unknown;
    readonly props: unknown;
    readonly key: string | null;
  }
  export type ReactNode = string | number | bigint | boolean | null | undefined | ReactElement | Iterable<ReactNode>;
  export interface CSSProperties {
    readonly [property: string]: string | number | undefined;
  }
  export function useState<S>(initial: S | (() => S)): [S, (next: S | ((previous: S) => S)) => void];
}

declare module "react/jsx-runtime" {
  import type { ReactElement, ReactNode } from "react";

  interface IntrinsicProps {
    readonly key?: string | number;
    readonly id?: string;
    readonly className?: string;
    readonly type?: "submit" | "button" | "text";
    readonly value?: string;
    readonly disabled?: boolean;
    readonly children?: ReactNode;
    readonly onSubmit?: (event: { preventDefault(): void }) => void;
    readonly onChange?: (event: { readonly target: { readonly value: string } }) => void;
    readonly [data: `data-${string}`]: string | undefined;
  }

  export namespace JSX {
    type Element = ReactElement;
    interface ElementChildrenAttribute {
      children: unknown;
    }
    interface IntrinsicAttributes {
      readonly key?: string | number;
    }
    interface IntrinsicElements {
      readonly [name: string]: IntrinsicProps;
    }
  }
}

declare module "react-dom/client" {
  import type { ReactNode } from "react";

  export interface Root {
    render(node: ReactNode): void;
    unmount(): void;
  }
  export function createRoot(container: Element): Root;
}

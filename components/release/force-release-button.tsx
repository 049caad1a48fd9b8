"use client";

import { QueryClientProvider, useQueryClient, type QueryClient } from "@tanstack/react-query";
import { createRoot, type Root } from "react-dom/client";
import { isLive, type Lock } from "@/lib/locks/types";
import { useIsOperator } from "../session";
import { ReleaseDialog, type ReleaseDialogProps, type ReleaseResponse } from "./release-dialog";

export { targetToken } from "./release-dialog";

export interface ForceReleaseButtonProps {
  resource: string;
  /** The lock as the operator sees it: its token is what the release compares against. */
  lock: Lock;
  /** Server clock minus browser clock, for the TTL countdown (the live view knows it). @default 0 */
  serverOffsetMs?: number;
  /** The lock's group (its page's): the dialog follows the lock on that group's stream rather than every lock's. */
  group?: string;
  /** Called once the release succeeded. */
  onReleased?: (response: ReleaseResponse) => void;
  /**
   * Where the focus goes when the dialog closes and this button has gone (the lock released or ended meanwhile):
   * the page's own place for it (its title), rather than the top of the document.
   */
  focusAfter?: () => HTMLElement | null;
  className?: string;
}

/**
 * The dialog lives in its own React root on `document.body`, not in the table row: the row is
 * virtualized and changes (or goes) the moment the release lands, and the dialog must stay to show the
 * outcome. One dialog at a time.
 */
let host: Root | null = null;

function openDialog(queryClient: QueryClient, props: Omit<ReleaseDialogProps, "onClosed">, opener: HTMLElement, focusAfter?: () => HTMLElement | null): void {
  if (!host) {
    const element = document.createElement("div");
    element.dataset.lockscope = "force-release-dialog";
    document.body.appendChild(element);
    host = createRoot(element);
  }
  const root = host;
  root.render(
    <QueryClientProvider client={queryClient}>
      <ReleaseDialog
        key={`${props.resource}:${Date.now()}`}
        {...props}
        onClosed={() => {
          root.render(null);
          // A closed modal dialog gives the focus back to the element that had it, the button, when it is still there.
          if (!opener.isConnected) focusAfter?.()?.focus();
        }}
      />
    </QueryClientProvider>,
  );
}

/**
 * "Force release" for operators, on the lock's page (the locks table links there rather than offering it on
 * every row): opens a dialog with the holder, fence, TTL left and nodes, and a required reason. Outlined,
 * not filled: the filled red is kept for the dialog's final "Release". Renders nothing for viewers, and
 * nothing once the lock has ended.
 */
export function ForceReleaseButton({ resource, lock, serverOffsetMs = 0, group, onReleased, focusAfter, className }: ForceReleaseButtonProps) {
  const isOperator = useIsOperator();
  const queryClient = useQueryClient();
  if (!isOperator || !isLive(lock.state)) return null;
  // Taken off the page (the lock ended, or its release landed after the dialog closed) while it had the focus:
  // the focus goes to the page's place for it, not to the top of the document. (The cleanup runs before React
  // removes the button; it runs on every render too, where the button stays.)
  const keepFocus = (button: HTMLButtonElement) => () => {
    if (document.activeElement !== button) return;
    queueMicrotask(() => {
      if (!button.isConnected) focusAfter?.()?.focus();
    });
  };
  return (
    <button
      ref={keepFocus}
      type="button"
      className={`button danger-outline ${className ?? ""}`}
      aria-haspopup="dialog"
      onClick={(event) => openDialog(queryClient, { resource, lock, serverOffsetMs, onReleased, ...(group !== undefined ? { group } : {}) }, event.currentTarget, focusAfter)}
    >
      Force release
    </button>
  );
}

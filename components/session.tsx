"use client";

import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type ReactNode } from "react";
import { apiFetch, ApiRequestError } from "./api-client";

export interface SessionInfo {
  role: "viewer" | "operator";
  actor: string;
  via: "bearer" | "session" | "open";
  viewerTokenRequired: boolean;
}

/** The signed-in role (null when nobody is signed in and reading needs a token). */
export function useSession() {
  return useQuery({
    queryKey: ["session"],
    queryFn: async () => {
      try {
        return await apiFetch<SessionInfo>("/api/session");
      } catch (error) {
        if (error instanceof ApiRequestError && error.status === 401) return null;
        throw error;
      }
    },
    staleTime: 60_000,
  });
}

export function useIsOperator(): boolean {
  return useSession().data?.role === "operator";
}

/** A link to the sign-in page that comes back to this page, with its query (a group, the audit filters), once signed in. */
export function SignInLink({ className, children }: { className?: string; children: ReactNode }) {
  return (
    <a
      className={className}
      href="/login"
      onClick={(event) => {
        if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey || window.location.pathname === "/login") return;
        event.preventDefault();
        window.location.assign(`/login?next=${encodeURIComponent(window.location.pathname + window.location.search)}`);
      }}
    >
      {children}
    </a>
  );
}

/** Sign-in state in the header: who you are, and a sign-in or sign-out control. */
export function SessionControl() {
  const { data } = useSession();
  const queryClient = useQueryClient();
  const [signOutFailed, setSignOutFailed] = useState<string | null>(null);
  if (!data || data.via === "open") {
    return (
      <SignInLink className="button">Sign in</SignInLink>
    );
  }
  return (
    <span className="node-status session-control">
      <span className="muted" aria-label="Signed in as">
        {data.actor} ({data.role})
      </span>
      <button
        type="button"
        className="button"
        onClick={async () => {
          setSignOutFailed(null);
          // Only the console's 204 means the session has ended: on anything else it is still valid, and the page
          // must not look signed out.
          const answer = await fetch("/api/session", { method: "DELETE", credentials: "same-origin" }).then(
            (res) => (res.ok ? null : `the console answered ${res.status}`),
            () => "the console could not be reached",
          );
          if (answer !== null) {
            setSignOutFailed(`Not signed out: ${answer}, and your session is still valid. Try again.`);
            return;
          }
          await queryClient.invalidateQueries();
          // Signing in again (as another role, say) comes back here.
          window.location.assign(`/login?next=${encodeURIComponent(window.location.pathname + window.location.search)}`);
        }}
      >
        Sign out
      </button>
      {signOutFailed ? (
        <span role="alert" className="error-text">
          {signOutFailed}
        </span>
      ) : null}
    </span>
  );
}

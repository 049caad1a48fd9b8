"use client";

import { useQueryClient } from "@tanstack/react-query";
import { useEffect, useRef, useState, type FormEvent } from "react";
import { sameOriginPath } from "@/lib/safe-redirect";
import { apiFetch, ApiRequestError } from "./api-client";
import { MessageText } from "./message-text";

export function LoginForm({ next }: { next: string }) {
  const [token, setToken] = useState("");
  const [name, setName] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const queryClient = useQueryClient();
  const tokenField = useRef<HTMLInputElement>(null);
  const nameField = useRef<HTMLInputElement>(null);
  // What was typed, pasted or filled in by a password manager before the page came alive is in the fields but not
  // yet in the state (Sign in would stay disabled): take it once, as the page starts.
  useEffect(() => {
    if (tokenField.current?.value) setToken(tokenField.current.value);
    if (nameField.current?.value) setName(nameField.current.value);
  }, []);

  async function submit(event: FormEvent) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await apiFetch("/api/session", { method: "POST", body: JSON.stringify({ token, ...(name.trim() ? { name: name.trim() } : {}) }) });
      await queryClient.invalidateQueries();
      window.location.assign(sameOriginPath(next, window.location.origin));
    } catch (e) {
      setError(e instanceof ApiRequestError ? e.message : "Could not reach the console.");
      setBusy(false);
    }
  }

  return (
    <form className="panel" onSubmit={submit} style={{ display: "grid", gap: "0.8rem", maxWidth: 420 }}>
      <label>
        Token
        <input ref={tokenField} type="password" autoComplete="current-password" required value={token} onChange={(e) => setToken(e.target.value)} />
      </label>
      <label>
        Your name (for the audit log)
        <input ref={nameField} type="text" autoComplete="username" maxLength={64} value={name} onChange={(e) => setName(e.target.value)} />
      </label>
      {error && (
        <p role="alert" className="error-text">
          <MessageText text={error} />
        </p>
      )}
      <button type="submit" className="button primary" disabled={busy || token === ""}>
        {busy ? "Signing in…" : "Sign in"}
      </button>
    </form>
  );
}

"use client";

import { useSyncExternalStore } from "react";
import { THEME_STORAGE_KEY, type ThemeChoice } from "./theme";

const DARK_QUERY = "(prefers-color-scheme: dark)";

/** Notifies on a change of the system setting or of html[data-theme] (this tab's switch). */
function subscribe(onChange: () => void): () => void {
  const media = window.matchMedia(DARK_QUERY);
  media.addEventListener("change", onChange);
  const observer = new MutationObserver(onChange);
  observer.observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
  return () => {
    media.removeEventListener("change", onChange);
    observer.disconnect();
  };
}

function pinned(): ThemeChoice {
  const theme = document.documentElement.dataset.theme;
  return theme === "light" || theme === "dark" ? theme : "system";
}

/** The theme on screen, "light" or "dark", for code that paints outside CSS (the canvas charts). */
export function useResolvedTheme(): "light" | "dark" {
  return useSyncExternalStore(
    subscribe,
    () => {
      const choice = pinned();
      if (choice !== "system") return choice;
      return window.matchMedia(DARK_QUERY).matches ? "dark" : "light";
    },
    () => "light",
  );
}

/** A theme colour (`--name`) as the browser resolved it for the current theme, e.g. "rgb(36, 97, 201)". */
export function themeColor(name: string, fallback: string): string {
  const probe = document.createElement("span");
  probe.style.color = `var(${name}, ${fallback})`;
  probe.style.display = "none";
  document.body.appendChild(probe);
  const color = getComputedStyle(probe).color;
  probe.remove();
  return color || fallback;
}

/** With an alpha, for chart fills: "rgb(r, g, b)" → "rgb(r g b / a)". */
export function withAlpha(rgb: string, alpha: number): string {
  const m = /^rgba?\((\d+),\s*(\d+),\s*(\d+)/.exec(rgb);
  return m ? `rgb(${m[1]} ${m[2]} ${m[3]} / ${alpha})` : rgb;
}

/** The header's theme switch: follow the system, or pin light or dark (kept in localStorage). */
export function ThemeSwitch() {
  const choice = useSyncExternalStore(subscribe, pinned, (): ThemeChoice => "system");
  function choose(next: ThemeChoice) {
    const root = document.documentElement;
    try {
      if (next === "system") localStorage.removeItem(THEME_STORAGE_KEY);
      else localStorage.setItem(THEME_STORAGE_KEY, next);
    } catch {
      // Storage refused (private mode, policy): the choice still holds for this page.
    }
    if (next === "system") delete root.dataset.theme;
    else root.dataset.theme = next;
  }
  return (
    <label className="theme-switch">
      <span className="sr-only">Theme</span>
      <select value={choice} onChange={(e) => choose(e.target.value as ThemeChoice)}>
        <option value="system">System theme</option>
        <option value="light">Light theme</option>
        <option value="dark">Dark theme</option>
      </select>
    </label>
  );
}

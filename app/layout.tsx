import type { Metadata, Viewport } from "next";
import { headers } from "next/headers";
import type { ReactNode } from "react";
import { NavLinks } from "@/components/nav-links";
import { NodeStatus } from "@/components/node-status";
import { Providers } from "@/components/providers";
import { SessionControl } from "@/components/session";
import { THEME_SCRIPT } from "@/components/theme";
import { ThemeSwitch } from "@/components/theme-switch";
import "./globals.css";

export const metadata: Metadata = {
  title: "Lockscope",
  description: "Live view and admin console for Redis distributed locks",
};

export const viewport: Viewport = { width: "device-width", initialScale: 1 };

export default async function RootLayout({ children }: { children: ReactNode }) {
  // proxy.ts gives every page a fresh script nonce in its Content-Security-Policy and in this header.
  const nonce = (await headers()).get("x-nonce") ?? undefined;
  return (
    // The theme script sets data-theme on <html> before React hydrates: that difference is expected.
    <html lang="en" suppressHydrationWarning>
      <head>
        {/* The page's only inline script (a pinned theme, before the first paint), allowed by its nonce. */}
        <script nonce={nonce} dangerouslySetInnerHTML={{ __html: THEME_SCRIPT }} />
      </head>
      <body>
        <Providers>
          <header className="shell-header">
            <a className="brand" href="/">
              <span className="brand-mark" aria-hidden />
              Lockscope
            </a>
            <NavLinks />
            <div className="header-right">
              <NodeStatus />
              <ThemeSwitch />
              <SessionControl />
            </div>
          </header>
          <main className="main">{children}</main>
        </Providers>
      </body>
    </html>
  );
}

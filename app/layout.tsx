import type { Metadata, Viewport } from "next";
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

export default function RootLayout({ children }: { children: ReactNode }) {
  return (
    // The theme script sets data-theme on <html> before React hydrates: that difference is expected.
    <html lang="en" suppressHydrationWarning>
      <head>
        {/* The page's only inline script (a pinned theme, before the first paint); give it the CSP nonce here. */}
        <script dangerouslySetInnerHTML={{ __html: THEME_SCRIPT }} />
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

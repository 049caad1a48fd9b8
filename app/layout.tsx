import type { Metadata } from "next";
import type { ReactNode } from "react";
import { NavLinks } from "@/components/nav-links";
import { NodeStatus } from "@/components/node-status";
import { Providers } from "@/components/providers";
import { SessionControl } from "@/components/session";
import "./globals.css";

export const metadata: Metadata = {
  title: "Lockscope",
  description: "Live view and admin console for Redis distributed locks",
};

export default function RootLayout({ children }: { children: ReactNode }) {
  return (
    <html lang="en">
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
              <SessionControl />
            </div>
          </header>
          <main className="main">{children}</main>
        </Providers>
      </body>
    </html>
  );
}

"use client";

import Link from "next/link";
import { usePathname } from "next/navigation";

const LINKS = [
  { href: "/", label: "Locks", match: (p: string) => p === "/" || p.startsWith("/locks") },
  { href: "/demo", label: "Demo", match: (p: string) => p.startsWith("/demo") },
  { href: "/audit", label: "Audit", match: (p: string) => p.startsWith("/audit") },
];

export function NavLinks() {
  const pathname = usePathname();
  return (
    <nav className="nav" aria-label="Main">
      {LINKS.map((link) => (
        <Link key={link.href} href={link.href} aria-current={link.match(pathname) ? "page" : undefined}>
          {link.label}
        </Link>
      ))}
    </nav>
  );
}

"use client";

import { QueryCache, QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { useState, type ReactNode } from "react";
import { ApiRequestError } from "./api-client";

export function Providers({ children }: { children: ReactNode }) {
  const [client] = useState(() => {
    const client: QueryClient = new QueryClient({
      defaultOptions: { queries: { staleTime: 2_000, refetchOnWindowFocus: false, retry: 1 } },
      queryCache: new QueryCache({
        // A read refused for want of a session (signed out in another tab, expired, revoked): the header asks who is
        // signed in again, rather than go on naming the one who was.
        onError: (error, query) => {
          if (error instanceof ApiRequestError && error.status === 401 && query.queryKey[0] !== "session") void client.invalidateQueries({ queryKey: ["session"] });
        },
      }),
    });
    return client;
  });
  return <QueryClientProvider client={client}>{children}</QueryClientProvider>;
}

// Intentionally empty: stands in for the `server-only` marker when tests import server modules in plain Node.
export {};

// Runs once per server process. Node-only code is imported inside, behind NEXT_RUNTIME, so the edge
// bundle never sees it.
export async function register(): Promise<void> {
  if (process.env.NEXT_RUNTIME !== "nodejs") return;
  const { startServerRuntime } = await import("./server/runtime");
  await startServerRuntime();
}

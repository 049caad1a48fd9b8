// Any unhandled rejection or uncaught exception fails the run, even one raised after its test ended.
// vitest already reports these as errors; this makes the intent explicit and the failure loud.
process.on("unhandledRejection", (reason) => {
  throw reason instanceof Error ? reason : new Error(`Unhandled rejection: ${String(reason)}`);
});

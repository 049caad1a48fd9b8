// The console's tests wait the same way as the engine package's.
export { until, within } from "../../lib/redlock/test/support/wait.ts";

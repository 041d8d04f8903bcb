// Seams for pieces other parts of knap provide.

/** Interactive bash sessions (knap/command-session). */
export function commandSessionsAvailable() {
  return true;
}

export { createCommandSessionRuntime } from "../command-session.mjs";

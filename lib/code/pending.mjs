// Seams for pieces other parts of knap provide. Until they exist in this build, the names
// resolve (so `knap/code` has all 57 exports) and say what is missing when used.
import { codedError } from "../native.mjs";

/** Interactive bash sessions: not in this build yet. */
export function commandSessionsAvailable() {
  return false;
}

export function createCommandSessionRuntime() {
  throw codedError("cave_command_sessions_unsupported", "cave_command_sessions_unsupported: knap does not run interactive bash sessions yet");
}

// "Nothing silently accepted": an options object with a key knap does not read is refused,
// naming the key and the nearest known one (a misspelled `workingDir` used to run in /tmp).
// The nearest name comes from the core's one matcher (knap_core::suggest), as model ids do.
import { codedError, native } from "./native.mjs";

/** `did you mean "x"? ` for the name of `known` nearest to `name`, or `""`. */
export function didYouMean(name, known) {
  const [near] = native.suggestNames(String(name), Array.from(known, String), 1);
  return near === undefined ? "" : `did you mean ${JSON.stringify(near)}? `;
}

/** Throws `cave_config_unknown_key` for the first key of `options` not in `known`. */
export function refuseUnknownKeys(where, options, known) {
  if (!options || typeof options !== "object") return;
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    throw codedError(
      "cave_config_unknown_key",
      `cave_config_unknown_key: ${where} does not know the option ${JSON.stringify(key)}\nhint: ${didYouMean(key, known)}the options are ${known.join(", ")}`,
    );
  }
}

// "Nothing silently accepted": an options object with a key knap does not read is refused,
// naming the key and the nearest known one (a misspelled `workingDir` used to run in /tmp).
import { codedError } from "./native.mjs";

/** The known key closest to `key`: same name ignoring case and `_`/`-`, or a shared start of ≥ 4 letters. */
function closest(key, known) {
  const norm = (s) => s.toLowerCase().replace(/[-_]/g, "");
  const k = norm(key);
  const exact = known.find((c) => norm(c) === k);
  if (exact) return exact;
  let best;
  let bestLen = 3;
  for (const c of known) {
    const n = norm(c);
    let i = 0;
    while (i < n.length && i < k.length && n[i] === k[i]) i++;
    if (i > bestLen) {
      best = c;
      bestLen = i;
    }
  }
  return best;
}

/** Throws `cave_config_unknown_key` for the first key of `options` not in `known`. */
export function refuseUnknownKeys(where, options, known) {
  if (!options || typeof options !== "object") return;
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    const near = closest(key, known);
    throw codedError(
      "cave_config_unknown_key",
      `cave_config_unknown_key: ${where} does not know the option ${JSON.stringify(key)}\nhint: ${near ? `did you mean ${JSON.stringify(near)}? ` : ""}the options are ${known.join(", ")}`,
    );
  }
}

// `allowedPaths`: real globs over resolved paths. A pattern is relative to the workspace (or
// absolute); a path is allowed when it, or a directory containing it, matches one of them
// (`src` and `src/**` both allow everything under `src`; `**/*.md` allows Markdown files
// anywhere). Paths are resolved first (through the native realpath for knap's sandbox, so a
// symlink cannot smuggle a path past a pattern), then matched.
import { posix } from "node:path";
import { globToRegExp, literalPrefix } from "./globmatch.mjs";

export function createPathPolicy(allowedPaths, root) {
  if (!Array.isArray(allowedPaths)) return undefined;
  const base = root ?? "/";
  const rules = allowedPaths.flatMap((pattern) => {
    const abs = String(pattern).startsWith("/") ? String(pattern) : posix.join(base, String(pattern));
    const clean = abs.length > 1 ? abs.replace(/\/+$/, "") : abs;
    const rule = { re: globToRegExp(clean), prefix: literalPrefix(clean) || "/" };
    // `dir/**` also allows `dir` itself (listing it, searching it).
    if (clean.endsWith("/**")) {
      const dir = clean.slice(0, -3) || "/";
      return [rule, { re: globToRegExp(dir), prefix: literalPrefix(dir) || "/" }];
    }
    return [rule];
  });
  const allows = (absPath) => {
    let p = absPath;
    for (;;) {
      if (rules.some((r) => r.re.test(p))) return true;
      const parent = posix.dirname(p);
      if (parent === p) return false;
      p = parent;
    }
  };
  /** Whether a search rooted at `absDir` can reach an allowed path at all. */
  const reaches = (absDir) => {
    if (allows(absDir)) return true;
    const dir = absDir.endsWith("/") ? absDir : `${absDir}/`;
    return rules.some((r) => r.prefix === "/" || `${r.prefix}/`.startsWith(dir) || dir.startsWith(`${r.prefix}/`));
  };
  return { allows, reaches };
}

// Glob patterns as regular expressions, with the rules of knap's native glob (globset with a
// literal separator): `*` and `?` stay within one path component, `**` spans components,
// `{a,b}` alternatives, `[...]` classes (`[!...]` negated), `\` escapes. Used where a sandbox is
// not knap's own (its Glob filters `find` output) and for `allowedPaths`.

function escapeRe(c) {
  return /[.*+?^${}()|[\]\\/]/.test(c) ? `\\${c}` : c;
}

export function globToRegExpSource(glob) {
  let out = "";
  let i = 0;
  let braces = 0;
  while (i < glob.length) {
    const c = glob[i];
    if (c === "\\" && i + 1 < glob.length) {
      out += escapeRe(glob[i + 1]);
      i += 2;
      continue;
    }
    if (c === "*") {
      if (glob[i + 1] === "*") {
        const before = i === 0 || glob[i - 1] === "/";
        const after = glob[i + 2] === undefined || glob[i + 2] === "/";
        if (before && after) {
          if (glob[i + 2] === "/") {
            out += "(?:[^/]*(?:/[^/]*)*/)?"; // `**/`: zero or more directories
            i += 3;
          } else {
            out += ".*"; // trailing `**`
            i += 2;
          }
          continue;
        }
      }
      out += "[^/]*";
      i += 1;
      continue;
    }
    if (c === "?") {
      out += "[^/]";
      i += 1;
      continue;
    }
    if (c === "[") {
      const end = glob.indexOf("]", i + 2);
      if (end === -1) throw new SyntaxError(`unclosed character class in glob: ${glob}`);
      let body = glob.slice(i + 1, end);
      let neg = false;
      if (body[0] === "!" || body[0] === "^") {
        neg = true;
        body = body.slice(1);
      }
      body = body.replace(/\\/g, "\\\\").replace(/\]/g, "\\]");
      out += `[${neg ? "^/" : ""}${body}]`;
      i = end + 1;
      continue;
    }
    if (c === "{") {
      braces += 1;
      out += "(?:";
      i += 1;
      continue;
    }
    if (c === "}" && braces > 0) {
      braces -= 1;
      out += ")";
      i += 1;
      continue;
    }
    if (c === "," && braces > 0) {
      out += "|";
      i += 1;
      continue;
    }
    out += escapeRe(c);
    i += 1;
  }
  if (braces > 0) throw new SyntaxError(`unclosed alternate group in glob: ${glob}`);
  return out;
}

export function globToRegExp(glob) {
  return new RegExp(`^${globToRegExpSource(glob)}$`);
}

/**
 * A matcher with the native Glob tool's rules: a pattern without `/` is matched against file
 * names at any depth, one with `/` against the path relative to the search directory.
 */
export function globMatcher(pattern) {
  let p = pattern.trim();
  while (p.startsWith("./")) p = p.slice(2);
  if (p === "") throw new SyntaxError("empty glob pattern");
  const re = globToRegExp(p);
  if (!p.includes("/")) return (rel) => re.test(rel.slice(rel.lastIndexOf("/") + 1));
  return (rel) => re.test(rel);
}

const META = /[*?[\]{}\\]/;

/** The literal leading directory of a pattern (`src/lib` of `src/lib/**\/*.ts`). */
export function literalPrefix(pattern) {
  const parts = pattern.split("/");
  const out = [];
  for (const part of parts.slice(0, -1)) {
    if (META.test(part)) break;
    out.push(part);
  }
  if (!META.test(parts.at(-1)) && out.length === parts.length - 1) out.push(parts.at(-1));
  return out.join("/") || (pattern.startsWith("/") ? "/" : "");
}

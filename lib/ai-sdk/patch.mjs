// The `Patch` tool: the apply-patch format (Codex's), parsed and applied whole. Every hunk of
// every file is resolved against a virtual view of the files first (so two updates of one file
// in one patch see each other, and a failing hunk anywhere means nothing is written); only then
// are the writes, deletions and moves carried out.
import * as D from "./descriptions.mjs";
import { s, toolSchema } from "./schema.mjs";
import { sdkOptions, shellQuote, withTimeout, timeoutFor } from "./tools.mjs";
import { createPathPolicy } from "./paths.mjs";

const BEGIN = "*** Begin Patch";
const END = "*** End Patch";
const ADD = "*** Add File: ";
const DELETE = "*** Delete File: ";
const UPDATE = "*** Update File: ";
const MOVE = "*** Move to: ";
const EOF_MARK = "*** End of File";

export class PatchParseError extends Error {
  constructor(message, line) {
    super(line === undefined ? message : `Line ${line}: ${message}`);
    this.name = "PatchParseError";
  }
}

export class PatchApplyError extends Error {
  constructor(message) {
    super(message);
    this.name = "PatchApplyError";
  }
}

/** Parses a patch into hunks `{type:"add",path,content} | {type:"delete",path} | {type:"update",path,movePath?,chunks}`. */
export function parsePatch(text) {
  let lines = String(text).trim().split("\n").map((l) => (l.endsWith("\r") ? l.slice(0, -1) : l));
  // A patch wrapped in a heredoc (`<<EOF … EOF`), as models sometimes send it.
  if (lines.length >= 4 && /^<<['"]?EOF['"]?$/.test(lines[0]) && lines.at(-1).endsWith("EOF")) lines = lines.slice(1, -1);
  if (lines[0]?.trim() !== BEGIN) throw new PatchParseError(`The first line of the patch must be '${BEGIN}'`);
  if (lines.length < 2 || lines.at(-1).trim() !== END) throw new PatchParseError(`The last line of the patch must be '${END}'`);
  const body = lines.slice(1, -1);
  const hunks = [];
  let i = 0;
  const lineNo = (k) => k + 2;
  while (i < body.length) {
    const header = body[i].trim();
    if (header === "") {
      i++;
      continue;
    }
    if (header.startsWith(ADD.trim())) {
      const path = header.slice(ADD.trim().length).trim();
      if (!path) throw new PatchParseError("Add File hunk has empty path", lineNo(i));
      i++;
      let content = "";
      while (i < body.length && body[i].startsWith("+")) content += `${body[i++].slice(1)}\n`;
      hunks.push({ type: "add", path, content });
      continue;
    }
    if (header.startsWith(DELETE.trim())) {
      const path = header.slice(DELETE.trim().length).trim();
      if (!path) throw new PatchParseError("Delete File hunk has empty path", lineNo(i));
      hunks.push({ type: "delete", path });
      i++;
      continue;
    }
    if (header.startsWith(UPDATE.trim())) {
      const path = header.slice(UPDATE.trim().length).trim();
      if (!path) throw new PatchParseError("Update File hunk has empty path", lineNo(i));
      const start = i;
      i++;
      let movePath;
      if (i < body.length && body[i].startsWith(MOVE)) {
        movePath = body[i].slice(MOVE.length).trim();
        i++;
      }
      const chunks = [];
      while (i < body.length) {
        if (body[i].trim() === "" && (i + 1 >= body.length || body[i + 1].startsWith("***") || body[i + 1].startsWith("@@"))) {
          i++;
          continue;
        }
        if (body[i].startsWith("***") && body[i] !== EOF_MARK) break;
        let changeContext = null;
        if (body[i] === "@@") i++;
        else if (body[i].startsWith("@@ ")) changeContext = body[i++].slice(3);
        else if (chunks.length > 0) {
          throw new PatchParseError(`Expected update hunk to start with a @@ context marker, got: '${body[i]}'`, lineNo(i));
        }
        const oldLines = [];
        const newLines = [];
        const ops = []; // [" " | "-" | "+", text] in order
        let isEndOfFile = false;
        let parsed = 0;
        while (i < body.length) {
          const line = body[i];
          if (line === EOF_MARK) {
            if (parsed === 0) throw new PatchParseError("Update hunk does not contain any lines", lineNo(i));
            isEndOfFile = true;
            i++;
            break;
          }
          const c = line[0];
          if (line === "" || c === " ") {
            const text = line.slice(1);
            oldLines.push(text);
            newLines.push(text);
            ops.push([" ", text]);
          } else if (c === "-") {
            oldLines.push(line.slice(1));
            ops.push(["-", line.slice(1)]);
          } else if (c === "+") {
            newLines.push(line.slice(1));
            ops.push(["+", line.slice(1)]);
          } else {
            if (parsed === 0) {
              throw new PatchParseError(
                `Unexpected line found in update hunk: '${line}'. Every line should start with ' ' (context line), '+' (added line), or '-' (removed line)`,
                lineNo(i),
              );
            }
            break;
          }
          parsed++;
          i++;
        }
        if (parsed === 0) throw new PatchParseError("Update hunk does not contain any lines", lineNo(i));
        chunks.push({ changeContext, oldLines, newLines, ops, isEndOfFile });
      }
      if (chunks.length === 0) throw new PatchParseError(`Update file hunk for path '${path}' is empty`, lineNo(start));
      hunks.push({ type: "update", path, movePath, chunks });
      continue;
    }
    throw new PatchParseError(
      `'${header}' is not a valid hunk header. Valid hunk headers: '*** Add File: {path}', '*** Delete File: {path}', '*** Update File: {path}'`,
      lineNo(i),
    );
  }
  return { hunks };
}

const PUNCTUATION = [
  [/[\u2010-\u2015\u2212]/g, "-"],
  [/[\u2018-\u201B]/g, "'"],
  [/[\u201C-\u201F]/g, '"'],
  [/[\u00A0\u2002-\u200A\u202F\u205F\u3000]/g, " "],
];
const normalizeLine = (l) => PUNCTUATION.reduce((acc, [re, to]) => acc.replace(re, to), l.trim());

/** Finds `pattern` in `lines` from `start`: exactly, then ignoring trailing, then surrounding whitespace, then punctuation. */
export function seekSequence(lines, pattern, start, eof) {
  if (pattern.length === 0) return start;
  if (pattern.length > lines.length) return null;
  const from = eof ? lines.length - pattern.length : start;
  const passes = [(l) => l, (l) => l.trimEnd(), (l) => l.trim(), normalizeLine];
  for (const f of passes) {
    const want = pattern.map(f);
    for (let i = from; i <= lines.length - pattern.length; i++) {
      let ok = true;
      for (let j = 0; j < want.length && ok; j++) ok = f(lines[i + j]) === want[j];
      if (ok) return i;
    }
  }
  return null;
}

/** The new content of a file after its update chunks. */
export function applyChunks(original, chunks, path) {
  let lines = original.split("\n");
  if (lines.length > 0 && lines.at(-1) === "") lines = lines.slice(0, -1);
  const replacements = [];
  let cursor = 0;
  for (const chunk of chunks) {
    if (chunk.changeContext !== null) {
      const at = seekSequence(lines, [chunk.changeContext], cursor, false);
      if (at === null) {
        throw new PatchApplyError(
          `${path}: Failed to find context '${chunk.changeContext}' in ${path} searched from line ${cursor + 1}. Read the file to verify current content before retrying.`,
        );
      }
      cursor = at + 1;
    }
    if (chunk.oldLines.length === 0) {
      replacements.push([lines.length, 0, chunk.newLines]);
      continue;
    }
    let old = chunk.oldLines;
    let ops = chunk.ops;
    let at = seekSequence(lines, old, cursor, chunk.isEndOfFile);
    if (at === null && old.at(-1) === "") {
      // A trailing blank context line that the file does not have (the end of the file).
      old = old.slice(0, -1);
      const lastContext = ops.findLastIndex(([k]) => k !== "+");
      if (lastContext !== -1 && ops[lastContext][1] === "") ops = ops.filter((_, i) => i !== lastContext);
      at = seekSequence(lines, old, cursor, chunk.isEndOfFile);
    }
    if (at === null) {
      throw new PatchApplyError(
        `${path}: Failed to find expected lines in ${path} searched from line ${cursor + 1}:\n${chunk.oldLines.join("\n")}\nRead the file to verify current content before retrying.`,
      );
    }
    // Context lines keep the file's own text (a whitespace-fuzzy match must not rewrite them).
    const replacement = [];
    let k = at;
    for (const [kind, text] of ops) {
      if (kind === " ") replacement.push(lines[k++]);
      else if (kind === "-") k++;
      else replacement.push(text);
    }
    replacements.push([at, old.length, replacement]);
    cursor = at + old.length;
  }
  replacements.sort((a, b) => a[0] - b[0]);
  const out = [];
  let pos = 0;
  for (const [at, len, neu] of replacements) {
    if (at < pos) throw new PatchApplyError(`${path}: overlapping hunks at line ${at + 1}`);
    out.push(...lines.slice(pos, at), ...neu);
    pos = at + len;
  }
  out.push(...lines.slice(pos));
  if (out.length === 0 || out.at(-1) !== "") out.push("");
  return out.join("\n");
}

const patchSchema = s.object({ patch: s.string(D.PATCH_FIELD) }, ["patch"]);

export function createPatchTool(env, config = {}) {
  const policy = createPathPolicy(config.allowedPaths, env.root);
  const sb = env.sandbox;
  const remove = async (path) => {
    if (typeof sb.deleteFile === "function") return sb.deleteFile(path);
    const r = await sb.exec(`rm -- ${shellQuote(path)}`);
    if (r.exitCode !== 0) throw new Error(`Failed to delete ${path}: ${r.stderr}`);
  };
  const tooBig = (content) => config.maxFileSize && Buffer.byteLength(content, "utf8") > config.maxFileSize;
  return {
    description: D.PATCH,
    inputSchema: toolSchema(patchSchema),
    ...sdkOptions(config),
    execute: ({ patch }) => withTimeout(timeoutFor(env, config), "Patch", () => applyPatch(patch)),
  };
  async function applyPatch(patch) {
    const touched = [];
    let wrote = false;
    try {
      const { hunks } = parsePatch(patch);
      if (hunks.length === 0) return { error: "Patch contains no operations" };
      if (policy) {
        for (const h of hunks) {
          for (const p of [h.path, h.movePath].filter(Boolean)) {
            const a = env.abs(p);
            if (a === null || !policy.allows(a)) return { error: `Path not allowed: ${p}` };
          }
        }
      }
      // Resolve everything against a virtual view first: nothing is written unless all applies.
      const view = new Map(); // key → { path, content: string | null }
      const keyOf = (p) => env.abs(p) ?? p;
      const current = async (p) => {
        const k = keyOf(p);
        if (view.has(k)) return view.get(k).content;
        if (!(await sb.fileExists(p)) || (await sb.isDirectory(p))) return null;
        return sb.readFile(p);
      };
      const ops = [];
      for (const h of hunks) {
        if (h.type === "add") {
          if (tooBig(h.content)) {
            return { error: `File too large: ${h.path} (${Buffer.byteLength(h.content, "utf8")} bytes, max ${config.maxFileSize})` };
          }
          view.set(keyOf(h.path), { path: h.path, content: h.content });
          ops.push({ status: "added", path: h.path });
        } else if (h.type === "delete") {
          if ((await current(h.path)) === null) return { error: `File not found for deletion: ${h.path}` };
          view.set(keyOf(h.path), { path: h.path, content: null });
          ops.push({ status: "deleted", path: h.path });
        } else {
          const original = await current(h.path);
          if (original === null) return { error: `File not found: ${h.path}` };
          const updated = applyChunks(original, h.chunks, h.path);
          if (tooBig(updated)) {
            return {
              error: `File too large after patch: ${h.path} (${Buffer.byteLength(updated, "utf8")} bytes, max ${config.maxFileSize})`,
            };
          }
          if (h.movePath && keyOf(h.movePath) !== keyOf(h.path)) {
            if ((await current(h.movePath)) !== null) return { error: `Move target already exists: ${h.movePath}` };
            view.set(keyOf(h.path), { path: h.path, content: null });
            view.set(keyOf(h.movePath), { path: h.movePath, content: updated });
            ops.push({ status: "modified", path: h.movePath });
          } else {
            view.set(keyOf(h.path), { path: h.path, content: updated });
            ops.push({ status: "modified", path: h.path });
          }
        }
      }
      // Carry out the final state of every touched path.
      wrote = true;
      for (const [key, { path, content }] of view) {
        touched.push(key);
        if (content === null) {
          if ((await sb.fileExists(path)) && !(await sb.isDirectory(path))) await remove(path);
        } else {
          await sb.writeFile(path, content);
        }
      }
      const message = ops.length === 1 ? `Successfully patched ${ops[0].path}` : `Successfully patched ${ops.length} files`;
      return { message, files: ops };
    } catch (error) {
      return { error: error instanceof Error ? error.message : "Unknown error" };
    } finally {
      if (wrote) env.log?.invalidate(touched.filter((k) => k.startsWith("/")));
    }
  }
}

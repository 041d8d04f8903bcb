// bashkit's skills API (agentskills.io format): discovery, metadata, XML for the prompt, skill
// bundles, GitHub fetch and seeding a sandbox. Parsing and discovery are knap-core's skills
// module, the same one `knap/plugins` uses.
import os from "node:os";
import path from "node:path";
import { native, call } from "../native.mjs";
import { refuseUnknownKeys } from "../config-keys.mjs";

const DEFAULT_PATHS = [".skills/", "~/.bashkit/skills/"];

function resolvePath(p, cwd) {
  if (p === "~" || p.startsWith("~/")) return path.join(os.homedir(), p.slice(2));
  return path.resolve(cwd, p);
}

/** Skills of `paths` (default `.skills/`, then `~/.bashkit/skills/`); the first of a name wins. */
export async function discoverSkills(options = {}) {
  refuseUnknownKeys("discoverSkills", options, ["paths", "cwd"]);
  const cwd = options.cwd ?? process.cwd();
  const roots = (options.paths ?? DEFAULT_PATHS).map((p) => resolvePath(p, cwd));
  const { skills, warnings } = JSON.parse(await call(native.bashkitDiscoverSkills(roots)));
  for (const w of warnings) if (w.includes("does not match folder name")) console.warn(w);
  return skills;
}

/** The frontmatter metadata of a SKILL.md; throws when `name` or `description` is missing. */
export function parseSkillMetadata(content, skillPath) {
  let parsed;
  try {
    parsed = JSON.parse(native.bashkitParseSkill(String(content), String(skillPath)));
  } catch (error) {
    throw new Error(error.message);
  }
  if (parsed.warning) console.warn(parsed.warning);
  return parsed.skill;
}

const escapeXml = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&apos;");

/** `<available_skills>` with one `<skill>` (name, description, location) per skill. */
export function skillsToXml(skills) {
  const rows = skills.map(
    (s) => `  <skill>\n    <name>${escapeXml(s.name)}</name>\n    <description>${escapeXml(s.description)}</description>\n    <location>${escapeXml(s.path)}</location>\n  </skill>\n`,
  );
  return `<available_skills>\n${rows.join("")}</available_skills>`;
}

/** Every file of a local skill folder: `{name, files: {relativePath: text}}`. */
export async function loadSkillBundle(skillDir) {
  const files = JSON.parse(await call(native.bashkitLoadBundle(path.resolve(skillDir))));
  return { name: path.basename(path.resolve(skillDir)), files };
}

/** Bundles for discovered skills, by name. */
export async function loadSkillBundles(skills) {
  const out = {};
  for (const s of skills) out[s.name] = await loadSkillBundle(path.dirname(s.path));
  return out;
}

/**
 * `fetchSkill("owner/repo/skill")`: the folder `skills/<skill>` of a GitHub repository (default
 * branch), through the contents API. `options.fetch` replaces the global fetch.
 */
export async function fetchSkill(ref, options = {}) {
  refuseUnknownKeys("fetchSkill", options, ["fetch"]);
  const parts = String(ref).split("/");
  if (parts.length !== 3 || parts.some((p) => p === "")) throw new Error(`Invalid skill reference "${ref}": expected owner/repo/skillName`);
  const [owner, repo, name] = parts;
  const fetchFn = options.fetch ?? globalThis.fetch;
  const base = `https://api.github.com/repos/${owner}/${repo}/contents/`;
  const root = `skills/${name}`;
  const files = {};
  const walk = async (dir) => {
    const res = await fetchFn(`${base}${dir}`, { headers: { accept: "application/vnd.github+json" } });
    if (!res.ok) throw new Error(`Failed to fetch skill "${ref}": ${res.status} ${res.statusText ?? ""}`.trim());
    const listing = await res.json();
    if (!Array.isArray(listing)) throw new Error(`Failed to fetch skill "${ref}": ${dir} is not a folder`);
    for (const entry of listing) {
      if (entry.type === "dir") await walk(entry.path);
      else if (entry.type === "file") {
        const file = await fetchFn(entry.download_url);
        if (!file.ok) throw new Error(`Failed to fetch skill "${ref}": ${entry.path}: ${file.status}`);
        files[entry.path.slice(root.length + 1)] = await file.text();
      }
    }
  };
  await walk(root);
  if (!("SKILL.md" in files)) throw new Error(`Failed to fetch skill "${ref}": no SKILL.md`);
  return { name, files };
}

/** Several skills fetched in parallel, by name. */
export async function fetchSkills(refs, options) {
  const bundles = await Promise.all(refs.map((r) => fetchSkill(r, options)));
  return Object.fromEntries(bundles.map((b) => [b.name, b]));
}

const quote = (p) => `"${p.replace(/(["\\$`])/g, "\\$1")}"`;

/** Creates the workspace folders and seeds `.skills/<name>/` in a sandbox; returns skill metadata. */
export async function setupAgentEnvironment(sandbox, config = {}) {
  refuseUnknownKeys("setupAgentEnvironment", config, ["workspace", "skills"]);
  for (const dir of Object.values(config.workspace ?? {})) {
    await sandbox.exec(`mkdir -p ${quote(String(dir).replace(/\/+$/, ""))}`);
  }
  const skills = [];
  const entries = Object.entries(config.skills ?? {});
  if (entries.length) await sandbox.exec(`mkdir -p ${quote(".skills")}`);
  for (const [name, content] of entries) {
    const dir = `.skills/${name}`;
    await sandbox.exec(`mkdir -p ${quote(dir)}`);
    const files = typeof content === "string" ? { "SKILL.md": content } : content.files;
    const made = new Set([dir]);
    for (const [rel, text] of Object.entries(files)) {
      const parent = path.posix.dirname(`${dir}/${rel}`);
      if (!made.has(parent)) {
        await sandbox.exec(`mkdir -p ${quote(parent)}`);
        made.add(parent);
      }
      await sandbox.writeFile(`${dir}/${rel}`, text);
    }
    const skillPath = `${dir}/SKILL.md`;
    let meta;
    try {
      meta = JSON.parse(native.bashkitParseSkill(String(files["SKILL.md"] ?? ""), skillPath)).skill;
    } catch {
      meta = { name, description: `Skill: ${name}`, path: skillPath };
    }
    skills.push({ ...meta, path: skillPath });
  }
  return { skills };
}

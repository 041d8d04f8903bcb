// The tool descriptions the model reads. They describe what these tools actually do (where
// bashkit's text promised behaviour its code lacked, e.g. mtime-sorted globs or a persistent
// shell, the text here says what knap does).

export const BASH = `Runs a shell command (/bin/sh -c) in the working directory and returns its stdout, stderr and exit code.

Usage:
- Each call is a fresh shell: \`cd\` and variables do not carry over to the next call. Chain dependent commands with '&&'.
- Quote paths that contain spaces: cd "/path/with spaces".
- Optional timeout in milliseconds (at most 600000, 10 minutes). The whole process group is killed when it expires and the result says interrupted: true.
- Long output is cut in the middle: the first and last parts are kept with a note of how much was left out. Redirect to a file and use Read or Grep for big outputs.
- Set run_in_background to true for servers and other long-running commands: the call returns at once with the process id and a log file to read later.
- Prefer the dedicated tools: Glob to find files, Grep to search contents, Read to read, Edit/Write to change files.`;

export const READ = `Reads a text file, or lists a directory.

Usage:
- file_path may be absolute or relative to the working directory.
- Without limit, files of up to 500 lines are returned whole; for longer files pass offset (1-based first line) and limit (number of lines).
- Returns the selected lines with their line numbers; lines longer than 2000 characters are cut.
- Reading a directory returns its entries.
- Binary files (images, PDFs, archives, executables) are refused.`;

export const WRITE = `Writes a file, replacing it if it exists (missing parent directories are created).

Usage:
- file_path may be absolute or relative to the working directory.
- Read a file before replacing it; prefer Edit for changes to existing files.
- Do not create documentation files unless asked to.`;

export const EDIT = `Replaces exact text in a file.

Usage:
- Read the file first; old_string must match the file exactly, indentation included.
- old_string must occur exactly once unless replace_all is true (then every occurrence is replaced).
- new_string is inserted literally (no $& or $1 patterns) and must differ from old_string.`;

export const GLOB = `Finds files by glob pattern, newest first (by modification time), with no limit on the number of results.

Patterns:
- A pattern without '/' matches file names at any depth: "*.md", "*.{ts,tsx}".
- A pattern with '/' matches paths relative to the search directory: "src/**/*.ts" ('*' stays within a directory, '**' spans directories).
- path: the directory to search (default: the working directory).`;

export const GREP = `Searches file contents with a regular expression (ripgrep semantics: .gitignore'd and hidden files are skipped).

Output modes:
- "files_with_matches" (default): paths of the files that match.
- "content": matching lines with line numbers; -A/-B/-C add context lines after/before/around each match.
- "count": number of matches per file.

Options: glob filters files ("*.js", "*.{ts,tsx}"), type selects a file type ("js", "py", "rust"), -i ignores case, multiline lets patterns span lines.
Paging works in every mode: offset skips the first entries, head_limit caps how many are returned (0 or none: all). Results are sorted by path, so pages are stable.`;

export const PATCH_FIELD = `The patch, in the apply-patch format:

*** Begin Patch
*** Add File: path/to/new.ts
+line 1
+line 2
*** Update File: path/to/existing.ts
@@ optional context line to search from
 unchanged line
-removed line
+added line
*** Delete File: path/to/old.ts
*** End Patch

Rules:
- Add File: every content line starts with '+'.
- Update File: hunks of ' ' (context), '-' (remove) and '+' (add) lines; hunks after the first start with '@@' (optionally followed by a line to search from); '*** End of File' anchors a hunk at the end; '*** Move to: new/path' right after the header renames the file.
- Several files may be changed in one patch.`;

export const PATCH = `Applies a patch to one or more files: adds, deletes, updates and renames files in one call.

The whole patch is checked before anything is written: if any hunk does not apply, no file is changed and the error says which hunk failed. Context lines are matched exactly first, then ignoring trailing whitespace, then ignoring surrounding whitespace and typographic quotes/dashes.

Use Edit for a single replacement in one file; use Patch for multi-hunk or multi-file changes.`;

export const ASK_USER = `Asks the user 1-4 short multiple-choice questions and waits for the answers.

Use it when several reasonable approaches exist and the user's preference matters, or when information needed to continue is missing. Do not use it for things you can reasonably decide or infer.

Each question needs a snake_case id, a header of at most 12 characters and 2-3 mutually exclusive options (put the recommended one first and end its label with "(Recommended)"; do not add an "Other" option, the client adds one). Set multiSelect to true only when several options may be chosen.`;

export const ENTER_PLAN_MODE = `Enters plan mode before a non-trivial task: explore with Read, Grep and Glob, design an approach, then call ExitPlanMode with the plan for the user to review.

Use it when the task adds functionality, can be done in several ways, touches several files, or its requirements are unclear. Skip it for small, obvious changes.

While plan mode is active, tools that change things (Bash, Write, Edit) may be blocked.`;

export const EXIT_PLAN_MODE = `Ends plan mode and submits the plan for review. Call it once the plan is complete; afterwards the blocked tools are available again.`;

export const TASK = `Launches a sub-agent that works on a task on its own and returns its final answer.

- Give a short (3-5 word) description and a complete, self-contained prompt: the sub-agent sees nothing of this conversation.
- subagent_type picks a configured agent type; system_prompt and tools (a list of tool names) override its defaults.
- Several Task calls in one message run concurrently.
- The result is for you, not the user: summarise it for them.
- Do not use it for a single file read or a search you can do directly with Read, Glob or Grep.`;

export const TODO_WRITE = `Creates and updates a structured todo list for the current work, so progress is visible.

Use it for tasks of three or more steps or when the user gives several tasks. Mark a task in_progress before starting it (one at a time) and completed as soon as it is done. Each todo has content (imperative: "Run tests"), activeForm (continuous: "Running tests") and a status: pending, in_progress or completed.`;

export const WEB_SEARCH = `Searches the web and returns results with titles, URLs and snippets. Use it for current information beyond your knowledge.

- allowed_domains / blocked_domains restrict the sources.
- Include the current year in queries about recent events or documentation.
- After answering from search results, list the URLs you used under "Sources:" as markdown links.`;

export const WEB_FETCH = `Fetches a URL and answers a prompt about its content.

- The URL must be complete (with http:// or https://).
- The page is converted to text; with a model configured the prompt is answered from it, otherwise the text itself is returned.
- Redirects are followed; final_url says where the content came from.
- Read-only: it never changes files.`;

export const SKILL = `Activates a skill: loads its instructions (from its SKILL.md) for you to follow. The available skills are listed in the system prompt.`;

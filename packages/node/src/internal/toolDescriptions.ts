/**
 * What the model reads about each coding tool. Kept in one module so that wording can be reviewed
 * and tuned in one place; the texts are stable (they are part of every request's cached prefix).
 *
 * @example
 * ```ts
 * Tools.make({ name: "read_file", description: READ_FILE, ... })
 * ```
 */

export const READ_FILE = `Read a text file from the workspace. Returns its lines numbered from 1 ("     1\\tfirst line").
Use offset (first line, 1-based) and limit (number of lines) to read part of a large file. Output is capped
(256 KiB by default, less for models with a small context); when it is cut, the note says which lines were
shown and the offset to continue from.
Binary files (NUL bytes or invalid UTF-8) are not shown. Paths are relative to the workspace root.`

export const WRITE_FILE = `Create a file or replace its whole content. Parent directories are created. Prefer edit_file
to change part of an existing file. Returns the path, sha256 of the content before (null if the file was new)
and after, and a unified diff.`

export const EDIT_FILE = `Edit a file by exact text replacement. Each edit replaces old_text with new_text; old_text must
match the file exactly (including whitespace and indentation) and occur exactly once, unless replace_all is
true. Include enough surrounding lines to make old_text unique. Several edits in one call are applied in
order, each to the result of the previous one, and all or nothing: if any edit fails, the file is left
unchanged. Returns the path, sha256 before and after, and a unified diff.`

export const LIST_FILES = `List files under a directory of the workspace (default: the root), in path order. Skips .git and
files ignored by .gitignore, .ignore or .rgignore. pattern is a glob: one without "/" matches file names at any
depth (e.g. "*.ts"), one with "/" matches the path relative to the listed directory (e.g. "src/**/*.test.ts").
The listing stops at its limit (1000 entries by default); the note says when more files exist.`

export const GREP = `Search file contents with a regular expression. Returns the first matching lines as "path:line: text",
in path order, with how many lines match in all and in how many files. Skips .git, binary files and files
ignored by .gitignore, .ignore or .rgignore. path narrows the search to a directory or file; glob filters file
names (e.g. "*.py", or "src/**/*.ts" relative to path); ignore_case makes the match case-insensitive. Results
are capped (200 matches by default); narrow the search when the note says more exist.`

export const RUN_SHELL = `Run a shell command (sh -c) in the workspace root and return its exit code and combined
stdout/stderr. A non-zero exit code is a normal result. Timeout: 120000 ms by default, at most 600000 ms
(timeout_ms); on timeout the command and every process it started are killed. Output is capped (64 KiB by
default): the END is kept and the start is cut, with a note saying how much. Background processes that keep the
output open are stopped when the command ends; redirect their output to a file to keep them running. Do not use
it to read, search or edit files when read_file, grep, list_files, edit_file or write_file can do it.
Commands usually run in a sandbox: they write only the workspace and /tmp (.git stays read-only, so git can read
but not commit), have no network, cannot read secrets in the home folder, and every process they start ends with
them. When the result says "blocked by the sandbox" and the command really needs that, call run_shell again with
unsandboxed: true: the user is asked whether it may run outside the sandbox.`

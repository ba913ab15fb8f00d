/**
 * Skills from `SKILL.md` files, in the format Claude Code and pi use, so existing skill files work
 * unchanged.
 *
 * A skill is a folder with a `SKILL.md`: YAML front matter with `name` and `description` (other
 * fields such as `allowed-tools`, `argument-hint` or `license` are kept in `frontMatter`), and a
 * Markdown body with the instructions:
 *
 * ```markdown
 * ---
 * name: release-notes
 * description: Write release notes for the changes since the last tag.
 * ---
 * Read the git log since the last tag and write RELEASE_NOTES.md …
 * Focus on: $ARGUMENTS
 * ```
 *
 * Folders searched, first match of a name wins:
 *
 * 1. `<projectDir>/.muse/skills/<skill>/SKILL.md`
 * 2. `<projectDir>/.claude/skills/<skill>/SKILL.md`
 * 3. `<userDir>/.muse/skills/<skill>/SKILL.md` (`userDir` defaults to the home directory)
 *
 * Running `/release-notes focus on the API` sends the instructions and the arguments to the agent
 * the skill runs for (`$ARGUMENTS` in the body is replaced by them; otherwise they are appended).
 * A malformed file becomes a `SkillFileError` naming the file and what is wrong, and the other
 * files still load.
 *
 * @example
 * ```ts
 * import { SkillFiles } from "@musekit/plugin-skills"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function* () {
 *   const { skills, errors } = yield* SkillFiles.load({ projectDir: process.cwd() })
 *   for (const e of errors) console.error(e.message) // ".claude/skills/x/SKILL.md: missing `description` …"
 *   return skills
 * })
 * ```
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Skill } from "@musekit/core"
import { Effect, Either, Schema } from "effect"
import { isMap, parseDocument } from "yaml"
import { passThrough } from "./internal/common.js"

/** A `SKILL.md` that could not be used; `message` names the file and what is wrong. */
export class SkillFileError extends Schema.TaggedError<SkillFileError>("@musekit/plugin-skills/SkillFileError")(
  "SkillFileError",
  {
    file: Schema.String,
    reason: Schema.String
  }
) {
  override get message() {
    return `${this.file}: ${this.reason}`
  }
}

export type Scope = "project" | "user"

/** A parsed `SKILL.md`. */
export interface SkillFile {
  readonly name: string
  readonly description: string
  /** The Markdown body: the instructions given to the model. */
  readonly instructions: string
  /** The whole front matter, including fields MuseKit does not use. */
  readonly frontMatter: Readonly<Record<string, unknown>>
  /** The file, absolute. */
  readonly file: string
  /** How the file is named to the model and in messages: relative to the project, or `~/…`. */
  readonly displayPath: string
  readonly scope: Scope
}

/** Same rule as `Skill.make`: lowercase letters, digits and '-', starting with a letter or digit. */
export const NAME_PATTERN = /^[a-z0-9][a-z0-9-]{0,63}$/

const MAX_DESCRIPTION = 1024

/** Parse the text of a `SKILL.md`; `file` is used in errors and as the skill's source. */
export const parse = (
  text: string,
  file: string,
  options: { readonly displayPath?: string | undefined; readonly scope?: Scope | undefined } = {}
): Either.Either<SkillFile, SkillFileError> => {
  const shown = options.displayPath ?? file
  const fail = (reason: string) => Either.left(new SkillFileError({ file: shown, reason }))
  const src = text.replace(/^\uFEFF/, "").replace(/\r\n?/g, "\n")
  const lines = src.split("\n")
  if (lines[0]?.trim() !== "---") {
    return fail(
      "no YAML front matter: the file must start with a line '---', then `name:` and `description:`, then '---'"
    )
  }
  const close = lines.findIndex((l, i) => i > 0 && /^(---|\.\.\.)\s*$/.test(l))
  if (close === -1) return fail("the YAML front matter is not closed: add a line '---' after it")
  const doc = parseDocument(lines.slice(1, close).join("\n"), { prettyErrors: true, uniqueKeys: true })
  if (doc.errors.length > 0) {
    const e = doc.errors[0]!
    const line = e.linePos?.[0]?.line
    const first = e.message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "")
    return fail(
      `invalid YAML in the front matter${line !== undefined ? ` (line ${line + 1} of the file)` : ""}: ${first}`
    )
  }
  if (!isMap(doc.contents)) {
    return fail("the front matter must be a YAML mapping with `name:` and `description:`")
  }
  const fm = doc.toJS() as Record<string, unknown>
  const name = fm.name
  if (name === undefined || name === null || name === "") return fail("missing `name` in the front matter")
  if (typeof name !== "string") return fail(`\`name\` must be a string, got ${JSON.stringify(name)}`)
  if (!NAME_PATTERN.test(name)) {
    return fail(
      `invalid name "${name}": use lowercase letters, digits and '-' (at most 64 characters, starting with a letter or digit)`
    )
  }
  const description = fm.description
  if (description === undefined || description === null || String(description).trim() === "") {
    return fail("missing `description` in the front matter: say what the skill does and when to use it")
  }
  if (typeof description !== "string") {
    return fail(`\`description\` must be a string, got ${JSON.stringify(description)}`)
  }
  if (description.length > MAX_DESCRIPTION) {
    return fail(`\`description\` is ${description.length} characters long; at most ${MAX_DESCRIPTION} are allowed`)
  }
  const instructions = lines
    .slice(close + 1)
    .join("\n")
    .trim()
  if (instructions === "") return fail("no instructions: the body after the front matter is empty")
  return Either.right({
    name,
    description: description.trim(),
    instructions,
    frontMatter: fm,
    file,
    displayPath: shown,
    scope: options.scope ?? "project"
  })
}

/** The message a skill file sends to the agent for `args`. */
export const message = (skill: SkillFile, args: string): string => {
  const hasPlaceholder = skill.instructions.includes("$ARGUMENTS")
  const body = hasPlaceholder ? skill.instructions.replaceAll("$ARGUMENTS", args) : skill.instructions
  const dir = path.posix.dirname(skill.displayPath.split(path.sep).join("/"))
  return [
    `<skill name="${skill.name}" file="${skill.displayPath}">`,
    `Base directory of this skill: ${dir}`,
    "",
    body,
    "</skill>",
    ...(!hasPlaceholder && args.trim() !== "" ? ["", `Arguments: ${args.trim()}`] : [])
  ].join("\n")
}

/** The skill for a parsed file: its run sends the instructions and the arguments to the agent in `SkillContext`. */
export const toSkill = (skill: SkillFile): Skill.Skill<string, Skill.SkillContext> =>
  Skill.make({
    name: skill.name,
    description: skill.description,
    instructions: skill.instructions,
    source: skill.displayPath,
    run: (args: string) =>
      passThrough(
        Effect.gen(function* () {
          const ctx = yield* Skill.SkillContext
          return yield* ctx.agent.send(message(skill, args), ctx.sendOptions)
        })
      )
  })

export interface LoadOptions {
  /** The project: `.muse/skills` and `.claude/skills` under it are searched. */
  readonly projectDir?: string | undefined
  /** The user's home: `.muse/skills` under it is searched (default `os.homedir()`; `null` skips it). */
  readonly userDir?: string | null | undefined
}

export interface Loaded {
  readonly skills: ReadonlyArray<Skill.Skill<string, Skill.SkillContext>>
  readonly files: ReadonlyArray<SkillFile>
  /** Files that could not be used; the others loaded. */
  readonly errors: ReadonlyArray<SkillFileError>
  /** Files whose name was already taken by a file found earlier (e.g. a user skill a project skill overrides). */
  readonly shadowed: ReadonlyArray<{ readonly name: string; readonly file: string; readonly by: string }>
}

/** The folders searched, in order of precedence. */
export const roots = (
  options: LoadOptions
): ReadonlyArray<{ readonly dir: string; readonly scope: Scope; readonly display: string }> => {
  const out: Array<{ dir: string; scope: Scope; display: string }> = []
  if (options.projectDir !== undefined) {
    out.push({ dir: path.join(options.projectDir, ".muse", "skills"), scope: "project", display: ".muse/skills" })
    out.push({ dir: path.join(options.projectDir, ".claude", "skills"), scope: "project", display: ".claude/skills" })
  }
  if (options.userDir !== null) {
    out.push({
      dir: path.join(options.userDir ?? os.homedir(), ".muse", "skills"),
      scope: "user",
      display: "~/.muse/skills"
    })
  }
  return out
}

const loadSync = (options: LoadOptions): Loaded => {
  const files: Array<SkillFile> = []
  const errors: Array<SkillFileError> = []
  const shadowed: Array<{ name: string; file: string; by: string }> = []
  const byName = new Map<string, SkillFile>()
  for (const root of roots(options)) {
    let entries: Array<fs.Dirent>
    try {
      entries = fs.readdirSync(root.dir, { withFileTypes: true })
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT" || (e as NodeJS.ErrnoException).code === "ENOTDIR") continue
      errors.push(new SkillFileError({ file: root.display, reason: `cannot read the folder: ${(e as Error).message}` }))
      continue
    }
    for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const dir = path.join(root.dir, entry.name)
      let isDir = entry.isDirectory()
      if (entry.isSymbolicLink()) {
        try {
          isDir = fs.statSync(dir).isDirectory()
        } catch {
          isDir = false
        }
      }
      if (!isDir) continue
      const file = path.join(dir, "SKILL.md")
      const display = `${root.display}/${entry.name}/SKILL.md`
      let text: string
      try {
        text = fs.readFileSync(file, "utf8")
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "ENOENT") continue
        errors.push(new SkillFileError({ file: display, reason: `cannot read the file: ${(e as Error).message}` }))
        continue
      }
      const parsed = parse(text, file, { displayPath: display, scope: root.scope })
      if (Either.isLeft(parsed)) {
        errors.push(parsed.left)
        continue
      }
      const earlier = byName.get(parsed.right.name)
      if (earlier) {
        shadowed.push({ name: parsed.right.name, file: display, by: earlier.displayPath })
        continue
      }
      byName.set(parsed.right.name, parsed.right)
      files.push(parsed.right)
    }
  }
  return { skills: files.map(toSkill), files, errors, shadowed }
}

/** Find and parse every `SKILL.md`; malformed files are returned as errors beside the skills. */
export const load = (options: LoadOptions): Effect.Effect<Loaded> => Effect.sync(() => loadSync(options))
